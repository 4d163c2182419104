"""The Wilson / domain-wall hopping term (native/src/dslash*.c): every ISA variant this CPU runs
against the straightforward reference, on both parities, Wilson (Ls 1) and domain wall; a free
field whose answer is known in closed form; covariance under a random gauge transformation."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hpcprobe import native
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.families.dslash import kernel as K
from hpcprobe.native import Team

#: Extents differ per direction, so a direction mixed up with another shows.
LAT = K.Lattice((4, 6, 2, 8))
#: Single precision against double: a few ulps per term, 8 directions.
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def team():
    with Team(sorted(os.sched_getaffinity(0))[:2]) as t:
        yield t


def test_the_gamma_matrices_are_hermitian_and_anticommute():
    g = K.gamma()
    for mu in range(4):
        assert np.allclose(g[mu], g[mu].conj().T)
        for nu in range(4):
            anti = g[mu] @ g[nu] + g[nu] @ g[mu]
            assert np.allclose(anti, 2 * np.eye(4) * (mu == nu))


def test_random_links_are_su3():
    u = K.random_su3(50, np.random.default_rng(0))
    assert np.allclose(u @ u.conj().transpose(0, 2, 1), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(u), 1)


@pytest.mark.parametrize("isa", native.supported_isas())
@pytest.mark.parametrize("ls", [1, 8, 16])
@pytest.mark.parametrize("parity", [0, 1])
def test_each_variant_matches_the_reference(team, isa, ls, parity):
    rng = np.random.default_rng(ls + 10 * parity)
    u, psi = K.random_gauge(LAT, rng), K.random_fermion(LAT, ls, rng)
    got = K.apply(team, isa, LAT, u, psi, parity)
    want = K.reference(u, psi).reshape(LAT.volume, ls, 4, 3)[LAT.parity_sites(parity)]
    assert K.relative_error(got, want) < TOLERANCE


def test_a_free_plane_wave_gets_its_closed_form(team):
    """U = 1 and psi(x) = exp(i p.x) chi: D psi = sum_mu (2 cos p_mu - 2i sin p_mu g_mu) psi."""
    ls = 4
    rng = np.random.default_rng(3)
    u = np.broadcast_to(np.eye(3, dtype=complex), (*LAT.shape, 4, 3, 3)).copy()
    p = [2 * np.pi * n / d for n, d in zip((1, 2, 1, 3), LAT.dims, strict=True)]
    t, z, y, x = np.indices(LAT.shape)
    phase = np.exp(1j * (p[0] * x + p[1] * y + p[2] * z + p[3] * t))
    chi = rng.normal(size=(ls, 4, 3)) + 1j * rng.normal(size=(ls, 4, 3))
    psi = phase[..., None, None, None] * chi
    g = K.gamma()
    m = sum(2 * np.cos(p[mu]) * np.eye(4) - 2j * np.sin(p[mu]) * g[mu] for mu in range(4))
    want = np.einsum("ij,...sjc->...sic", m, psi)
    assert K.relative_error(K.reference(u, psi), want) < 1e-12
    for parity in (0, 1):
        got = K.apply(team, native.best_isa(), LAT, u, psi, parity)
        flat = want.reshape(LAT.volume, ls, 4, 3)[LAT.parity_sites(parity)]
        assert K.relative_error(got, flat) < TOLERANCE


def test_a_gauge_transformation_commutes_with_the_operator(team):
    """U'(x) = g(x) U(x) g(x + mu)^+ and psi' = g psi give D' psi' = g D psi."""
    ls = 2
    rng = np.random.default_rng(4)
    u, psi = K.random_gauge(LAT, rng), K.random_fermion(LAT, ls, rng)
    g = K.random_su3(LAT.volume, rng).reshape(*LAT.shape, 3, 3)
    u2 = np.empty_like(u)
    for mu, ax in enumerate(K.AXIS):
        g_next = np.roll(g, -1, axis=ax)
        u2[..., mu, :, :] = g @ u[..., mu, :, :] @ g_next.conj().swapaxes(-1, -2)
    psi2 = np.einsum("...ab,...sib->...sia", g, psi)
    isa = native.best_isa()
    for parity in (0, 1):
        sites = LAT.parity_sites(parity)
        before = K.apply(team, isa, LAT, u, psi, parity)
        after = K.apply(team, isa, LAT, u2, psi2, parity)
        g_sites = g.reshape(LAT.volume, 3, 3)[sites]
        want = np.einsum("nab,nsib->nsia", g_sites, before)
        assert K.relative_error(after, want) < TOLERANCE


def test_impossible_lattices_and_slices_are_refused():
    for dims in ((3, 4, 4, 4), (4, 4, 4, 0)):
        with pytest.raises(OptionError, match="even"):
            K.Lattice(dims)
    rng = np.random.default_rng(0)
    lat = K.Lattice((2, 2, 2, 2))
    with pytest.raises(OptionError, match="ls 33"):
        K.Operator.of(lat, K.random_gauge(lat, rng), K.random_fermion(lat, K.MAX_LS + 1, rng), 0)


def _figure(action: str, l: int, ls: int, isa: str, value: float):  # noqa: E741
    from hpcprobe.results.model import Metric

    return Metric("dslash", "dslash", "Mflop/s", {"action": action, "l": l, "ls": ls,
                                                 "isa": isa, "flops_per_site": 1344},
                  [value * 0.99, value, value * 1.01])


def test_comparison_points_and_robustness_by_their_definitions():
    from hpcprobe.families.dslash import bench
    from hpcprobe.machine import topology
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import RunContext

    ctx = RunContext(topology.load_xml(Path(__file__).parent / "data" / "tiny-2c.xml"),
                     profiles.get("quick"), "scalar")
    ctx.metrics += [_figure("dwf", 12, 16, "avx2", 100.0), _figure("dwf", 12, 16, "scalar", 40.0),
                    _figure("dwf", 16, 16, "avx2", 80.0), _figure("dwf", 24, 12, "avx2", 70.0),
                    _figure("wilson", 16, 1, "avx2", 30.0)]
    bench._derived(ctx)
    points = {m.params["definition"]: m.samples for m in ctx.metrics
              if m.name == "comparison_point"}
    # 2017: DWF L=16 Ls=16; 2017-2020: mean of L=12 and 16 (the best variant of each);
    # 2020 onward needs L=32 too: not given
    assert points == {"DiRAC-ITT 2017": [80.0], "ITT 2017-2020": [90.0]}
    robust = [(m.params["l"], m.samples) for m in ctx.metrics if m.name == "robustness"]
    assert robust == [(12, [0.4])]


def test_the_family_runs_checks_and_stores(tmp_path):
    from conftest import hpcprobe

    out = tmp_path / "run.json"
    r = hpcprobe("run", "dslash", "--l", "4,6", "--quick", "--no-store", "--details",
                 "--json", str(out))
    assert r.code == 0, r.err
    import json

    from hpcprobe.results import model as results

    doc = json.loads(out.read_text())
    results.validate(doc)
    got = [m for m in doc["metrics"] if m["name"] == "dslash"]
    isas = set(native.supported_isas())
    assert {(m["params"]["action"], m["params"]["l"], m["params"]["ls"], m["params"]["isa"])
            for m in got} == {(a, v, ls, i) for v in (4, 6) for a, ls in
                              (("wilson", 1), ("dwf", 16), ("dwf", 12)) for i in isas}
    assert all(s > 0 for m in got for s in m["samples"])
    axpy = {m["params"]["l"]: m for m in doc["metrics"] if m["name"] == "axpy"}
    assert set(axpy) == {4, 6} and all(s > 0 for m in axpy.values() for s in m["samples"])
    assert axpy[6]["params"]["size_bytes"] >= 3 * 6 ** 4 * 96 * 0.9
    assert "Dslash per node" in r.out and "Comparison point, ITT 2020 onward" in r.out
    from hpcprobe.families.dslash import views

    [(slug, _, _)] = views.figures([results.Run.from_dict(doc)])
    assert slug == "dslash-volume"


def test_dslash_mistakes_are_one_line():
    from conftest import assert_user_error, hpcprobe

    assert_user_error(hpcprobe("run", "dslash", "--l", "5"), "--l")
    assert_user_error(hpcprobe("run", "dslash", "--l", "8,12,8"), "--l 8,12,8: 8 given twice")
    assert_user_error(hpcprobe("run", "dslash", "--ls", "16,16"), "16 given twice")
    assert_user_error(hpcprobe("run", "dslash", "--threads", "999"), "--threads")
    # fields of 9,000 GiB: refused before anything runs, by the dry run as by the run, in this
    # process and across ranks (a recorded machine's free memory is not known: its run checks)
    huge = ("--lattice", "400x400x400x400", "--quick", "--no-store")
    for extra in ((), ("--dry-run",), ("--layout", "core", "--ranks", "1", "--dry-run")):
        assert_user_error(hpcprobe("run", "dslash", *huge, *extra), "TiB of fields",
                          "choose a smaller --l or --lattice")
    recorded = Path(__file__).parent / "data" / "tiny-2c.xml"
    r = hpcprobe("run", "dslash", *huge, "--dry-run", "--input", str(recorded))
    assert r.code == 0 and "L=400" in r.out, r.err


def test_the_profile_volumes_that_do_not_fit_are_skipped_and_said(monkeypatch):
    from hpcprobe.families.dslash import bench
    from hpcprobe.machine import topology
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import RunContext

    ctx = RunContext(topology.discover(), profiles.get("quick"), "scalar")
    # room for 7.35 MiB of fields: L=8 needs at most 7.1 MiB (Ls 16), L=12 at least 7.6 (Wilson)
    monkeypatch.setattr(bench, "free_memory", lambda topo: int(14.7 * 2 ** 20))
    plan = bench.labels(ctx, bench.DslashOptions())
    skipped = [ln for ln in plan if "skipped" in ln]
    assert skipped and all("L=12" in ln and "MiB of fields" in ln for ln in skipped), plan
    assert any("L=8" in ln and "skipped" not in ln for ln in plan), plan
    # asked for by the user: refused
    with pytest.raises(UserError, match="L=12"):
        bench.labels(ctx, bench.DslashOptions(l=(8, 12)))
