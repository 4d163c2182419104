"""Energy counters (RAPL through powercap): recorded trees of the layouts Linux gives a
2-socket Intel server (package, core and DRAM domains, the MMIO duplicate) and an AMD Zen 4
node (package and core), counters that wrap, files only root may read, a tree whose counters
advance while a benchmark runs, and a machine with none (this kind of VM)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from hpcprobe import native, registry
from hpcprobe.families.hpl import blas
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.machine import energy, facts
from hpcprobe.machine.sizing import in_cache
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.results.model import schema
from hpcprobe.views import terminal

#: RAPL's usual counter range: 2^32 x 61 uJ (Intel's energy unit on servers)
RANGE = 262143328850


def _zone(root: Path, zone: str, name: str, uj: int = 0, rng: int = RANGE) -> Path:
    d = root / zone
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{rng}\n")
    return d


def intel_2s(root: Path) -> Path:
    """Linux's powercap tree of a 2-socket Xeon: per package its core and DRAM subzones, and
    the MMIO interface's duplicate of package 0."""
    for s in (0, 1):
        _zone(root, f"intel-rapl:{s}", f"package-{s}", 1000)
        _zone(root, f"intel-rapl:{s}:0", "core", 500)
        _zone(root, f"intel-rapl:{s}:1", "dram", 200, 65712999613)
    _zone(root, "intel-rapl-mmio:0", "package-0", 1000)
    return root


def amd_zen4(root: Path) -> Path:
    """An AMD Zen 4 node's: the package and its cores, no DRAM domain."""
    _zone(root, "intel-rapl:0", "package-0", 7)
    _zone(root, "intel-rapl:0:0", "core", 3)
    return root


def test_the_domains_of_an_intel_and_an_amd_node(tmp_path):
    domains, why = energy.discover(intel_2s(tmp_path / "intel"))
    assert why is None
    assert [d.name for d in domains] == ["package-0", "package-0/core", "package-0/dram",
                                         "package-1", "package-1/core", "package-1/dram"]
    assert {d.range_uj for d in domains} == {RANGE, 65712999613}
    assert [d.name for d in domains if energy.whole(d.name)] == [
        "package-0", "package-0/dram", "package-1", "package-1/dram"]  # nothing counted twice
    domains, why = energy.discover(amd_zen4(tmp_path / "amd"))
    assert why is None and [d.name for d in domains] == ["package-0", "package-0/core"]


def test_a_counter_that_wraps_during_a_benchmark(tmp_path):
    root = amd_zen4(tmp_path)
    pkg = root / "intel-rapl:0" / "energy_uj"
    pkg.write_text(f"{RANGE - 1_000_000}\n")  # a joule short of its range
    meter = energy.Meter.of(root, poll_s=3600)  # no helper-thread reading: two reads alone
    meter.start()
    pkg.write_text("2500000\n")  # wrapped, then 2.5 J more
    meter.take("memory")
    assert meter.readings["memory"]["joules"]["package-0"] == pytest.approx(3.5)
    assert energy.advance(10, 4, 0) == 0  # no range known: never a negative figure


def test_counters_read_while_a_benchmark_runs_see_every_wrap(tmp_path):
    """The helper thread reads often enough to count each wrap: a counter driven round its
    range three times during one reading gives the whole energy."""
    root = _zone(tmp_path, "intel-rapl:0", "package-0", 0, rng=1_000_000).parent
    path = root / "intel-rapl:0" / "energy_uj"
    meter = energy.Meter.of(root, poll_s=0.005)
    meter.start()
    total = 0
    for _ in range(60):  # 60 steps of 0.05 J: 3 J, three times round a 1 J range
        total += 50_000
        path.write_text(f"{total % 1_000_000}\n")
        time.sleep(0.02)
    meter.take("compute")
    meter.stop()
    assert meter.readings["compute"]["joules"]["package-0"] == pytest.approx(3.0)
    assert meter.readings["compute"]["seconds"] > 0


