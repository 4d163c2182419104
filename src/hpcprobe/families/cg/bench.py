"""The cg benchmark on one node: HPCG's problem shape (27-point stencil, ELL rows, double
precision) solved by unpreconditioned CG on the team's threads, checked first against the
reference CG; its GFLOP/s with the flop count stated, the share of time in each phase, and the
memory bandwidth its traffic model implies against the STREAM triad measured in the same run.
One rank runs in this process; several ranks (a --layout, --ranks, --hosts or a node with
several NUMA domains) run the proxies' MPI program, a box of the grid a rank with HPCG's
26-neighbour halo exchange before each SpMV and the dot products summed over the ranks."""

from __future__ import annotations

import argparse
import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe.common import lazy
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.families.cg import solver
from hpcprobe.machine.sizing import dram_working_set, elems_for, free_memory, llc_bytes
from hpcprobe.measure import sampling
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, bound_cpus, option, specs
from hpcprobe.mpi import find, layouts
from hpcprobe.mpi.layouts import Placement
from hpcprobe.native import Team
from hpcprobe.probes import proxy, stream
from hpcprobe.results.model import Metric

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

METRICS = (MetricSpec("gflops", "GFLOP/s"), *specs("GB/s", "higher", "bandwidth", "triad"),
           MetricSpec("bandwidth_fraction", "%", derived=True),
           MetricSpec("phase_share", "%", "lower", derived=True))
#: The solver is checked on this grid against the reference: the same iterations, residual
#: norms within CHECK_RTOL, and the solution (all ones) within CHECK_XTOL.
CHECK_GRID = (16, 12, 10)
CHECK_TOL, CHECK_RTOL, CHECK_XTOL = 1e-10, 1e-8, 1e-8
#: HPCG's CG sets: this many iterations a sample (the residual target is never met first).
ITERATIONS = 50
#: Share of the budget for the STREAM triad.
TRIAD_SHARE = 0.2
#: The solves may take at most this share of the memory available (HPL sizes N by 80 %).
MEMORY_SHARE = 0.8
#: A default box grown past the caches has sides a multiple of this.
SIDE_STEP = 8


@dataclass(frozen=True)
class Settings:
    grid: tuple[int, int, int]
    budget_s: float
    iterations: int = ITERATIONS  # CG iterations a sample (quick: fewer, for a short look)


SETTINGS = {"quick": Settings((48, 48, 48), 2.0, 5), "default": Settings((96, 96, 96), 8.0, 20),
            "thorough": Settings((128, 128, 128), 40.0)}


def iterations(ctx: RunContext) -> int:
    """CG iterations a sample in the run's profile."""
    return SETTINGS[ctx.profile.name].iterations


def grid_of(text: str) -> tuple[int, int, int]:
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 2 or dims[0] * dims[1] * dims[2] >= 2 ** 31:
        raise argparse.ArgumentTypeError(f"{text}: give the grid as NXxNYxNZ, each at least 2, "
                                         "e.g. 96x96x96")
    return dims[0], dims[1], dims[2]


@dataclass(frozen=True)
class CgOptions(proxy.RankOptions):
    """What narrows `hpcprobe run cg`."""

    grid: tuple[int, int, int] | None = option(Flag(
        "--grid", "the CG proxy's grid a rank NXxNYxNZ (default: per profile, 96x96x96, grown "
        "until a node's boxes hold the DRAM working set, past the caches; HPCG uses 104^3 a "
        "rank)", parse=grid_of, metavar="NXxNYxNZ"))
    whole: tuple[int, int, int] | None = option(Flag(
        "--global", "a global grid split over the ranks instead of --grid (strong scaling)",
        parse=grid_of, metavar="NXxNYxNZ"))


def box(ctx: RunContext, opts: CgOptions, ranks: tuple[int, ...], per_node: int | None = None
        ) -> tuple[int, int, int]:
    """A rank's box: --grid, or --global divided over the rank grid, or the profile's grid,
    grown past the caches where `per_node` ranks of a node share them (None: as it is, for
    `hpcprobe scale`, whose counts share the caches differently)."""
    if opts.whole and opts.grid:
        raise OptionError("give the grid a rank (<grid>) or the global grid (<global>), not both")
    if opts.whole:
        x, y, z = layouts.split(opts.whole, ranks, "--global", 2, False)
        return x, y, z
    if opts.grid:
        return opts.grid
    g = SETTINGS[ctx.profile.name].grid
    return g if per_node is None else past_caches(ctx, g, opts.cores(ctx), per_node)


