"""The roofline derived from a run's peaks and bandwidths (pure)."""

import pytest

from hpcprobe.families.roofline import views
from hpcprobe.families.roofline.derive import derive, port_ceilings
from hpcprobe.machine import cacheports, flopmodel
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Lines


def peak(precision, isa, op, threads, gflops):
    return Metric("compute", "peak", "GFLOP/s",
                  {"precision": precision, "isa": isa, "op": op, "threads": threads},
                  [gflops * f for f in (0.99, 1.0, 1.01)])


def bandwidth(level, kernel, threads, gbs, stores="regular"):
    return Metric("memory", "bandwidth", "GB/s",
                  {"level": level, "kernel": kernel, "stores": stores, "threads": threads,
                   "size_bytes": 1 << 20}, [gbs] * 3)


def test_ceilings_are_the_best_all_core_figures_and_ridges_their_ratio():
    metrics = [peak("dp", "avx2", "fma", 2, 110.0), peak("dp", "avx512", "fma", 2, 210.0),
               peak("dp", "avx512", "fma", 1, 107.0), peak("sp", "avx512", "fma", 2, 420.0),
               bandwidth("L1", "triad", 2, 700.0), bandwidth("L1", "load", 2, 830.0),
               bandwidth("DRAM", "triad", 2, 30.0), bandwidth("DRAM", "copy", 2, 42.0, "nt"),
               bandwidth("DRAM", "triad", 1, 15.0)]
    out = {(m.name, tuple(sorted(m.params.items()))): m for m in derive(metrics)}
    ceil = {m.params["precision"]: m for m in derive(metrics) if m.name == "compute_ceiling"}
    assert ceil["dp"].summary.median == pytest.approx(210.0)
    assert ceil["dp"].params["isa"] == "avx512" and ceil["dp"].params["threads"] == 2
    bw = {m.params["level"]: m for m in derive(metrics) if m.name == "bandwidth_ceiling"}
    assert bw["L1"].params["kernel"] == "load" and bw["DRAM"].summary.median == 42.0
    assert bw["DRAM"].params["stores"] == "nt"
    ridge = {(m.params["precision"], m.params["level"]): m.samples[0]
             for m in derive(metrics) if m.name == "ridge_point"}
    assert ridge[("dp", "DRAM")] == pytest.approx(210.0 / 42.0)
    assert ridge[("sp", "L1")] == pytest.approx(420.0 / 830.0)
    assert len(out) == 2 + 2 + 4


def test_nothing_without_both_halves():
    assert derive([peak("dp", "avx2", "fma", 2, 100.0)]) == []
    assert derive([bandwidth("DRAM", "triad", 2, 30.0)]) == []
    # no thread count in common: no roofline
    assert derive([peak("dp", "avx2", "fma", 4, 100.0), bandwidth("DRAM", "triad", 2, 30.0)]) == []


def clock(active, ghz):
    return Metric("compute", "clock", "GHz", {"load": "avx2", "active_cores": active},
                  [ghz * f for f in (0.98, 1.0, 1.02)])


def model(arch):
    return Metric("compute", "peak_model", "GFLOP/s",
                  {"precision": "dp", "isa": "avx2", "op": "fma", "threads": 1,
                   "microarch": arch}, [50.0] * 3)


def sweep(level, kernel, threads, size, gbs, isa="avx2"):
    return Metric("memory", "bandwidth", "GB/s",
                  {"level": level, "kernel": kernel, "stores": "regular", "threads": threads,
                   "size_bytes": size, "isa": isa, "phase": "sweep"}, [gbs] * 3)


