"""Launch our MPI programs for a family that runs across ranks (the application proxies,
native/mpi/hpb_proxy.c, and the MPI tests it reuses): its rank options, finding the MPI,
building the program, starting it with the chosen launcher and layout, reading back where each
rank's threads really ran, and falling back to one rank in process where there is no MPI."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import OptionError
from hpcprobe.machine.placement import plan as place
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, option
from hpcprobe.mpi import build, find, launch, launchers, layouts, params
from hpcprobe.mpi.launchers import Layout
from hpcprobe.mpi.layouts import Placement


@dataclass(frozen=True)
class RankOptions:
    """The options of a family that runs in this process or across ranks through this program
    (the proxies): the threads of one rank here; the layout and count of the ranks, their grid,
    the hosts, and how to launch them."""

    threads: tuple[int, ...] | None = option(options.THREADS)
    ranks: int | None = option(options.RANKS)
    layout: str | None = option(options.LAYOUT, note="default numa, Grid's recommendation")
    rank_grid: str | None = option(Flag(
        "--rank-grid", "the ranks over the problem's directions: dslash x.y.z.t (default: the "
        "last directions first, 1.1.1.2 for two ranks), cg x.y.z (1.1.2)", metavar="A.B.C[.D]"))
    hosts: tuple[str, ...] | None = option(options.HOSTS)
    launcher: str | None = option(options.LAUNCHER)
    mpi_prefix: str | None = option(options.MPI_PREFIX)
    timeout_s: float | None = option(options.TIMEOUT)

    @property
    def multi_rank(self) -> bool:
        """Whether ranks were asked for explicitly."""
        return any(v is not None for v in (self.ranks, self.layout, self.hosts, self.rank_grid))

    def where(self) -> Where:
        return Where(self.launcher, self.mpi_prefix, self.timeout_s or 600.0)

    def cores(self, ctx: RunContext) -> tuple[int, ...]:
        """One rank in this process: a thread per core, all of them or the first --threads
        (more with --oversubscribe)."""
        return place(ctx.topo, "one-per-core", max(self.threads) if self.threads else None,
                     ctx.oversubscribe).cpus

    def placement(self, ctx: RunContext, ndim: int) -> Placement | None:
        """The ranks over a grid of ndim directions (layouts.place; None: one rank in this
        process); --threads with ranks is a user error."""
        pl = layouts.place(ctx.topo, self.layout, self.ranks, self.hosts, self.rank_grid, ndim)
        if pl is not None and self.threads:
            raise OptionError("<threads> sets the threads of one rank in this process; across "
                              "ranks the layout sets them (<layout> numa or socket: a thread per "
                              "core)")
        return pl


@dataclass(frozen=True)
class Where:
    """How to launch: the launcher, the MPI, and how long a point may go without progress."""

    launcher: str | None
    mpi_prefix: str | None
    timeout_s: float


@dataclass(frozen=True)
class Launched:
    outcome: launch.Outcome
    binding: str  # each rank's threads' CPUs as read back inside the rank, "0-3;4-7"
    mpi: str  # "Open MPI 4.1.4"


def across_or_here(ctx: RunContext, family: str, opts: RankOptions,
                   across: Callable[[], None], here: Callable[[], None]) -> None:
    """Run across the ranks; where there is no MPI and nobody asked for ranks (the default
    layout of a multi-NUMA node under `hpcprobe run`), one rank here instead, with a warning."""
    try:
        across()
    except find.MpiNotFound as exc:
        if ctx.standalone or opts.multi_rank:
            raise
        ctx.warnings.append(f"{family}: {exc}; one rank in this process instead, a thread on "
                            "every core")
        here()


def run(ctx: RunContext, family: str, layout: Layout, args: list[str], where: Where,
        workdir: Path, program: build.Program = build.PROXY) -> Launched:
    """One launch of `PROGRAM ARGS` on the layout. Raises MpiNotFound (a UserError) where there
    is no MPI, UserError where the program does not compile."""
    mpi = find.find(where.mpi_prefix)
    exe = build.build(mpi, program)
    launcher, path = launchers.choose(mpi, where.launcher)
    params.MPI.put(ctx.provenance, params.provenance(mpi, launcher.name, path))
    spec = launcher.build(path, mpi, layout, [str(exe), *args], workdir, {})
    outcome = launch.run(spec, where.timeout_s, launcher.name)
    return Launched(outcome, _binding(ctx, family, layout, outcome),
                    f"{mpi.implementation} {mpi.version}")


def _binding(ctx: RunContext, family: str, layout: Layout, outcome: launch.Outcome) -> str:
    """Each rank's threads' CPUs, as the rank read them after pinning its team (a rank without
    a team: its affinity mask; "?" where a thread's mask held several CPUs or the rank never
    said); a rank not on the CPUs asked for is a warning."""
    got = {b["rank"]: b for b in outcome.bindings}
    out = []
    for r in range(layout.ranks):
        b = got.get(r, {})
        threads = b.get("threads", b.get("cpus", []))
        out.append(format_cpulist(threads) if threads and min(threads) >= 0 else "?")
        want = sorted(layout.cpuset(r))
        if r in got and sorted(threads) != want:
            ctx.warnings.append(f"{family}: rank {r} asked for CPUs {format_cpulist(want)}, its "
                                f"threads run on {out[-1]} (affinity mask "
                                f"{format_cpulist(b.get('cpus', [])) or '?'})")
    return ";".join(out)
