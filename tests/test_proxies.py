"""The application proxies across real MPI ranks (native/mpi/hpb_proxy.c with the native core's
kernels): the Dslash halo exchange of projected half spinors on several rank grids, both comms
policies, against the numpy reference; the CG on boxes of a global grid against the reference
CG; a failed check discards the figures; the rank layouts and grids; `hpcprobe scale` weak and
strong; and the bad input of each. Nothing in the MPI path is mocked."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from conftest import MPI, assert_user_error, hpcprobe, interrupt_stalled, needs_mpi
from hpcprobe import native
from hpcprobe.common.errors import UserError
from hpcprobe.families.dslash import bench as dslash
from hpcprobe.families.dslash import kernel as K
from hpcprobe.families.dslash import ranks as R
from hpcprobe.machine import topology
from hpcprobe.measure import profiles
from hpcprobe.measure import scaling_views as scale_views
from hpcprobe.measure.family import RunContext
from hpcprobe.mpi import build, layouts
from hpcprobe.mpi.launchers import Layout
from hpcprobe.probes import proxy
from hpcprobe.results import model as results
from hpcprobe.results.model import Metric

pytestmark = pytest.mark.usefixtures("private_cache")
needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
WHERE = proxy.Where(None, None, 120.0)


def context() -> RunContext:
    return RunContext(topology.discover(), profiles.get("quick"), native.best_isa(),
                      oversubscribe=True)


def decomposition(n: int, grid: tuple[int, int, int, int], l: int = 4) -> R.Decomposition:  # noqa: E741
    """n ranks over this machine's CPUs (oversubscribed past them), one thread each."""
    cpus = sorted(os.sched_getaffinity(0))
    sets = tuple((cpus[i % len(cpus)],) for i in range(n))
    rk = layouts.Ranks("core", sets)
    return R.Decomposition(rk, Layout(tuple(s[0] for s in sets)), grid, ((l, l, l, l),))


# ------------------------------------------------------------------ layouts and grids

def test_rank_grids_put_the_last_directions_first():
    assert [layouts.grid(n, 4) for n in (1, 2, 4, 6, 8, 16)] == [
        (1, 1, 1, 1), (1, 1, 1, 2), (1, 1, 2, 2), (1, 1, 2, 3), (1, 2, 2, 2), (2, 2, 2, 2)]
    assert layouts.grid(128, 3) == (4, 4, 8) and layouts.grid(12, 3) == (2, 2, 3)
    assert layouts.parse_grid("1.1.2.4", 8, 4, "--rank-grid") == (1, 1, 2, 4)
    for bad in ("1.1.2", "1.1.1.3", "a.b.c.d", "0.1.1.8"):
        with pytest.raises(UserError):
            layouts.parse_grid(bad, 8, 4, "--rank-grid")


def test_a_lattice_splits_only_into_whole_even_extents():
    assert layouts.split((16, 16, 16, 32), (1, 1, 2, 4), "--lattice", 4, True) == (16, 16, 8, 8)
    for total, ranks in (((16, 16, 16, 12), (1, 1, 1, 8)),   # not whole
                         ((16, 16, 16, 12), (1, 1, 1, 4)),   # 3: odd
                         ((16, 16, 16, 8), (1, 1, 1, 4))):   # 2: below 4
        with pytest.raises(UserError, match="does not divide"):
            layouts.split(total, ranks, "--lattice", 4, True)