def test_the_cache_ports_bound_a_kernel_by_its_loads_or_its_stores():
    zen3 = cacheports.PORTS["Zen 3"]  # 2 x 32 B loads + 1 x 32 B store, L2 fill 32 B
    assert zen3.bytes_per_cycle("L1", 2, 1, 256) == 96.0  # triad: 16 B loads, 8 B store
    assert zen3.bytes_per_cycle("L1", 1, 0, 256) == 64.0  # a load stream: the load ports
    assert zen3.bytes_per_cycle("L1", 0, 1, 256) == 32.0  # a store stream: the store port
    assert zen3.bytes_per_cycle("L2", 2, 1, 256) == 32.0  # 24 B counted, 24 B filled (RFO)
    assert zen3.bytes_per_cycle("L2", 2, 1, 256, regular_stores=False) == 48.0
    assert zen3.bytes_per_cycle("L1", 2, 1, 512) is None  # no AVX-512 on Zen 3: no figure
    assert zen3.bytes_per_cycle("L3", 2, 1, 256) is None
    assert cacheports.PORTS["Zen 5"].bytes_per_cycle("L1", 2, 1, 512) == 192.0
    for name, ports in cacheports.PORTS.items():  # every row is a table row, with a source
        assert any(m.name == name for m in flopmodel.MICROARCHS) and ports.source


def test_l1_and_l2_are_judged_against_the_ports_at_the_fastest_clock():
    metrics = [model("Zen 3"), clock(1, 3.0), clock(2, 2.8),
               peak("dp", "avx2", "fma", 2, 100.0),
               sweep("L1", "triad", 1, 16 << 10, 200.0), sweep("L1", "triad", 1, 32 << 10, 180.0),
               sweep("L2", "triad", 1, 48 << 10, 120.0),  # within an octave of L1: left out
               sweep("L2", "triad", 1, 256 << 10, 90.0), sweep("L2", "triad", 2, 1 << 20, 170.0),
               sweep("L1", "triad", 2, 64 << 10, 400.0), sweep("DRAM", "triad", 2, 1 << 30, 30.0)]
    got = {(m.params["level"], m.params["threads"]): m
           for m in derive(metrics) if m.name == "port_ceiling"}
    assert set(got) == {("L1", 1), ("L1", 2), ("L2", 1), ("L2", 2)}
    l1 = got[("L1", 1)]
    assert l1.params["size_bytes"] == 16 << 10 and l1.params["bytes_per_cycle"] == 96.0
    assert l1.summary.max == pytest.approx(96.0 * 3.0 * 1.02)  # the fastest clock sample
    assert got[("L2", 1)].params["size_bytes"] == 256 << 10  # not the 48 KiB point
    assert got[("L2", 2)].summary.max == pytest.approx(32.0 * 2.8 * 1.02 * 2)
    run = Run("r", "2026-11-27T00:00:00+00:00", "h", "default", ["memory", "compute"], {}, {},
              metrics + derive(metrics))
    [ports] = [b for b in views.tables(run) if isinstance(b, Lines)]
    text = "\n".join(ports.lines)
    assert "L1 triad (avx2, 16 KiB) on 1 core(s): 200.0 GB/s = 68 % of the ports' 293.8" in text
    assert "L2 triad (avx2, 256 KiB) on 1 core(s): 90.0 GB/s = 92 %" in text
    assert "ABOVE" not in text and "AMD 56665" in text


def test_a_figure_above_the_ports_is_said_and_a_core_without_a_row_has_no_ceiling():
    metrics = [model("Zen 3"), clock(1, 2.0), sweep("L1", "triad", 1, 16 << 10, 250.0)]
    run = Run("r", "2026-11-27T00:00:00+00:00", "h", "default", ["memory"], {}, {},
              metrics + port_ceilings(metrics))
    [ports] = [b for b in views.tables(run) if isinstance(b, Lines)]
    assert "ABOVE it: the ceiling or the figure is wrong" in ports.lines[1]
    assert port_ceilings([model("Sapphire/Emerald/Granite Rapids"), clock(1, 2.0),
                          sweep("L1", "triad", 1, 16 << 10, 250.0)]) == []
    assert port_ceilings([clock(1, 2.0), sweep("L1", "triad", 1, 16 << 10, 250.0)]) == []