def past_caches(ctx: RunContext, g: tuple[int, int, int], cores: tuple[int, ...],
                per_node: int) -> tuple[int, int, int]:
    """The profile's box, or the smallest cube (sides a multiple of SIDE_STEP) whose boxes, a
    node's ranks together, hold the DRAM working set of the node's CPUs (STREAM's rule, the
    triad's own working set): HPCG's problem is memory-bound, and a box the caches hold
    measures them (docs/cg.md: 48^3 read 145 % of the DRAM triad where 184^3 read 68 %). At
    most what `fits` allows."""
    need = dram_working_set(ctx.topo, cores) / per_node
    if solver.memory_bytes(g) >= need:
        return g
    side = math.ceil(math.ceil((need / solver.MEMORY_PER_ROW) ** (1 / 3)) / SIDE_STEP) * SIDE_STEP
    avail = free_memory(ctx.topo)
    while avail and side > g[0] and \
            per_node * solver.memory_bytes((side,) * 3) > MEMORY_SHARE * avail:
        side -= SIDE_STEP
    return (side, side, side) if side > g[0] else g


def cached(ctx: RunContext, g: tuple[int, int, int], cores: tuple[int, ...], per_node: int
           ) -> str | None:
    """Why a node's boxes may be served by the caches (their bytes below the DRAM working set
    of the node's CPUs): the rate and implied bandwidth are then partly a cache's, and the
    share of the triad is no bound; None when they are DRAM-sized."""
    held = per_node * solver.memory_bytes(g)
    dram = dram_working_set(ctx.topo, cores)
    if held >= dram:
        return None
    return (f"cg: the grid {'x'.join(map(str, g))} holds {format_bytes(held)} a node, less than "
            f"the DRAM working set of its CPUs ({format_bytes(dram)}, the STREAM triad's; their "
            f"last-level cache: {format_bytes(llc_bytes(ctx.topo, cores))}): the caches may "
            "serve part of its traffic, so its rate and implied bandwidth are not memory's and "
            "its share of the DRAM triad is no bound")


def fits(ctx: RunContext, g: tuple[int, int, int], per_node: int) -> None:
    """Refuse a box whose solves, for all of a node's ranks, would take more than MEMORY_SHARE
    of the memory available where they run (none known for a recorded machine: its own run
    checks), before anything runs: the dry run as the run."""
    avail = free_memory(ctx.topo)
    need = per_node * solver.memory_bytes(g)
    if avail and need > MEMORY_SHARE * avail:
        ranks = f" for {per_node} ranks a node" if per_node > 1 else ""
        raise OptionError(f"cg: a grid of {'x'.join(map(str, g))} a rank needs "
                          f"{format_bytes(need)}{ranks}, more than {MEMORY_SHARE:.0%} of the "
                          f"{format_bytes(avail)} available; choose a smaller <grid> or <global>"
                          + (" or fewer ranks a node" if per_node > 1 else ""))


def sized(ctx: RunContext, opts: CgOptions, ranks: tuple[int, ...], per_node: int
          ) -> tuple[tuple[int, int, int], str | None, str | None]:
    """A rank's box for a run (`box`, checked by `fits`); how the default grew past the caches
    (None: it did not); why the caches may serve it (`cached`: a warning)."""
    g = box(ctx, opts, ranks, per_node)
    fits(ctx, g, per_node)
    cores = opts.cores(ctx)
    profile = SETTINGS[ctx.profile.name].grid
    grown = None
    if g != profile and not (opts.grid or opts.whole):
        grown = (f"the {ctx.profile.name} profile's {'x'.join(map(str, profile))} a rank grown "
                 f"to {'x'.join(map(str, g))}: a node's boxes hold the DRAM working set of its "
                 f"CPUs ({format_bytes(dram_working_set(ctx.topo, cores))})")
    warning = cached(ctx, g, cores, per_node)
    if warning:
        warning += (" (a --grid or --global whose boxes hold it measures memory)"
                    if opts.grid or opts.whole else " (no larger box fits in the memory free)")
    return g, grown, warning