def test_grids_layouts_on_a_two_socket_nps4_node(nps4):
    numa = layouts.ranks(nps4, "numa")
    assert numa.first(8).sets == numa.sets and numa.first(8).cpus == tuple(s[0] for s in numa.sets)
    two = numa.first(16, ("n1", "n2"))
    assert two.hosts == ("n1",) * 8 + ("n2",) * 8 and two.sets == numa.sets * 2
    with pytest.raises(UserError, match="at most 8"):
        numa.first(9)
    with pytest.raises(UserError, match="multiple of 2"):
        numa.first(7, ("n1", "n2"))
    # Grid's recommended layout is the default: eight ranks of 16 threads, grid 1.2.2.2
    ctx = RunContext(nps4, profiles.get("quick"), "scalar")
    pl = layouts.place(nps4, None, None, None, None, 4)
    assert pl is not None and pl.layout.ranks == 8 and pl.grid == (1, 2, 2, 2)
    assert dslash.decomposition(ctx, dslash.DslashOptions(l=(16,))).locals == ((16,) * 4,)
    d = dslash.decomposition(ctx, dslash.DslashOptions(lattice=(32, 32, 32, 64)))
    assert d is not None and d.locals == ((32, 16, 16, 32),)


def test_one_numa_domain_runs_in_process(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), "scalar")
    assert dslash.decomposition(ctx, dslash.DslashOptions()) is None
    d = dslash.decomposition(ctx, dslash.DslashOptions(ranks=2, layout="core"))
    assert d is not None and d.layout.cpus == (0, 1) and d.grid == (1, 1, 1, 2)


# ------------------------------------------------------------------ the program

@needs_mpi
def test_the_proxies_build_against_the_core_once():
    exe = build.build(MPI, build.PROXY)
    assert exe.is_file() and exe != build.program(MPI, build.TESTS)
    stamp = exe.stat().st_mtime_ns
    assert build.build(MPI, build.PROXY) == exe and exe.stat().st_mtime_ns == stamp


@needs_mpi
def test_the_proxies_build_follows_the_core_content_not_its_time(tmp_path, monkeypatch):
    """A reinstall that rebuilt the same library keeps the proxies' build; another library
    (content or place) gets its own."""
    lib = tmp_path / "libhpcprobe_native.so"
    lib.write_bytes(b"one")
    monkeypatch.setattr(native, "lib_path", lambda: lib)
    tag = build.program(MPI, build.PROXY).name
    os.utime(lib, ns=(1, 1))  # the same bytes, written again
    assert build.program(MPI, build.PROXY).name == tag
    lib.write_bytes(b"two")
    assert build.program(MPI, build.PROXY).name != tag


@needs_mpi
@pytest.mark.parametrize("n,grid", [(1, (1, 1, 1, 1)), (2, (1, 1, 1, 2)), (2, (2, 1, 1, 1)),
                                    (4, (1, 2, 1, 2))])
def test_the_halo_exchange_matches_the_reference(n, grid):
    """Every variant and both policies, Wilson and domain wall, across the ranks."""
    ctx = context()
    isas = native.supported_isas()
    checks, samples, got = R.measure(ctx, decomposition(n, grid), (1, 8), isas,
                                     ("sequential", "overlapped"), 2, 0.001, WHERE)
    assert got.outcome.error is None, got.outcome.error
    assert {(c["isa"], c["policy"], c["ls"]) for c in checks} == {
        (i, p, ls) for i in isas for p in ("sequential", "overlapped") for ls in (1, 8)}
    assert all(c["error"] < dslash.CHECK_TOLERANCE for c in checks), checks
    assert {s["policy"] for s in samples} == {"sequential", "overlapped"}
    assert all(s["value"] > 0 and s["grid"] == list(grid) for s in samples)
    # each rank read its own binding: one thread each, on the CPU asked for
    assert len(got.binding.split(";")) == n and "?" not in got.binding


@needs_mpi
def test_a_failed_check_discards_the_figures(monkeypatch):
    """A wrong reference (every figure's check then fails) leaves no Dslash figure and an
    error per variant and policy."""
    monkeypatch.setattr(K, "reference", lambda u, psi: 2 * np.ones_like(psi))
    ctx = context()
    d = decomposition(2, (1, 1, 1, 2))
    dslash._run_ranks(ctx, dslash.DslashOptions(actions=("wilson",), comms=("overlapped",)), d)
    assert not [m for m in ctx.metrics if m.name == "dslash"]
    assert len(ctx.errors) == len(native.supported_isas())
    assert all("does not match the reference" in e for e in ctx.errors)


