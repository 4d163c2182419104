"""The app family's options, plan and measurement."""

from __future__ import annotations

import argparse
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.errors import MeasurementError, UserError
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, Positional, RunContext, option
from hpcprobe.probes import program
from hpcprobe.results.model import Metric
from hpcprobe.tools import command

#: Per profile: nothing of its own (its repetitions are the profile's fewest samples).
SETTINGS = program.same_for_every_profile(None)
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

    @property
    def metric(self) -> str:
        return PREFIX + (self.name or "")

    @property
    def what(self) -> str:
        return "wall time" if self.fom is None else f"figure of merit /{self.fom.pattern}/"


def plan(ctx: RunContext, o: AppOptions) -> list[str]:
    if not o.name or not o.argv:
        raise UserError("app needs a name and a command: hpcprobe app NAME -- COMMAND ARGS...")
    command.check_program(o.argv, f"app {o.name}")
    if o.cwd is not None and not os.path.isdir(o.cwd):
        raise UserError(f"--cwd {o.cwd}: no such directory")
    n = program.repetitions(ctx, o.repeat)
    return [f"{o.metric}: `{shlex.join(o.argv)}` {n} time(s)"
            + (f" after {o.warmup} warm-up run(s)" if o.warmup else "") + f", its {o.what}"]


def figure(o: AppOptions, ran: command.Ran) -> float:
    """The repetition's figure, or why it does not count."""
    if not ran.ok:
        raise MeasurementError(f"app {o.name}: {ran.failure()}")
    if o.fom is None:
        return ran.seconds
    found = o.fom.findall(ran.output)
    if not found:
        raise UserError(f"app {o.name}: --fom /{o.fom.pattern}/ matched nothing in the output of "
                        f"`{shlex.join(ran.argv)}`; its last lines: {ran.tail()}")
    last = found[-1]
    text = last[0] if isinstance(last, tuple) else last
    try:
        return float(text)
    except ValueError:
        raise UserError(f"app {o.name}: --fom /{o.fom.pattern}/ captured {text!r}, not a "
                        "number") from None


def run(ctx: RunContext, o: AppOptions) -> None:
    plan(ctx, o)
    env = dict(o.env)
    timeout = o.timeout_s or program.DEFAULT_TIMEOUT_S

    def once(i: int) -> float:
        return figure(o, command.run(o.argv, o.cwd, env, timeout))

    if o.warmup:
        program.repeat(ctx, f"{o.name} warm-up", o.warmup, once)
    samples = program.repeat(ctx, o.name or "app", program.repetitions(ctx, o.repeat), once)
    unit = o.unit or ("s" if o.fom is None else "1")
    better = "lower" if o.fom is None or o.lower else "higher"
    ctx.metrics.append(Metric("app", o.metric, unit, {}, samples, better))
    ctx.provenance.setdefault("app", {})[o.name] = {
        "command": list(o.argv), "cwd": str(Path(o.cwd).resolve()) if o.cwd else os.getcwd(),
        "env": env, "figure": o.what, "warmup": o.warmup}
