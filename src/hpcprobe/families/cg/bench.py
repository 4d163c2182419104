"""The cg benchmark on one node: HPCG's problem shape (27-point stencil, ELL rows, double
precision) solved by unpreconditioned CG on the team's threads, checked first against the
reference CG; its GFLOP/s with the flop count stated, the share of time in each phase, and the
memory bandwidth its traffic model implies against the STREAM triad measured in the same run.
One rank: the halo exchange between ranks comes with the multi-rank version (issue 15)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from hpcprobe.common.errors import MeasurementError
from hpcprobe.families.cg import solver
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import dram_working_set, elems_for
from hpcprobe.measure import options, sampling
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, bound_cpus, option, specs
from hpcprobe.native import Team
from hpcprobe.probes import stream
from hpcprobe.results.model import Metric

METRICS = (MetricSpec("gflops", "GFLOP/s"), *specs("GB/s", "higher", "bandwidth", "triad"),
           MetricSpec("bandwidth_fraction", "%"), MetricSpec("phase_share", "%", "lower"))
#: The solver is checked on this grid against the reference: the same iterations, residual
#: norms within CHECK_RTOL, and the solution (all ones) within CHECK_XTOL.
CHECK_GRID = (16, 12, 10)
CHECK_TOL, CHECK_RTOL, CHECK_XTOL = 1e-10, 1e-8, 1e-8
#: HPCG's CG sets: this many iterations a sample (the residual target is never met first).
ITERATIONS = 50
#: Share of the budget for the STREAM triad.
TRIAD_SHARE = 0.2


@dataclass(frozen=True)
class Settings:
    grid: tuple[int, int, int]
    budget_s: float


SETTINGS = {"quick": Settings((48, 48, 48), 2.0), "default": Settings((96, 96, 96), 8.0),
            "thorough": Settings((128, 128, 128), 40.0)}


def grid(text: str) -> tuple[int, int, int]:
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 2 or dims[0] * dims[1] * dims[2] >= 2 ** 31:
        raise argparse.ArgumentTypeError(f"{text}: give the grid as NXxNYxNZ, each at least 2, "
                                         "e.g. 96x96x96")
    return dims[0], dims[1], dims[2]


@dataclass(frozen=True)
class CgOptions:
    """What narrows `hpcprobe run cg`."""

    grid: tuple[int, int, int] | None = option(Flag(
        "--grid", "the CG proxy's grid NXxNYxNZ (default: per profile, 96x96x96; HPCG uses "
        "104^3 a rank)", parse=grid, metavar="NXxNYxNZ"))
    threads: tuple[int, ...] | None = option(options.THREADS)


def cores_of(ctx: RunContext, opts: CgOptions) -> tuple[int, ...]:
    """One thread per core, all of them or the first --threads (more with --oversubscribe)."""
    return place(ctx.topo, "one-per-core", max(opts.threads) if opts.threads else None,
                 ctx.oversubscribe).cpus


def labels(ctx: RunContext, opts: CgOptions | None) -> list[str]:
    opts = opts or CgOptions()
    g = opts.grid or SETTINGS[ctx.profile.name].grid
    n = len(cores_of(ctx, opts))
    return [f"check the solver against the reference CG on {'x'.join(map(str, CHECK_GRID))}",
            f"STREAM triad on {n} thread(s)",
            f"CG on {'x'.join(map(str, g))}, {ITERATIONS} iterations a sample, {n} thread(s)"]


def check(team: Team) -> str | None:
    """None when the native CG matches the reference; else what differs."""
    got = solver.solve(team, CHECK_GRID, 1000, CHECK_TOL)
    x, hist = solver.reference(CHECK_GRID, 1000, CHECK_TOL)
    if got.iterations != len(hist) - 1:
        return f"{got.iterations} iterations, the reference {len(hist) - 1}"
    off = np.abs(got.history - hist) - CHECK_RTOL * hist  # rounding: relative, and
    if not float(np.max(off)) <= 1e-12 * hist[0]:  # absolute once converged
        return f"residual norms differ by up to {float(np.max(np.abs(got.history - hist))):.1e}"
    err = float(np.max(np.abs(got.x - 1)))
    if not err <= CHECK_XTOL:
        return f"the solution is off by {err:.1e}"
    return None


def run(ctx: RunContext, opts: CgOptions | None) -> None:
    opts = opts or CgOptions()
    g = opts.grid or SETTINGS[ctx.profile.name].grid
    cores = cores_of(ctx, opts)
    budget = SETTINGS[ctx.profile.name].budget_s
    ctx.progress.start("cg", 3)
    with Team(cores) as team:
        why = check(team)
        ctx.progress.advance("cg: solver checked")
        if why is not None:
            raise MeasurementError(f"cg: the native CG does not match the reference ({why}); "
                                   "no figures")
        binding = bound_cpus(ctx, team, "cg")
        elems = elems_for("triad", dram_working_set(ctx.topo, cores), len(cores))
        team.stream_prepare(elems)
        m = stream.Measurement("triad", "triad", "regular", "one-per-core", cores, elems, "DRAM")
        triad = stream.measure(ctx, team, m, TRIAD_SHARE * budget, "cg")
        ctx.progress.advance("cg: STREAM triad")
        solves: list[solver.Solve] = []

        def take(n: int) -> list[float | None]:
            out: list[float | None] = []
            for _ in range(n):
                s = solver.solve(team, g, ITERATIONS, 1e-300)
                solves.append(s)
                out.append(s.flops() / s.total_s / 1e9)
            return out

        got = sampling.sample(take, ctx.profile.repetition, (1 - TRIAD_SHARE) * budget,
                              warmup=False)
        ctx.progress.advance("cg: solved")
    if not got.samples:
        raise MeasurementError("cg: no solve finished within the budget")
    kept = solves[-len(got.samples):]  # the first solve, dropped by the sampler, is not kept
    params = {"grid": "x".join(map(str, g)), "threads": len(cores), "cpus": binding,
              "iterations_per_sample": ITERATIONS, "nonzeros": solver.nonzeros(g),
              "flops_per_iteration": kept[0].flops() / kept[0].iterations,
              "bytes_per_row": solver.BYTES_PER_ROW}
    ctx.record("cg", f"CG {params['grid']}", got)
    bandwidth = [s.bytes() / s.total_s / 1e9 for s in kept]
    triad_mid = float(np.median(triad))
    ctx.metrics += [
        Metric("cg", "gflops", "GFLOP/s", params, got.samples),
        Metric("cg", "bandwidth", "GB/s", dict(params), bandwidth),
        Metric("cg", "triad", "GB/s", {"threads": len(cores), "cpus": binding,
                                       "size_bytes": m.size_bytes}, triad),
        Metric("cg", "bandwidth_fraction", "%", dict(params),
               [100 * b / triad_mid for b in bandwidth]),
        *(Metric("cg", "phase_share", "%", dict(params, phase=phase),
                 [100 * getattr(s, attr) / s.total_s for s in kept], "lower")
          for phase, attr in (("spmv", "spmv_s"), ("dot", "dot_s"), ("update", "update_s")))]