# ------------------------------------------------------------------ the families

@needs_mpi
@needs_two
def test_dslash_across_two_ranks_stores_the_table(tmp_path):
    out = tmp_path / "d.json"
    r = hpcprobe("run", "dslash", "--ranks", "2", "--layout", "core", "--l", "4,6", "--ls", "8",
                 "--quick", "--no-store", "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    got = [m for m in doc["metrics"] if m["name"] == "dslash"]
    assert {(m["params"]["l"], m["params"]["ls"], m["params"]["policy"]) for m in got} == {
        (v, ls, p) for v in (4, 6) for ls in (1, 8) for p in ("sequential", "overlapped")}
    assert {m["params"]["cpus"] for m in got} == {"0;1"}  # read back inside the ranks
    assert all(m["params"]["ranks"] == 2 and m["params"]["grid"] == "1.1.1.2" for m in got)
    halo = [m for m in doc["metrics"] if m["name"] == "halo"]
    assert {(m["params"]["l"], m["params"]["ls"]) for m in halo} == {(4, 1), (6, 1), (4, 8),
                                                                     (6, 8)}
    assert all(m["params"]["size_bytes"] == m["params"]["l"] ** 3 * m["params"]["ls"] * 48
               for m in halo)
    flat = " ".join(r.out.split())  # a caption wraps to its table's width, set by the figures
    assert "comms policies" in flat and "Halo exchange" in flat
    # Grid's memory table: both ranks' fields on this node's two cores
    axpy = {m["params"]["l"]: m for m in doc["metrics"] if m["name"] == "axpy"}
    assert set(axpy) == {4, 6} and all(m["params"]["ranks"] == 2 for m in axpy.values())
    assert axpy[6]["params"]["size_bytes"] >= 2 * 3 * 6 ** 4 * 96 * 0.9


@needs_mpi
@needs_two
def test_cg_across_two_ranks_matches_the_reference(tmp_path):
    out = tmp_path / "c.json"
    r = hpcprobe("run", "cg", "--ranks", "2", "--layout", "core", "--global", "24x20x16",
                 "--details",
                 "--quick", "--no-store", "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    [rate] = [m for m in doc["metrics"] if m["name"] == "gflops"]
    assert rate["params"]["grid"] == "24x20x8" and rate["params"]["rank_grid"] == "1.1.2"
    assert rate["params"]["cpus"] == "0;1"
    phases = {m["params"]["phase"] for m in doc["metrics"] if m["name"] == "phase_share"}
    assert phases == {"spmv", "dot", "update", "halo"}
    assert "halo %" in r.out


@needs_mpi
@pytest.mark.parametrize("seconds,low,high,want", [("1e-9", 2, 9, 2), ("0", 1, 3, 3),
                                                   ("1e9", 1, 4, 4)])
def test_cg_across_ranks_stops_at_its_budget(tmp_path, seconds, low, high, want):
    """The timed solves end when the next would pass --seconds (but never under --min-reps,
    never past --reps; 0: no budget): a launch whose solves run far slower than any guess
    still ends in its time."""
    cpus = sorted(os.sched_getaffinity(0))
    layout = Layout(tuple(cpus[i % len(cpus)] for i in range(2)))
    got = proxy.run(context(), "cg", layout,
                    ["cg", "--grid", "1.1.2", "--box", "8.8.8", "--iters", "5", "--reps",
                     str(high), "--min-reps", str(low), "--seconds", seconds], WHERE, tmp_path)
    assert got.outcome.error is None, got.outcome.error
    assert len(got.outcome.samples) == want


@needs_mpi
@needs_two
def test_scale_runs_weak_and_strong_and_stores_every_count(tmp_path):
    db = tmp_path / "s.db"
    out = tmp_path / "s.json"
    r = hpcprobe("scale", "cg", "--ranks", "1,2", "--grid", "16x16x8", "--quick", "--db",
                 str(db), "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    rates = {(m["params"]["mode"], m["params"]["ranks"]) for m in doc["metrics"]}
    assert rates == {("weak", 1), ("weak", 2), ("strong", 1), ("strong", 2)}
    runs = doc["provenance"]["scale"]["runs"]
    assert len(runs) == 4
    # the node sentinel of the series: every count's readings, each after the count it follows
    after = [r["after"] for r in doc["provenance"]["sentinel"]["readings"]]
    counts = [f"cg at {k} rank(s), {mode}" for mode in ("weak", "strong") for k in (1, 2)]
    assert after == [None, counts[0], counts[0], counts[1], counts[1], counts[2], counts[2],
                     counts[3]]
    with sqlite3.connect(db) as c:
        assert c.execute("select count(*) from runs").fetchone()[0] == 5
    assert "scaled speedup" in r.out and "efficiency %" in r.out
    # strong: the first count's problem (16x16x8 on one rank) split over two: 16x16x4
    r = hpcprobe("show", runs[3]["run_id"], "--db", str(db), "--json")
    assert r.code == 0, r.err
    strong = json.loads(r.out)
    assert strong["provenance"]["scale"]["mode"] == "strong"
    assert {m["params"]["grid"] for m in strong["metrics"] if m["name"] == "gflops"} == \
        {"16x16x4"}


@needs_mpi
@needs_two
def test_an_interrupted_scale_keeps_the_counts_that_ended(tmp_path):
    """SIGTERM while the second count runs, after it measured: the summary of the first count
    and both runs are stored, the second marked and no point of the series."""
    db, out = tmp_path / "s.db", tmp_path / "s.json"
    r = interrupt_stalled(signal.SIGTERM, tmp_path / "stalled", "cg", 2, True, "scale", "cg",
                          "--ranks", "1,2", "--grid", "16x16x8", "--quick", "--db", str(db),
                          "--json", str(out))
    assert r.code == 130 and "Traceback" not in r.err, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    assert [(m["params"]["mode"], m["params"]["ranks"]) for m in doc["metrics"]] == [("weak", 1)]
    assert doc["provenance"]["interrupted"] == {"benchmark": "cg at 2 rank(s), weak",
                                               "not_run": ["1 rank(s), strong",
                                                           "2 rank(s), strong"]}
    assert "interrupted (Ctrl-C or SIGTERM) during cg at 2 rank(s), weak; the figures it had " \
        "measured are kept in a run of their own, no point of the series; not run: 1 rank(s), " \
        "strong; 2 rank(s), strong" in doc["errors"]
    with sqlite3.connect(db) as c:
        stored = {json.loads(p)["scale"].get("ranks"): json.loads(p).get("interrupted")
                  for (p,) in c.execute("select provenance from runs")}
    assert stored == {1: None, 2: {"benchmark": "cg", "not_run": []},
                      None: doc["provenance"]["interrupted"]}


@needs_mpi
@needs_two
def test_scale_mpi_gives_the_collectives_aggregate_bandwidth(tmp_path):
    out = tmp_path / "m.json"
    r = hpcprobe("scale", "mpi", "--ranks", "2", "--max-size", "64KiB", "--quick",
                 "--no-store", "--json", str(out))
    assert r.code == 0, r.err
    [m] = json.loads(out.read_text())["metrics"]
    assert (m["unit"], m["params"]["mode"], m["params"]["ranks"]) == ("GB/s", "weak", 2)
    assert all(v > 0 for v in m["samples"])


def test_speedup_and_efficiency_from_the_rates():
    def rate(k: int, values: list[float]) -> Metric:
        return Metric("scale", "rate", "GFLOP/s", {"family": "cg", "mode": "strong",
                                                   "ranks": k, "base_ranks": 1, "figure": "x",
                                                   "run": str(k)}, values)

    run = results.Run("r", "2026-01-01T00:00:00+00:00", "h", "quick", ["scale"], {}, {},
                      [rate(1, [10.0, 10.2, 9.8, 10.1, 9.9]), rate(2, [15.0, 15.3, 14.7, 15.1])])
    [(key, pts)] = scale_views.series(run).items()
    assert key == ("cg", "strong", "x")
    one, two = pts
    assert (one.speedup, one.ideal) == (1.0, 1.0)
    assert two.speedup == pytest.approx(15.05 / 10.0) and two.ideal == 2.0
    assert two.efficiency == pytest.approx(15.05 / 20.0)
    assert two.low <= two.speedup <= two.high and two.high < 2.0
    [table] = scale_views.tables(run)
    assert table.rows[1][0] == "2" and table.rows[1][2] == "1.51"  # 15.05 / 10.0


# ------------------------------------------------------------------ bad input

def test_proxy_mistakes_are_one_line():
    cases = [
        (("run", "dslash", "--ranks", "2", "--layout", "core", "--lattice", "8x8x8x6"),
         "does not divide"),
        (("run", "dslash", "--l", "2"), "--l"),
        (("run", "dslash", "--ls", "0"), "--ls"),
        (("run", "dslash", "--ls", "33"), "--ls"),
        (("run", "dslash", "--ranks", "99", "--layout", "core"), "--ranks 99"),
        (("run", "dslash", "--ranks", "2", "--rank-grid", "1.1.1.3"), "--rank-grid"),
        (("run", "dslash", "--l", "8", "--lattice", "8x8x8x8"), "not both"),
        (("run", "cg", "--ranks", "2", "--layout", "core", "--global", "16x16x15"),
         "does not divide"),
        (("run", "cg", "--ranks", "2", "--rank-grid", "1.2"), "--rank-grid"),
        (("scale", "hpl", "--ranks", "1,2"), "--n"),
        (("scale", "dslash", "--rank-grid", "1.1.1.2"), "--rank-grid"),
        (("scale", "cg", "--ranks", "1,64"), "--ranks 64"),
        (("scale", "cg", "--ranks", "1,2,1"), "1 given twice"),
        (("scale", "dslash", "--ranks", "1,2", "--l", "400", "--dry-run"), "TiB of fields"),
        (("scale", "cg", "--ranks", "1,2", "--grid", "1200x1200x1200", "--dry-run"),
         "choose a smaller --grid"),
        (("scale", "memory"), "BENCHMARK"),
        (("scale", "mpi", "--ranks", "1,2"), "at least 2"),
        (("scale", "mpi", "--mode", "strong"), "weak"),
        (("scale", "mpi", "--tests", "barrier"), "collective"),
        (("run", "cg", "--ranks", "2", "--layout", "core", "--threads", "2"), "--threads"),
    ]
    for args, needle in cases:
        r = hpcprobe(*args, "--no-store")
        if needle == "BENCHMARK":  # argparse's own usage error
            assert r.code == 2 and "invalid choice" in r.err, r.err
            continue
        assert_user_error(r, needle)


def test_scale_dry_run_plans_every_count():
    r = hpcprobe("scale", "dslash", "--ranks", "1,2", "--l", "8", "--dry-run")
    assert r.code == 0, r.err
    assert r.out.count("rank(s):") == 4
    # weak: 8^4 a rank; strong at two ranks: the 8^4 lattice of one rank split in t
    assert "DWF Ls=16 L=8 " in r.out and "DWF Ls=16 L=8x8x8x4 " in r.out


@needs_mpi
def test_no_mpi_for_several_ranks_is_one_line(tmp_path):
    r = hpcprobe("run", "cg", "--ranks", "2", "--layout", "core", "--mpi", str(tmp_path),
                 "--no-store")
    assert_user_error(r, "mpi")


def test_replace_keeps_options_frozen():
    o = dslash.DslashOptions(l=(8,))
    assert replace(o, ranks=2).multi_rank and not o.multi_rank