def test_counters_only_root_may_read_say_so_with_the_fix(tmp_path, monkeypatch):
    root = amd_zen4(tmp_path)
    for f in root.glob("*/energy_uj"):
        f.chmod(0o400)
    monkeypatch.setattr(energy.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(energy.os, "access", lambda path, mode: False)
    domains, why = energy.discover(root)
    assert domains == [] and why is not None
    assert "readable by root only (Linux 5.10 and later)" in why and "chmod o+r" in why


def test_a_machine_without_counters_says_so_in_one_line(tmp_path):
    """This kind of VM: one line, never empty columns or zeros."""
    stored = energy.fact(tmp_path / "none")
    assert stored == {"measured": False, "why": stored["why"]}
    [line] = energy.line(stored)
    assert line.startswith("Energy: not measured: no RAPL counters under ")
    assert "a VM exposes none" in line and "0 J" not in line


def test_each_benchmark_has_its_energy_in_the_run(tiny, tmp_path, monkeypatch):
    """The whole path: a powercap tree whose package counter advances while the memory
    benchmark runs, the run's provenance holding its joules and seconds by domain, and the
    header saying them. The counter says what the kernel's file would at each read (100 W
    since the start): a writer thread, starved on a loaded machine, once left the idle
    reading at 0 W."""
    root = intel_2s(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    monkeypatch.setattr(energy, "POLL_S", 0.01)
    pkg = root / "intel-rapl:0" / "energy_uj"
    real, t0 = energy.read_text, time.perf_counter()

    def counter(path: Path) -> str | None:  # 100 W on package 0
        return f"{1000 + int(1e8 * (time.perf_counter() - t0))}\n" if path == pkg \
            else real(path)

    monkeypatch.setattr(energy, "read_text", counter)
    run = registry.execute(tiny, profiles.get("quick"), ["memory"], native.best_isa(),
                           {"memory": MemoryOptions(kernels=("triad",), stores=("regular",),
                                                    threads=(1,), size_bytes=64 << 10)},
                           NoProgress())
    kept = run.provenance["energy"]
    assert kept["measured"] and kept["source"] == energy.SOURCE
    got = kept["readings"]["memory"]
    assert got["seconds"] > 0 and set(got["joules"]) == set(kept["domains"])
    assert got["joules"]["package-0"] == pytest.approx(100 * got["seconds"], rel=0.3)
    assert got["joules"]["package-1"] == 0.0  # read, and it did not move
    header = "\n".join(facts.lines(run.provenance))
    assert "Energy (RAPL (Linux powercap): package-0, package-0/core" in header
    assert " W on average" in header
    console = Console(record=True, width=100)
    terminal.render(run, console, registry.views(), console)
    shown = console.export_text()
    assert "Energy (RAPL" in shown
    # --details: each benchmark's seconds, joules and watts, and each domain's joules
    assert "Energy by benchmark (RAPL (Linux powercap))" in shown
    [row] = [line for line in shown.splitlines() if line.startswith("│ memory ")]
    # the report's power over the run: the idle step before zero, then the memory benchmark's
    [(slug, _, fig)] = facts.figures([run])
    [drawn] = fig.axes[0].lines
    assert slug == "energy-timeline" and drawn.get_xdata()[0] < 0 < drawn.get_xdata()[-1]
    assert list(drawn.get_ydata()) == pytest.approx([100] * 4, rel=0.3)
    assert facts.figures([replace(run, provenance={})]) == []
    assert f"{got['joules']['package-0']:.1f}" in row


def test_a_peak_has_the_power_it_drew_and_its_figure_per_watt(tiny, tmp_path, monkeypatch):
    """A node whose package draws 120 W (its cores 80 W of it): the idle power before the
    first benchmark, each peak's power (the package alone: its cores are part of it) and its
    samples per watt, a headline of the verdict; the header says the idle power."""
    from hpcprobe.families.compute.bench import ComputeOptions
    from hpcprobe.families.compute.views import headlines

    root = amd_zen4(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    draws, t0 = {"package-0": 120.0, "package-0/core": 80.0}, time.perf_counter()
    monkeypatch.setattr(energy, "_uj", lambda d: int(  # counters that advance with the clock
        draws[d.name] * 1e6 * (time.perf_counter() - t0)) % d.range_uj)
    run = registry.execute(tiny, profiles.get("quick"), ["compute"], "scalar",
                           {"compute": ComputeOptions(isa="scalar", threads=(1,))},
                           NoProgress())
    power, per_watt = run.select("compute", "power"), run.select("compute", "peak_per_watt")
    assert power and len(power) == len(per_watt) == len(run.select("compute", "peak"))
    for p, w in zip(power, per_watt, strict=True):
        assert p.unit == "W" and p.params["domains"] == "package-0"
        assert p.summary.median == pytest.approx(120, rel=0.01)
        peak = next(m for m in run.select("compute", "peak")
                    if m.params.items() <= w.params.items())
        assert w.unit == "GFLOP/s/W"
        assert w.samples == pytest.approx([s / p.summary.median for s in peak.samples])
    assert {"compute.peak_per_watt_dp", "compute.peak_per_watt_sp"} <= {
        h.key for h in headlines(run)}
    idle = run.provenance["energy"]["idle"]
    assert idle["joules"]["package-0"] == pytest.approx(120 * idle["seconds"], rel=0.01)
    assert "120 W idle before the first benchmark" in "\n".join(facts.lines(run.provenance))
    jsonschema.validate(run.to_dict(), schema())
    console = Console(record=True, width=100)
    terminal.render(run, console, registry.views(), console,
                    registry.against(None).verdict(run, None), details=False)
    shown = console.export_text()
    assert "peak DP per watt, 1 cores" in shown and "GFLOP/s/W" in shown
    assert max(len(line) for line in shown.splitlines()) <= 100


def test_no_counter_adds_no_power_figure(tiny, monkeypatch, tmp_path):
    """Where nothing is read (this kind of VM), no power and no figure per watt: never a zero."""
    from hpcprobe.families.compute.bench import ComputeOptions

    monkeypatch.setattr(energy, "POWERCAP", tmp_path / "none")
    run = registry.execute(tiny, profiles.get("quick"), ["compute"], "scalar",
                           {"compute": ComputeOptions(isa="scalar", threads=(1,))},
                           NoProgress())
    assert run.select("compute", "peak") and not run.select("compute", "power")
    assert not run.select("compute", "peak_per_watt")
    assert "idle" not in run.provenance["energy"]


def test_a_figure_past_the_caches_has_the_power_it_drew_and_a_cache_figure_none(tiny, tmp_path,
                                                                      monkeypatch):
    """A STREAM point past the caches (DRAM, or just past the last cache) is sampled alone:
    its power and GB/s per watt; the cache figures, sampled in interleaved rounds, have no
    energy of their own and get none."""
    root = intel_2s(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    t0 = time.perf_counter()
    monkeypatch.setattr(energy, "_uj", lambda d: int(  # 50 W a package, 10 W its DRAM
        (10.0 if d.name.endswith("dram") else 50.0) * 1e6 * (time.perf_counter() - t0))
        % d.range_uj)
    opts = MemoryOptions(kernels=("triad",), stores=("regular",), threads=(1,),
                         size_bytes=16 << 20)
    run = registry.execute(tiny, profiles.get("quick"), ["memory"], native.best_isa(),
                           {"memory": opts}, NoProgress())
    [bw] = [m for m in run.select("memory", "bandwidth") if not in_cache(m.params["level"])]
    [power], [per] = run.select("memory", "power"), run.select("memory", "bandwidth_per_watt")
    assert power.params["domains"] == "package-0+package-0/dram+package-1+package-1/dram"
    assert power.summary.median == pytest.approx(120, rel=0.01)
    assert per.unit == "GB/s/W" and per.samples == pytest.approx(
        [s / power.summary.median for s in bw.samples])
    cached = MemoryOptions(kernels=("triad",), stores=("regular",), threads=(1,),
                           size_bytes=16 << 10)
    run = registry.execute(tiny, profiles.get("quick"), ["memory"], native.best_isa(),
                           {"memory": cached}, NoProgress())
    assert run.select("memory", "bandwidth") and not run.select("memory", "power")


def test_an_application_has_each_repetitions_power_joules_and_rate_per_watt(tiny, tmp_path,
                                                                           monkeypatch):
    """An application whose figure of merit is a rate, on a node drawing 90 W: each
    repetition's power and joules, its rate per watt (work per joule); neither is a headline
    and neither is taken for its work rate."""
    import re

    from hpcprobe.families.app import bench, views

    root = amd_zen4(tmp_path)
    monkeypatch.setattr(energy, "POWERCAP", root)
    t0 = time.perf_counter()
    monkeypatch.setattr(energy, "_uj", lambda d: int(
        (90.0 if d.name == "package-0" else 40.0) * 1e6 * (time.perf_counter() - t0))
        % d.range_uj)
    # each repetition long enough (0.3 s) that a busy machine's scheduling, a few ms
    # between the counters' reading and its time, stays inside the 2 % asked
    opts = bench.AppOptions(name="calc", argv=("sh", "-c", "sleep 0.3; echo value = 45"),
                            fom=re.compile(r"value = ([0-9.]+)"), unit="ops/s", repeat=3)
    run = registry.execute(tiny, profiles.get("quick"), ["app"], "scalar", {"app": opts},
                           NoProgress())
    [power], [joules] = run.select("app", "power"), run.select("app", "energy")
    [per] = run.select("app", "app:calc_per_watt")
    assert len(power.samples) == len(joules.samples) == len(per.samples) == 3
    assert power.samples == pytest.approx([90.0] * 3, rel=0.02)
    assert power.params["app"] == "calc" and power.params["domains"] == "package-0"
    assert per.unit == "ops/s/W" and per.samples == pytest.approx([0.5] * 3, rel=0.02)
    assert joules.unit == "J" and all(j > 0 for j in joules.samples)
    assert [h.key for h in views.headlines(run)] == ["app:calc"]
    assert bench.work_rate(run.metrics) == ([45.0] * 3, "ops/s")


def test_a_check_reads_no_idle_power(tiny, tmp_path, monkeypatch):
    """The health tier runs in a prolog at every job start: it makes no job wait a second for
    the idle power, though counters exist (a run does read it)."""
    monkeypatch.setattr(energy, "POWERCAP", amd_zen4(tmp_path))
    t0 = time.perf_counter()
    monkeypatch.setattr(energy, "_uj", lambda d: int(100e6 * (time.perf_counter() - t0))
                        % d.range_uj)
    run = registry.check_run(tiny, "scalar", names=["compute"])
    assert run.profile == "check" and run.select("compute", "peak")
    assert run.provenance["energy"]["readings"] and "idle" not in run.provenance["energy"]


def _drawing(monkeypatch, root: Path, watts: float) -> None:
    """Every counter of `root` advancing at `watts` with the clock, this meter's tree."""
    monkeypatch.setattr(energy, "POWERCAP", root)
    t0 = time.perf_counter()
    monkeypatch.setattr(energy, "_uj", lambda d: int(
        watts * 1e6 * (time.perf_counter() - t0)) % d.range_uj)


@pytest.mark.skipif(not blas.installed(), reason="no Debian BLAS installed")
def test_dgemm_power_is_read_over_its_timed_calls_alone(tmp_path, monkeypatch):
    """The DGEMM worker waits at its timed calls while the parent marks the counters, and
    says when they end: the window holds every timed call and not the worker's start-up,
    warm-up and check; its mean power is the node's."""
    _drawing(monkeypatch, amd_zen4(tmp_path), 150.0)
    meter = energy.Meter.of(poll_s=3600)
    meter.start()
    name, lib = sorted(blas.installed().items())[0]
    t0 = time.perf_counter()
    got = blas.dgemm(blas.Blas(name, lib), (min(os.sched_getaffinity(0)),), 3, 256, meter)
    whole = time.perf_counter() - t0
    meter.stop()
    assert got["error"] is None and len(got["samples"]) == 3
    drew = got["window"]
    timed = sum(2 * 256 ** 3 / g / 1e9 for g in got["samples"])
    assert timed <= drew.seconds < whole
    assert drew.watts == pytest.approx(150.0, rel=0.01) and drew.domains() == "package-0"
    # no meter (this kind of VM): the worker is not held, no window
    assert blas.dgemm(blas.Blas(name, lib), (0,), 1, 128)["window"] is None


def _xhpl(tmp_path: Path, seconds: float) -> Path:
    """A stand-in xhpl (rank 0 prints, the others leave) that runs 2.5 s and reports a solve
    of `seconds` at 30 GFLOP/s, its residual check passed."""
    exe = tmp_path / f"xhpl-{seconds:g}"
    exe.write_text(
        "#!/bin/sh\nrank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}\n"
        '[ "$rank" = 0 ] || exit 0\nsleep 2.5\n'
        f"echo 'WR11C2R4  1000  192  1  1  {seconds:.2f}  3.0e+01'\n"
        "echo '||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=  0.0026 ...... PASSED'\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.skipif(not (shutil.which("mpirun") and blas.installed()),
                    reason="mpirun or a BLAS missing (make system-deps)")
def test_hpl_and_dgemm_per_watt_over_their_timed_parts(tiny, tmp_path, monkeypatch):
    """A node drawing 200 W: HPL's power over its timed solve, as the polls bracket it, and
    Rmax per watt beside Rmax, a headline of the verdict, in the family's table and the JSON;
    DGEMM's power and GFLOP/s per watt beside each DGEMM."""
    from hpcprobe.families.hpl.bench import HplOptions
    from hpcprobe.families.hpl.views import headlines

    _drawing(monkeypatch, amd_zen4(tmp_path), 200.0)
    lib = sorted(blas.installed())[0]

    opts = HplOptions(xhpl=str(_xhpl(tmp_path, 2.0)), n=1000, blas=(lib,))
    run = registry.execute(tiny, profiles.get("quick"), ["hpl"], native.best_isa(),
                           {"hpl": opts}, NoProgress())
    [rmax], [power] = run.select("hpl", "rmax"), run.select("hpl", "power")[-1:]
    [per] = run.select("hpl", "rmax_per_watt")
    assert rmax.samples == [30.0] and power.params.items() >= rmax.params.items()
    assert power.summary.median == pytest.approx(200.0, rel=0.01)
    assert per.unit == "GFLOP/s/W" and per.samples == pytest.approx([30.0 / 200.0], rel=0.01)
    dgemm = run.select("hpl", "dgemm")
    assert len(run.select("hpl", "dgemm_per_watt")) == len(dgemm) > 0
    assert {h.key for h in headlines(run)} == {"hpl.rmax", "hpl.rmax_per_watt"}
    jsonschema.validate(run.to_dict(), schema())
    console = Console(record=True, width=200)
    terminal.render(run, console, registry.views(), console)
    shown = console.export_text()
    assert "HPL and DGEMM per watt" in shown and "0.150" in shown


def test_a_solve_is_cut_from_the_polls_that_bracket_it():
    """HPL reports a solve's seconds only when it ends: its energy runs from the first poll
    after (the poll that saw its line, less its seconds) to the poll before its line; a solve
    the polls do not bracket for half its length, or whose line no poll saw, has none."""
    from hpcprobe.families.hpl.bench import SOLVE_COVERED, solved

    trail = energy.Trail(None)
    # polls every 2 s from 1 s on, the package drawing 100 W
    trail.marks = [(float(t), {"package-0": 100_000_000 * t}) for t in range(1, 21, 2)]
    got = solved(trail, (17.0, 19.0), 10.0)  # its line seen at 19, not at 17: solved 9..17
    assert got is not None and (got.seconds, got.watts) == (8.0, 100.0)
    assert solved(trail, (17.0, 19.0), 40.0) is None  # 16 of 40 s bracketed at most
    assert 16.0 < SOLVE_COVERED * 40.0
    assert solved(trail, None, 10.0) is None
    assert trail.within(4.0, 4.5) is None and energy.Trail(None).mark() > 0