def labels(ctx: RunContext, opts: CgOptions | None) -> list[str]:
    opts = opts or CgOptions()
    pl = opts.placement(ctx, 3)
    g, grown, warning = sized(ctx, opts, pl.grid if pl else (1, 1, 1),
                              pl.layout.ranks // pl.nodes if pl else 1)
    said = [x for x in (grown, warning) if x]
    if pl is not None:
        return [f"check the solver across the ranks against the reference CG on "
                f"{'x'.join(map(str, CHECK_GRID))} a rank",
                f"STREAM triad on {len(opts.cores(ctx))} thread(s) of this node",
                f"CG on {'x'.join(map(str, g))} a rank, {iterations(ctx)} iterations a sample, "
                f"{pl.layout.ranks} rank(s) x {pl.ranks.threads} thread(s) ({pl.ranks.layout} "
                f"layout, rank grid {pl.grid_text}, {pl.nodes} node(s))", *said]
    n = len(opts.cores(ctx))
    return [f"check the solver against the reference CG on {'x'.join(map(str, CHECK_GRID))}",
            f"STREAM triad on {n} thread(s)",
            f"CG on {'x'.join(map(str, g))}, {iterations(ctx)} iterations a sample, {n} thread(s)",
            *said]


def differs(iterations: int, history: np.ndarray, dims: tuple[int, int, int]) -> str | None:
    """None when a solve to CHECK_TOL took the reference's iterations with its residual norms;
    else what differs."""
    _, hist = solver.reference(dims, 1000, CHECK_TOL)
    if iterations != len(hist) - 1:
        return f"{iterations} iterations, the reference {len(hist) - 1}"
    off = np.abs(history - hist) - CHECK_RTOL * hist  # rounding: relative, and
    if not float(np.max(off)) <= 1e-12 * hist[0]:  # absolute once converged
        return f"residual norms differ by up to {float(np.max(np.abs(history - hist))):.1e}"
    return None


def check(team: Team) -> str | None:
    """None when the native CG matches the reference; else what differs."""
    got = solver.solve(team, CHECK_GRID, 1000, CHECK_TOL)
    why = differs(got.iterations, got.history, CHECK_GRID)
    if why is not None:
        return why
    err = float(np.max(np.abs(got.x - 1)))
    if not err <= CHECK_XTOL:
        return f"the solution is off by {err:.1e}"
    return None


def run(ctx: RunContext, opts: CgOptions | None) -> None:
    opts = opts or CgOptions()
    pl = opts.placement(ctx, 3)
    if pl is None:
        _run_here(ctx, opts)
    else:
        proxy.across_or_here(ctx, "cg", opts, lambda: _run_ranks(ctx, opts, pl),
                             lambda: _run_here(ctx, opts))


def _run_here(ctx: RunContext, opts: CgOptions) -> None:
    """One rank in this process: the check, the triad, the solves on the team."""
    g, _, warning = sized(ctx, opts, (1, 1, 1), 1)
    ctx.warnings += [warning] if warning else []
    cores = opts.cores(ctx)
    budget = SETTINGS[ctx.profile.name].budget_s
    ctx.progress.start("cg", 3)
    with Team(cores) as team:
        why = check(team)
        ctx.progress.advance("cg: solver checked")
        if why is not None:
            raise MeasurementError(f"cg: the native CG does not match the reference ({why}); "
                                   "no figures")
        binding, triad, m = _triad(ctx, team, cores, TRIAD_SHARE * budget)
        solves: list[solver.Solve] = []
        with solver.Problem(team, g) as problem:  # one matrix: the samples time the solves

            def take(n: int) -> list[float | None]:
                out: list[float | None] = []
                for _ in range(n):
                    s = problem.solve(iterations(ctx), 1e-300)
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
              "iterations_per_sample": iterations(ctx), "nonzeros": solver.nonzeros(g),
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


def _triad(ctx: RunContext, team: Team, cores: tuple[int, ...], budget_s: float
           ) -> tuple[str, list[float], stream.Measurement]:
    """This node's STREAM triad on the team (DRAM-sized arrays): the bandwidth the CG's traffic
    is set against."""
    binding = bound_cpus(ctx, team, "cg")
    elems = elems_for("triad", dram_working_set(ctx.topo, cores), len(cores))
    team.stream_prepare(elems)
    m = stream.Measurement("triad", "triad", "regular", "one-per-core", cores, elems, "DRAM")
    triad = stream.measure(ctx, team, m, budget_s, "cg")
    ctx.progress.advance("cg: STREAM triad")
    return binding, triad, m


def _run_ranks(ctx: RunContext, opts: CgOptions, pl: Placement) -> None:
    """The triad of this node, then one launch: the check across the ranks (a solve on
    CHECK_GRID a rank against the reference on the global grid), then the timed solves."""
    find.find(opts.mpi_prefix)  # no MPI: said before anything is measured
    g, _, warning = sized(ctx, opts, pl.grid, pl.layout.ranks // pl.nodes)
    ctx.warnings += [warning] if warning else []
    whole = (g[0] * pl.grid[0], g[1] * pl.grid[1], g[2] * pl.grid[2])
    check_whole = tuple(c * r for c, r in zip(CHECK_GRID, pl.grid, strict=True))
    budget = SETTINGS[ctx.profile.name].budget_s
    cores = opts.cores(ctx)
    ctx.progress.start("cg", 2)
    with Team(cores) as team:
        _, triad, m = _triad(ctx, team, cores, TRIAD_SHARE * budget)
    rule = ctx.profile.repetition
    rows = math.prod(whole)
    flops = 2 * solver.nonzeros(whole) + solver.VECTOR_FLOPS_PER_ROW * rows
    where = opts.where()
    args = ["cg", "--grid", pl.grid_text, "--box", ".".join(map(str, g)),
            "--check", "1", "--check-box", ".".join(map(str, CHECK_GRID)),
            "--iters", str(iterations(ctx)), "--reps", str(rule.max_samples),
            "--min-reps", str(rule.min_samples), "--seconds", f"{(1 - TRIAD_SHARE) * budget:g}"]
    with tempfile.TemporaryDirectory(prefix="hpcprobe-cg-") as tmp:
        got = proxy.run(ctx, "cg", pl.layout, args, where, Path(tmp))
    ctx.progress.advance(f"cg: {pl.layout.ranks} rank(s)")
    out = got.outcome
    why = "the program stopped before its check" if not out.checks else differs(
        out.checks[0]["iterations"], np.array(out.checks[0]["history"]),
        (check_whole[0], check_whole[1], check_whole[2]))
    if why is None and not out.checks[0]["x_error"] <= CHECK_XTOL:
        why = f"the solution is off by {out.checks[0]['x_error']:.1e}"
    if why is not None:
        raise MeasurementError(f"the CG across {pl.layout.ranks} ranks does not match the "
                               f"reference ({why}{'; ' + out.error if out.error else ''}); "
                               "no figures")
    if out.error:
        ctx.errors.append(f"cg: {out.error}; the solves measured before are kept")
    if not out.samples:
        raise MeasurementError("no solve finished")
    params: dict[str, Any] = {
        "grid": "x".join(map(str, g)), "global": "x".join(map(str, whole)),
        "ranks": pl.layout.ranks, "nodes": pl.nodes, "rank_grid": pl.grid_text,
        "layout": pl.ranks.layout, "threads": pl.ranks.threads, "cpus": got.binding,
        "mpi": got.mpi, "iterations_per_sample": iterations(ctx),
        "nonzeros": solver.nonzeros(whole), "flops_per_iteration": flops,
        "bytes_per_row": solver.BYTES_PER_ROW}
    ss = out.samples
    gflops = [s["iterations"] * flops / s["seconds"] / 1e9 for s in ss]
    bandwidth = [s["iterations"] * solver.BYTES_PER_ROW * rows / s["seconds"] / 1e9 for s in ss]
    node_triad = float(np.median(triad)) * pl.nodes
    ctx.metrics += [
        Metric("cg", "gflops", "GFLOP/s", params, gflops),
        Metric("cg", "bandwidth", "GB/s", dict(params), bandwidth),
        Metric("cg", "triad", "GB/s", {"threads": len(cores), "size_bytes": m.size_bytes},
               triad),
        Metric("cg", "bandwidth_fraction", "%", dict(params),
               [100 * b / node_triad for b in bandwidth]),
        *(Metric("cg", "phase_share", "%", dict(params, phase=phase),
                 [100 * s[key] / s["seconds"] for s in ss], "lower")
          for phase, key in (("spmv", "spmv_s"), ("dot", "dot_s"), ("update", "update_s"),
                             ("halo", "halo_s")))]


def scaled(ctx: RunContext, opts: CgOptions | None, k: int, mode: str, first: int) -> CgOptions:
    """The options on k ranks for `hpcprobe scale`, ranks one per core unless --layout; weak:
    the box a rank (--grid, the profile's, or --global split over the first count); strong:
    the global grid of the first count (or --global) split over k."""
    opts = opts or CgOptions()
    if opts.rank_grid:
        raise OptionError("<rank_grid>: hpcprobe scale chooses the rank grid of each count")
    local = box(ctx, opts, layouts.grid(first, 3))
    if mode == "weak":
        return replace(opts, grid=local, whole=None, ranks=k, layout=opts.layout or "core")
    g = layouts.grid(first, 3)
    whole = (local[0] * g[0], local[1] * g[1], local[2] * g[2])
    return replace(opts, grid=None, whole=whole, ranks=k, layout=opts.layout or "core")


def total_rate(metrics: list[Metric]) -> list[float]:
    figures = [m for m in metrics if m.benchmark == "cg" and m.name == "gflops"]
    return max(figures, key=lambda m: m.summary.median).samples if figures else []
