"""The CG proxy (native/src/cg.c): the matrix is HPCG's 27-point stencil, the native CG takes
the reference CG's iterations with its residual norms and reaches the known solution (all
ones), on grids whose extents differ; the family runs, stores and refuses bad grids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_user_error, hpcprobe
from hpcprobe.families.cg import solver
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
    r = hpcprobe("run", "cg", "--grid", "24x20x16", "--quick", "--no-store", "--json", str(out))
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

