"""The roofline derived from a run's peaks and bandwidths (pure)."""

import pytest

from hpcprobe.families.roofline.derive import derive
from hpcprobe.results.model import Metric


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
