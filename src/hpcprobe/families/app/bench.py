"""The app family's options, plan and measurement."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcprobe.common import secrets
from hpcprobe.common.errors import MeasurementError, OptionError, UserError
from hpcprobe.common.parts import Part
from hpcprobe.families.app import known, ranks
from hpcprobe.machine import energy, sysinfo
from hpcprobe.measure import options
from hpcprobe.measure.family import (
    ENERGY,
    PER_WATT,
    POWER,
    Flag,
    Positional,
    RunContext,
    energy_figure,
    option,
)
from hpcprobe.mpi.layouts import Placement
from hpcprobe.mpi.params import MPI
from hpcprobe.probes import program
from hpcprobe.results.model import Metric
from hpcprobe.tools import command

#: Per profile: nothing of its own (its repetitions are the profile's fewest samples).
SETTINGS = program.same_for_every_profile(None)


@dataclass(frozen=True)
class AppRun:
    """What a run records of an application it ran (its provenance part `app`, by the
    application's name): the command (credentials masked), where it ran, the environment it
    was given (credentials masked), the figure read, the warm-up runs, and the input file
    written for it where hpcprobe wrote one (HPCG's hpcg.dat: what it holds)."""

    command: list[str] = field(default_factory=list)
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    figure: str | None = None
    warmup: int = 0
    input: dict[str, Any] | None = None


APPS = Part("app", AppRun, keyed=True)
#: The metric of application NAME is PREFIX + NAME.
PREFIX = "app:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


def pattern(text: str) -> re.Pattern[str]:
    """A regular expression with a group that captures the number."""
    try:
        rx = re.compile(text, re.M)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}") from None
    if rx.groups < 1:
        raise argparse.ArgumentTypeError(f"{text!r} has no group: put the number in parentheses, "
                                         "e.g. 'TPS = ([0-9.]+)'")
    return rx


def assignment(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not (key and eq) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=VALUE, e.g. OMP_NUM_THREADS=2")
    return key, value


def app_name(text: str) -> str:
    if not _NAME.match(text):
        raise argparse.ArgumentTypeError(f"{text!r}: an application's name is letters, digits "
                                         "and . _ + - (at most 64)")
    return text


#: `hpcprobe app NAME -- COMMAND ARGS...`
POSITIONALS = (Positional("name", "NAME", "the application's name: its metric is app:NAME",
                          app_name),
               Positional("argv", "COMMAND", "the command and its arguments, after --",
                          None, many=True))


def hpcg_grid_of(text: str) -> tuple[int, int, int]:
    """NXxNYxNZ, each a multiple of 8 and at least 16 (HPCG's three coarse grids halve it)."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) >= 16 and int(p) % 8 == 0
                                  for p in parts):
        raise argparse.ArgumentTypeError(f"{text}: give HPCG's local grid as NXxNYxNZ, each a "
                                         "multiple of 8 and at least 16, e.g. 104x104x104")
    return int(parts[0]), int(parts[1]), int(parts[2])


#: HPCG's run time (s) per profile where --hpcg-time is not given
HPCG_SECONDS = {"quick": 60.0, "default": 300.0, "thorough": known.HPCG_OFFICIAL_S}


@dataclass(frozen=True)
class AppOptions:
    name: str | None = None
    argv: tuple[str, ...] = ()
    fom: re.Pattern[str] | None = option(Flag(
        "--fom", "the figure of merit: a regular expression whose first group is the number "
        "(the last match in the output counts), e.g. 'TPS = ([0-9.]+)' (default: the wall "
        "time)", parse=pattern, metavar="REGEX"))
    unit: str | None = option(Flag("--unit", "the figure of merit's unit (default: s for wall "
                                   "time, else 1)", parse=options.nonempty("a unit, e.g. TPS"),
                                   metavar="UNIT"))
    lower: bool = option(Flag("--lower-is-better", "a smaller figure of merit is better (wall "
                              "time: always)", switch=True), False)
    cwd: str | None = option(Flag("--cwd", "the working directory of the command (default: the "
                                  "current one)", metavar="DIR"))
    env: tuple[tuple[str, str], ...] = option(Flag(
        "--env", "set an environment variable for the command (repeat for more)",
        parse=assignment, metavar="NAME=VALUE", many=True, convert=tuple), ())
    timeout_s: float | None = option(options.TIMEOUT, note=options.ONE_REPETITION)
    repeat: int | None = option(options.REPEAT)
    warmup: int = option(Flag("--warmup", "runs before the measured ones, not counted (caches, "
                              "JIT, page cache)", parse=options.at_least(0, "a run count"),
                              metavar="N"), 0)
    ranks: int | None = option(options.RANKS, note="the command is then started by the "
                               "launcher, each rank bound and read back; `{ranks}` and "
                               "`{nodes}` in it are replaced by the counts")
    layout: str | None = option(options.LAYOUT, note="default core")
    hosts: tuple[str, ...] | None = option(options.HOSTS)
    launcher: str | None = option(options.LAUNCHER)
    mpi_prefix: str | None = option(options.MPI_PREFIX)
    hpcg_grid: tuple[int, int, int] | None = option(Flag(
        "--hpcg-grid", "HPCG: the local grid a rank in the hpcg.dat written for it (default: a "
        "cube, a multiple of 8, whose ranks take a quarter of the node's memory, as HPCG's "
        "rules ask)", parse=hpcg_grid_of, metavar="NXxNYxNZ"))
    hpcg_time: float | None = option(Flag(
        "--hpcg-time", "HPCG: the run time in its hpcg.dat (default: quick 60, default 300, "
        f"thorough {known.HPCG_OFFICIAL_S:g} s, the least an official rating runs)",
        parse=options.seconds, metavar="S"))
    #: the ranks (and nodes) the problem is sized for, `{ranks}` and `{nodes}` in the command
    #: (hpcprobe scale: the count in weak mode, the first count in strong mode)
    problem: tuple[int, int] | None = None

    @property
    def metric(self) -> str:
        return PREFIX + (self.name or "")

    @property
    def what(self) -> str:
        if self.fom is None and (app := self.known) is not None:
            return app.what
        return "wall time" if self.fom is None else f"figure of merit /{self.fom.pattern}/"

    @property
    def known(self) -> known.Known | None:
        """The application hpcprobe knows by its output (none where --fom is given)."""
        return None if self.fom is not None else known.of(self.name, self.argv)

    @property
    def sized_by_command(self) -> bool:
        """Whether the command says where the counts go (`{ranks}`, `{nodes}`)."""
        return any(x in a for a in self.argv for x in SUBSTITUTIONS)

    @property
    def across(self) -> bool:
        """Started by the launcher on ranks (asked for by count, layout or hosts)."""
        return any(v is not None for v in (self.ranks, self.layout, self.hosts))

    def command(self, pl: Placement | None) -> tuple[str, ...]:
        """The command with `{ranks}` and `{nodes}` replaced: the counts the problem is sized
        for (`scale`), else those it runs on (a layout's or the hosts' own count too)."""
        ranks, nodes = self.problem or ((pl.layout.ranks, pl.nodes) if pl else (1, 1))
        return tuple(a.replace("{ranks}", str(ranks)).replace("{nodes}", str(nodes))
                     for a in self.argv)


#: A launched figure's params that say how it was taken, not what it is: compare, sweeps and
#: history join an application's figure across them (the problem, `problem_ranks`, stays)
LAUNCH = frozenset({"ranks", "nodes", "layout", "threads", "cpus", "mpi"})
#: What in the command the counts replace (`hpcprobe scale app`, weak mode: the problem grows)
SUBSTITUTIONS = ("{ranks}", "{nodes}")


def _placement(ctx: RunContext, o: AppOptions) -> Placement | None:
    return ranks.place(ctx.topo, o.layout, o.ranks, o.hosts) if o.across else None


def plan(ctx: RunContext, o: AppOptions) -> list[str]:
    if not o.name or not o.argv:
        raise UserError("app needs a name and a command: hpcprobe app NAME -- COMMAND ARGS...")
    command.check_program(o.argv, f"app {o.name}")
    if o.cwd is not None and not os.path.isdir(o.cwd):
        raise OptionError(f"<cwd> {o.cwd}: no such directory")
    n = program.repetitions(ctx, o.repeat)
    pl = _placement(ctx, o)
    where = "" if pl is None else (
        f" on {pl.layout.ranks} rank(s), {pl.ranks.layout} layout"
        + (f", {pl.nodes} node(s)" if pl.nodes > 1 else "") + ", bound and read back")
    app = o.known
    if app is not None and app.input and not (o.cwd and os.path.exists(
            os.path.join(o.cwd, app.input))):
        where += f", its {app.input} written for this node"
    return [f"{o.metric}: `{shlex.join(o.command(pl))}` {n} time(s){where}"
            + (f" after {o.warmup} warm-up run(s)" if o.warmup else "") + f", its {o.what}"]


def figures(o: AppOptions, ran: command.Ran, pl: Placement | None, cwd: str | None = None,
            since: float = 0.0, ctx: RunContext | None = None) -> list[known.Figure]:
    """The repetition's figures (the figure of merit first), or why it does not count; a known
    application's notes become the run's warnings, once each."""
    if not ran.ok:
        raise MeasurementError(f"app {o.name}: {ran.failure()}")
    if (app := o.known) is not None:
        try:
            report = app.read(ran.output, Path(cwd) if cwd else None, since)
        except MeasurementError as exc:
            raise MeasurementError(f"app {o.name}: {exc}") from None
        if ctx is not None:
            ctx.warnings += [n for n in (f"app {o.name}: {n}" for n in report.notes)
                             if n not in ctx.warnings]
        launched = pl.layout.ranks if pl is not None else None
        if launched is not None and report.procs is not None and report.procs != launched:
            raise MeasurementError(
                f"app {o.name}: {launched} rank(s) started, the application says it ran on "
                f"{report.procs} process(es)"
                + (": each rank ran alone (not built with MPI, or with another MPI than the "
                   "launcher's)" if report.procs == 1 else "") + "; no figures at this count")
        return report.figures
    if o.fom is None:
        return [known.Figure("wall time", ran.seconds, "s", "lower")]
    found = o.fom.findall(ran.output)
    if not found:  # under `scale` a count's failure: the other counts are kept
        fail = UserError if o.problem is None else MeasurementError
        raise fail(f"app {o.name}: the figure of merit's pattern /{o.fom.pattern}/ matched "
                   f"nothing in the output of `{shlex.join(ran.argv)}`; its last lines: "
                   f"{ran.tail()}")
    last = found[-1]
    text = last[0] if isinstance(last, tuple) else last
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"app {o.name}: <fom> /{o.fom.pattern}/ captured {text!r}, not a "
                          "number") from None
    return [known.Figure("figure of merit", value, o.unit or "1",
                         "lower" if o.lower else "higher")]


def run(ctx: RunContext, o: AppOptions) -> None:
    plan(ctx, o)
    env = dict(o.env)
    timeout = o.timeout_s or program.DEFAULT_TIMEOUT_S
    pl = _placement(ctx, o)
    argv = o.command(pl)
    team = None if pl is None else ranks.Ranks(pl, argv, env, o.launcher, o.mpi_prefix)
    bindings: list[str] = []
    with _workdir(o) as cwd:
        given = _input(ctx, o, pl, cwd)

        def once(i: int) -> list[known.Figure]:
            since = time.time()
            if team is None:
                return figures(o, command.run(argv, cwd, env, timeout), pl, cwd, since, ctx)
            got = team.run(cwd, env, timeout, o.name or "app")
            if got.binding and got.binding not in bindings:
                bindings.append(got.binding)
                ctx.warnings.extend(got.warnings)
            return figures(o, got.ran, pl, cwd, since, ctx)

        drew: list[energy.Window | None] = []  # each repetition's energy, in order

        def metered(i: int) -> list[known.Figure]:
            with ctx.metered() as used:
                got = once(i)
            drew.append(used.window)
            return got

        try:
            if o.warmup:
                program.repeat(ctx, f"{o.name} warm-up", o.warmup, metered)
            drew.clear()
            reps = program.repeat(ctx, o.name or "app", program.repetitions(ctx, o.repeat),
                                  metered)
        finally:
            if team is not None:
                team.close()
    if len(bindings) > 1:
        ctx.warnings.append(f"app {o.name}: the ranks' CPUs differed between repetitions: "
                            f"{' / '.join(bindings)}")
    params = {} if pl is None or team is None else _where(o, pl, bindings, team)
    _metrics(ctx, o, reps, params)
    _energy(ctx, o, reps, params, drew)
    APPS.add(ctx.provenance, str(o.name), AppRun(
        [secrets.redact(x) for x in argv], str(Path(cwd).resolve()) if cwd else os.getcwd(),
        {k: secrets.variable(k, v) for k, v in env.items()}, o.what, o.warmup, given))
    if team is not None:
        MPI.put(ctx.provenance, team.provenance)


@contextlib.contextmanager
def _workdir(o: AppOptions) -> Iterator[str | None]:
    """Where the command runs: --cwd, or for a known application that reads its input from
    its working directory (HPCG's hpcg.dat), a directory of its own, removed afterwards."""
    app = o.known
    if o.cwd is not None or app is None or app.input is None:
        yield o.cwd
        return
    with tempfile.TemporaryDirectory(prefix=f"hpcprobe-{app.name}-") as tmp:
        yield tmp


def _input(ctx: RunContext, o: AppOptions, pl: Placement | None, cwd: str | None
           ) -> dict[str, object] | None:
    """A known application's input, written for this node where its working directory has
    none (the user's is kept and said): what the provenance records of it."""
    app = o.known
    if app is None or app.input is None or app.prepare is None or cwd is None:
        return None
    path = Path(cwd) / app.input
    if path.exists():
        return {"file": str(path), "written": False}
    per_node = pl.layout.ranks // pl.nodes if pl is not None else 1
    setup = known.Setup(per_node, sysinfo.usable_total_bytes(),
                        o.hpcg_time or HPCG_SECONDS.get(ctx.profile.name, 300.0), o.hpcg_grid)
    return {"file": app.input, "written": True, **app.prepare(Path(cwd), setup)}


def _where(o: AppOptions, pl: Placement, bindings: list[str], team: ranks.Ranks
           ) -> dict[str, Any]:
    """A launched figure's params: the ranks, nodes, layout and threads; the ranks the
    problem was sized for (where the command says: `{ranks}`, or `scale`); where the ranks ran
    (read back) and the MPI."""
    sized = o.problem is not None or o.sized_by_command
    size = {"problem_ranks": o.problem[0] if o.problem else pl.layout.ranks} if sized else {}
    return {"ranks": pl.layout.ranks, "nodes": pl.nodes, "layout": pl.ranks.layout,
            "threads": pl.ranks.threads, **size, "cpus": bindings[0] if bindings else "?",
            "mpi": team.mpi}


def _metrics(ctx: RunContext, o: AppOptions, reps: list[list[known.Figure]],
             params: dict[str, Any]) -> None:
    """One metric a figure over the repetitions (a known application's each named by its
    `figure` param; a user's figure of merit or wall time without one)."""
    named = o.known is not None
    for i, first in enumerate(reps[0] if reps else []):
        samples = [r[i].value for r in reps if len(r) > i and r[i].name == first.name]
        ctx.metrics.append(Metric("app", o.metric, first.unit,
                                  {**params, "figure": first.name} if named else dict(params),
                                  samples, first.better))


def _energy(ctx: RunContext, o: AppOptions, reps: list[list[known.Figure]],
            params: dict[str, Any], drew: list[energy.Window | None]) -> None:
    """Where the energy counters were read around every repetition: the node's mean power
    and joules of each (packages and DRAM), and each figure of merit that is a rate (higher
    is better) per watt of its own repetition, work per joule; a time's cost is the joules.
    Not for an application across nodes: the counters are this node's alone."""
    windows = [w for w in drew if w is not None and w.watts]
    if not reps or len(windows) != len(reps) or params.get("nodes", 1) > 1:
        return
    where = {**params, "app": o.name, "domains": windows[0].domains()}
    watts = [w.watts or 0.0 for w in windows]
    ctx.metrics += [Metric("app", POWER, "W", dict(where), [round(x, 3) for x in watts],
                           "lower"),
                    Metric("app", ENERGY, "J", dict(where),
                           [round(w.whole_joules, 3) for w in windows], "lower")]
    named = o.known is not None
    for i, first in enumerate(reps[0]):
        if first.better != "higher" or not all(len(r) > i and r[i].name == first.name
                                               for r in reps):
            continue
        ctx.metrics.append(Metric(
            "app", o.metric + PER_WATT, f"{first.unit}/W",
            {**where, "figure": first.name} if named else dict(where),
            [r[i].value / w for r, w in zip(reps, watts, strict=True)]))


def scaled(ctx: RunContext, o: AppOptions | None, k: int, mode: str, first: int
           ) -> AppOptions:
    """The options on k ranks for `hpcprobe scale app`: weak, the command's `{ranks}` and
    `{nodes}` are k's (the problem grows with the ranks); strong, the first count's."""
    o = o or AppOptions()
    if mode == "weak" and not o.sized_by_command:
        raise OptionError("scale app <mode> weak: the command has no {ranks} or {nodes} to grow "
                          "the problem with (e.g. `lmp -in in.lj -var ranks {ranks}`); <mode> "
                          "strong runs it as it is at every count")
    size = k if mode == "weak" else first
    nodes = ranks.place(ctx.topo, o.layout, size, o.hosts).nodes
    return replace(o, ranks=k, problem=(size, nodes))


def modes(o: AppOptions | None) -> tuple[str, ...]:
    """Both modes where the command has `{ranks}` or `{nodes}` to grow the problem with, else
    strong only."""
    grows = o is not None and o.sized_by_command
    return ("strong", "weak") if grows else ("strong",)


def work_rate(metrics: list[Metric]) -> tuple[list[float], str] | None:
    """A count's total work rate and its unit, which grows with the ranks when the work is done
    in proportion: a known application's (LAMMPS: atom-steps/s), a figure of merit (upside
    down where lower is better), or the rank-sized problems solved an hour from the wall
    time."""
    for m in metrics:
        if m.benchmark != "app" or not m.name.startswith(PREFIX) or energy_figure(m.name):
            continue
        app = known.of(m.name[len(PREFIX):], ())
        if app is not None:
            if m.params.get("figure") == app.rate:
                return list(m.samples), app.rate
        elif m.unit == "s" and m.better == "lower" and "figure" not in m.params:
            size = float(m.params.get("problem_ranks", 1))
            return [size * 3600.0 / x for x in m.samples if x > 0], "rank-problems/h"
        elif m.better == "higher":
            return list(m.samples), m.unit
        else:
            return [1 / x for x in m.samples if x], f"1/({m.unit})"
    return None


def rate(metrics: list[Metric]) -> list[float]:
    got = work_rate(metrics)
    return got[0] if got else []


def rate_unit(metrics: list[Metric]) -> str:
    got = work_rate(metrics)
    return got[1] if got else "?"
