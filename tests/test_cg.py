"""The CG proxy (native/src/cg.c): the matrix is HPCG's 27-point stencil, the native CG takes
the reference CG's iterations with its residual norms and reaches the known solution (all
ones), on grids whose extents differ; the family runs, stores and refuses bad grids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe import native
from hpcprobe.families.cg import bench, solver
from hpcprobe.machine import topology
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import dram_working_set
from hpcprobe.measure import profiles
from hpcprobe.measure.family import RunContext
from hpcprobe.native import Team
from hpcprobe.results import model as results


@pytest.fixture(scope="module")
def team():
    with Team(sorted(os.sched_getaffinity(0))[:2]) as t:
        yield t


def test_the_matrix_is_hpcgs_27_point_stencil():
    dims = (3, 4, 2)
    n = int(np.prod(dims))
    cols = [solver.apply(np.eye(n)[k].reshape(dims[::-1])).ravel() for k in range(n)]
    a = np.array(cols).T
    assert np.allclose(a, a.T) and np.all(np.diag(a) == 26)
    assert set(np.unique(a)) == {-1.0, 0.0, 26.0}
    assert np.count_nonzero(a) == solver.nonzeros(dims) == 7 * 10 * 4
    assert np.all(np.linalg.eigvalsh(a) > 0)  # SPD: CG applies


@pytest.mark.parametrize("dims", [(16, 12, 10), (5, 7, 3), (2, 2, 9)])
def test_native_cg_follows_the_reference_to_the_known_solution(team, dims):
    got = solver.solve(team, dims, 1000, 1e-10)
    x, hist = solver.reference(dims, 1000, 1e-10)
    assert got.iterations == len(hist) - 1
    # the same residual norms, down to rounding once CG has converged
    assert np.allclose(got.history, hist, rtol=1e-8, atol=1e-12 * hist[0])
    assert np.max(np.abs(got.x - 1)) < 1e-8 and np.max(np.abs(x - 1)) < 1e-8
    assert got.history[-1] <= 1e-10 * got.history[0]
    assert 0 < got.spmv_s + got.dot_s + got.update_s <= got.total_s * 1.05


def test_a_fixed_iteration_count_and_its_counts(team):
    got = solver.solve(team, (8, 8, 8), 5, 1e-300)
    assert got.iterations == 5 and len(got.history) == 6
    assert got.flops() == 5 * (2 * 22 ** 3 + solver.VECTOR_FLOPS_PER_ROW * 512)
    assert got.bytes() == 5 * solver.BYTES_PER_ROW * 512


def test_the_family_runs_and_stores(tmp_path):
    out = tmp_path / "run.json"
    r = hpcprobe("run", "cg", "--grid", "24x20x16", "--quick", "--no-store", "--details",
                 "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    got = {(m["name"], m["params"].get("phase")): m for m in doc["metrics"]}
    assert got[("gflops", None)]["params"]["grid"] == "24x20x16"
    assert all(s > 0 for s in got[("gflops", None)]["samples"])
    assert all(s > 0 for s in got[("bandwidth_fraction", None)]["samples"])
    shares = [sum(got[("phase_share", p)]["samples"][0] for p in ("spmv", "dot", "update"))]
    assert 0 < shares[0] <= 105
    assert "CG proxy" in r.out
    # 24x20x16 is far smaller than any DRAM working set: a cache's figure, said so
    err = " ".join(r.err.split())  # the warnings fold at 100 columns
    assert "cg: the grid 24x20x16 holds" in err and "no bound" in err
    assert any("cg: the grid 24x20x16" in w for w in doc["warnings"])


@pytest.mark.parametrize("xml,profile,per_node", [
    ("epyc-2s-nps4-128c.xml", "default", 8),  # a rank per NUMA domain, 8 a node
    ("xeon-2s-26c-smt.xml", "thorough", 2),
    ("epyc-2s-nps4-128c.xml", "quick", 8),
])
def test_the_default_grid_holds_the_dram_working_set(xml, profile, per_node):
    """The profile's box grows to the smallest cube (sides a multiple of 8) whose boxes, a
    node's ranks together, hold the triad's DRAM working set: a box the caches hold measures
    them (48^3 read 145 % of the DRAM triad on a guest whose L3 held it)."""
    topo = topology.load_xml(DATA / xml)
    dram = dram_working_set(topo, place(topo, "one-per-core", None, False).cpus)
    r = hpcprobe("run", "cg", "--dry-run", "--profile", profile, "--input", str(DATA / xml))
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.strip().startswith("CG on "))
    side = int(line.split()[2].split("x")[0])
    assert line.split()[2] == f"{side}x{side}x{side}" and side % bench.SIDE_STEP == 0
    assert per_node * solver.memory_bytes((side,) * 3) >= dram
    smaller = side - bench.SIDE_STEP
    assert smaller < bench.SETTINGS[profile].grid[0] or \
        per_node * solver.memory_bytes((smaller,) * 3) < dram
    assert "grown to" in r.out and "no bound" not in r.out
    # a grid given is taken as given, and said to be no DRAM figure where it is not one
    r = hpcprobe("run", "cg", "--dry-run", "--grid", "32x32x32", "--input", str(DATA / xml))
    assert r.code == 0 and "CG on 32x32x32 a rank" in r.out and "no bound" in r.out, r.out
    assert "grown to" not in r.out


def test_scale_keeps_the_profiles_grid():
    """Its counts share the caches differently: one box cannot be past them at every count."""
    r = hpcprobe("scale", "cg", "--ranks", "1,2", "--quick", "--dry-run")
    assert r.code == 0, r.err
    assert "48x48x48" in r.out and "grown to" not in r.out, r.out


def test_bad_grids_are_one_line():
    for bad in ("1x4x4", "4x4", "axbxc"):
        assert_user_error(hpcprobe("run", "cg", "--grid", bad), "--grid")
    # a box whose solves need 586 GiB: refused before anything runs, by the dry run as by the
    # run, in this process and across ranks; a recorded machine's free memory is not known
    huge = ("--quick", "--no-store")
    for extra in (("--grid", "1200x1200x1200"), ("--grid", "1200x1200x1200", "--dry-run"),
                  ("--global", "1200x1200x1200", "--layout", "core", "--ranks", "1",
                   "--dry-run")):
        assert_user_error(hpcprobe("run", "cg", *huge, *extra), "GiB", "choose a smaller --grid")
    recorded = Path(__file__).parent / "data" / "tiny-2c.xml"
    r = hpcprobe("run", "cg", "--grid", "1200x1200x1200", "--dry-run", "--input", str(recorded))
    assert r.code == 0 and "CG on 1200x1200x1200" in r.out, r.err


def test_a_default_grid_too_large_for_the_memory_free_stays_within_it(monkeypatch):
    """Grown as far as `fits` allows, no further, and then said to be no DRAM figure."""
    topo = topology.load_xml(DATA / "laptop-8c.xml")
    ctx = RunContext(topo, profiles.get("default"), native.best_isa())
    dram = dram_working_set(topo, bench.CgOptions().cores(ctx))
    profile = solver.memory_bytes(bench.SETTINGS["default"].grid)
    assert dram > 2 * profile
    free = int((profile + dram) / 2 / bench.MEMORY_SHARE)  # room for more than 96^3, not all
    monkeypatch.setattr(bench, "free_memory", lambda topo: free)
    g, grown, warning = bench.sized(ctx, bench.CgOptions(), (1, 1, 1), 1)
    assert solver.memory_bytes(g) <= bench.MEMORY_SHARE * free
    bigger = (g[0] + bench.SIDE_STEP,) * 3
    assert solver.memory_bytes(bigger) > bench.MEMORY_SHARE * free
    assert g[0] > bench.SETTINGS["default"].grid[0] and grown is not None
    assert warning is not None and "no larger box fits in the memory free" in warning
