"""The dslash benchmark across MPI ranks: the lattice split over a 4-D grid of ranks, one
launch of the proxies' program (native/mpi/hpb_proxy.c) that first checks every variant and
comms policy against the reference on a small lattice (fields and the expected result written
here from kernel.reference), then times each point; and Grid's halo-exchange table from the MPI
family's halo test (one definition of the exchange and its byte count)."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe import native
from hpcprobe.common import lazy
from hpcprobe.families.dslash import kernel as K
from hpcprobe.measure.family import RunContext
from hpcprobe.mpi import build
from hpcprobe.mpi.layouts import Placement
from hpcprobe.probes import proxy
from hpcprobe.results.model import Metric

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

#: Each rank's extent of the check lattice in every direction (boundary and interior sites).
CHECK_L = 4
#: Comms policies: name -> the program's bit.
POLICIES = {"sequential": 1, "overlapped": 2}
#: The halo test's site: a Wilson half spinor in single precision (Grid's count, as the MPI
#: family's halo test).
HALO_SITE_BYTES = 48


@dataclass(frozen=True)
class Decomposition(Placement):
    """How the lattice is split: the ranks (layout and rank grid x, y, z, t) and each rank's
    local lattices (one per local volume asked)."""

    locals: tuple[tuple[int, int, int, int], ...]


def label(dims: tuple[int, ...]) -> str:
    """L for an L^4 local volume, else XxYxZxT."""
    return str(dims[0]) if len(set(dims)) == 1 else "x".join(map(str, dims))


def check_file(path: Path, grid: tuple[int, ...], ls: int, rng: np.random.Generator) -> None:
    """Random SU(3) links and a Gaussian field on the global check lattice, and the reference
    hopping term of it, as the program reads them (float32, site order t, z, y, x)."""
    lat = K.Lattice(tuple(CHECK_L * g for g in grid))  # type: ignore[arg-type]
    u = K.random_gauge(lat, rng)
    psi = K.random_fermion(lat, ls, rng)
    want = K.reference(u, psi)

    def floats(z: np.ndarray) -> np.ndarray:
        return np.stack([z.real, z.imag], axis=-1).astype("<f4").ravel()

    path.write_bytes(np.concatenate([floats(u), floats(psi), floats(want)]).tobytes())


def measure(ctx: RunContext, d: Decomposition, lss: tuple[int, ...], isas: list[str],
            policies: tuple[str, ...], reps: int, sample_s: float, where: proxy.Where
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], proxy.Launched]:
    """One launch: the checks (each variant, policy and Ls) and the samples of every point."""
    ids = [str(native.isa_id(i)) for i in isas]
    with tempfile.TemporaryDirectory(prefix="hpcprobe-dslash-") as tmp:
        base = Path(tmp) / "check"
        rng = np.random.default_rng(7)
        for ls in lss:
            check_file(Path(f"{base}.ls{ls}"), d.grid, ls, rng)
        args = ["dslash", "--grid", d.grid_text, "--ls", ",".join(map(str, lss)),
                "--isa", ",".join(ids), "--policies", str(sum(POLICIES[p] for p in policies)),
                "--reps", str(reps), "--sample-s", f"{sample_s:g}", "--check", str(base),
                "--check-l", str(CHECK_L)]
        if len(d.locals) == 1 and len(set(d.locals[0])) > 1:
            args += ["--dims", ".".join(map(str, d.locals[0]))]
        else:
            args += ["--l", ",".join(str(v[0]) for v in d.locals)]
        got = proxy.run(ctx, "dslash", d.layout, args, where, Path(tmp))
    return got.outcome.checks, got.outcome.samples, got


def halo(ctx: RunContext, d: Decomposition, lss: tuple[int, ...], where: proxy.Where
         ) -> list[Metric]:
    """Grid's halo table through the MPI family's halo test: per local volume L and Ls, the
    faces of L^3 x Ls half spinors exchanged with both neighbours in every split direction."""
    cubic = [v[0] for v in d.locals if len(set(v)) == 1]  # the halo test takes L^4 volumes
    if d.layout.ranks < 2 or not cubic:
        return []
    out: list[Metric] = []
    for ls in lss:
        args = ["--tests", "halo", "--reps", "5", "--min-reps", "3", "--iter-scale", "0.1",
                "--halo-l", ",".join(map(str, cubic)), "--halo-ls", str(ls),
                "--site-bytes", str(HALO_SITE_BYTES)]
        with tempfile.TemporaryDirectory(prefix="hpcprobe-halo-") as tmp:
            outcome = proxy.run(ctx, "dslash", d.layout, args, where, Path(tmp),
                                build.TESTS).outcome
        if outcome.error:
            ctx.errors.append(f"dslash: the halo exchange test (Ls={ls}): {outcome.error}")
        groups: dict[int, list[dict[str, Any]]] = {}
        for s in outcome.samples:
            groups.setdefault(s["l"], []).append(s)
        for l, ss in groups.items():  # noqa: E741
            params = {"l": l, "ls": ls, "ranks": d.layout.ranks, "nodes": d.nodes,
                      "faces": ss[0]["faces"], "dims": ".".join(map(str, ss[0]["dims"])),
                      "size_bytes": ss[0]["size"], "site_bytes": HALO_SITE_BYTES}
            out += [Metric("dslash", "halo", "MB/s", params, [s["value"] for s in ss]),
                    Metric("dslash", "halo_bidir", "MB/s", dict(params),
                           [s["bidir"] for s in ss])]
    return out


def metrics(d: Decomposition, samples: list[dict[str, Any]], passed: set[tuple[str, str, int]],
            binding: str, mpi: str) -> list[Metric]:
    """Mflop/s per node of each point (only of a variant, policy and Ls that passed its check:
    the others' figures are discarded), and the share of each step's time spent projecting faces and
    waiting for them."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for s in samples:
        key = (label(tuple(s["dims"])), str(s["ls"]), s["isa"], s["policy"])
        groups.setdefault(key, []).append(s)
    out = []
    for (vol, ls_text, isa, policy), ss in groups.items():
        ls = int(ls_text)
        if (isa, policy, ls) not in passed:
            continue
        params: dict[str, Any] = {
            "action": "wilson" if ls == 1 else "dwf", "l": int(vol) if vol.isdigit() else vol,
            "ls": ls, "isa": isa, "policy": policy, "ranks": d.layout.ranks, "nodes": d.nodes,
            "grid": d.grid_text, "layout": d.ranks.layout, "threads": d.ranks.threads,
            "cpus": binding, "mpi": mpi, "flops_per_site": K.FLOPS_PER_SITE}
        out += [Metric("dslash", "dslash", "Mflop/s", params,
                       [s["value"] / d.nodes for s in ss]),
                Metric("dslash", "comms_share", "%", dict(params),
                       [100 * s["comm_s"] / s["seconds"] for s in ss], "lower")]
    return out


def reps_for(budget_s: float, points: int, sample_s: float, least: int, most: int) -> int:
    """Samples a point: its share of the budget in samples of sample_s, within the profile's
    bounds."""
    return max(least, min(most, math.floor(budget_s / max(1, points) / sample_s)))
