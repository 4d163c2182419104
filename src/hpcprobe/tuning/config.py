"""A sweep file (TOML) read and checked whole before anything runs: its configurations, its
workloads (an hpcprobe family with options, or a user's application) and its rules. Every
mistake is one line that names the file, the table and the key."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcprobe.analysis import recommend
from hpcprobe.common import secrets
from hpcprobe.common.errors import UserError
from hpcprobe.common.units import duration
from hpcprobe.measure.family import Family, Flag, flags, runs_commands

OPENMP = {"num_threads": "OMP_NUM_THREADS", "proc_bind": "OMP_PROC_BIND",
          "places": "OMP_PLACES", "schedule": "OMP_SCHEDULE", "wait_policy": "OMP_WAIT_POLICY",
          "dynamic": "OMP_DYNAMIC", "stacksize": "OMP_STACKSIZE"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


@dataclass(frozen=True)
class Configuration:
    name: str
    env: dict[str, str] = field(default_factory=dict)  # with the OpenMP settings as OMP_*
    options: dict[str, Any] = field(default_factory=dict)  # hpcprobe flags (no --)
    wrap: tuple[str, ...] = ()  # the workloads' processes run under this (numactl ...)
    sysfs: dict[str, str] = field(default_factory=dict)  # path -> value, restored after
    pre: tuple[tuple[str, ...], ...] = ()
    post: tuple[tuple[str, ...], ...] = ()
    expect: dict[str, str] = field(default_factory=dict)  # fingerprint label -> value
    boot: str | None = None  # a state only a reboot changes: runs taken in that boot

    def to_dict(self) -> dict[str, Any]:
        return {"env": {k: secrets.variable(k, v) for k, v in self.env.items()},
                "options": self.options, "wrap": list(self.wrap),
                "set": self.sysfs, "pre": [list(a) for a in self.pre],
                "post": [list(a) for a in self.post], "expect": self.expect, "boot": self.boot}


@dataclass(frozen=True)
class Workload:
    name: str
    family: str  # an hpcprobe family (with a command: the one that runs user commands)
    options: dict[str, Any] = field(default_factory=dict)  # the family's flags (no --)
    command: tuple[str, ...] = ()  # a user's application
    figures: tuple[str, ...] = ()  # metric names the recommendation is made on (all: empty)
    where: dict[str, Any] = field(default_factory=dict)  # and their params must have these
    #: what the recommendation weighs (CRITERIA): the figures, their work per joule, or the
    #: energy-delay product's inverse
    by: str = "time"


#: What a workload's recommendation may weigh: its figures as measured ("time": the speed),
#: each figure per watt (work per joule: "energy"), or each figure times its figure per watt
#: (work squared per joule-second, the inverse of the energy-delay product per unit of work:
#: "edp"); docs/sweep.md
CRITERIA = ("time", "energy", "edp")


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    configurations: dict[str, Configuration]
    workloads: dict[str, Workload]
    baseline: str
    profile: str = "quick"
    rounds: int = 3  # at least
    max_rounds: int = 10
    budget_s: float = 3600.0
    alpha: float = recommend.ALPHA
    resolution: float = recommend.RESOLUTION

    def boots(self) -> list[str]:
        return sorted({c.boot for c in self.configurations.values() if c.boot})


class _Reader:
    """Typed reads of one table, each mistake naming where it is."""

    def __init__(self, path: Path, where: str, table: Any):
        self.path, self.where = path, where
        if not isinstance(table, dict):
            self.fail(f"[{where}] must be a table")
        self.table: dict[str, Any] = table

    def fail(self, why: str) -> None:
        raise UserError(f"{self.path}: {why}")

    def keys(self, allowed: Sequence[str]) -> None:
        for k in self.table:
            if k not in allowed:
                self.fail(f"[{self.where}] has an unknown key {k!r}; keys: {', '.join(allowed)}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        v = self.table.get(key, default)
        if v is not default and not isinstance(v, kind):
            self.fail(f"[{self.where}] {key} = {v!r}: give {_kind(kind)}")
        return v

    def strings(self, key: str) -> tuple[str, ...]:
        v = self.get(key, list, [])
        if not all(isinstance(x, str) for x in v):
            self.fail(f"[{self.where}] {key}: give a list of strings (an argv, no shell)")
        return tuple(v)

    def commands(self, key: str) -> tuple[tuple[str, ...], ...]:
        v = self.table.get(key, [])
        if not isinstance(v, list) or not all(
                isinstance(a, list) and a and all(isinstance(x, str) for x in a) for a in v):
            self.fail(f"[{self.where}] {key}: give a list of commands, each a list of strings, "
                      f"e.g. {key} = [[\"tuned-adm\", \"profile\", \"latency-performance\"]]")
        return tuple(tuple(a) for a in v)

    def mapping(self, key: str) -> dict[str, Any]:
        v = self.get(key, dict, {})
        for k, x in v.items():
            if not isinstance(x, str | int | float | bool | list):
                self.fail(f"[{self.where}] {key}.{k} = {x!r}: give a string, number or boolean")
        return dict(v)


def _kind(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", float: "a number", list: "a list",
             dict: "a table", bool: "true or false"}
    ks = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in ks)


def _text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def family_argv(fam: Family, given: Mapping[str, Any], where: str) -> list[str]:
    """A family's options from a table ({"threads": 2, "kernel": "triad"}) as its command-line
    flags, each value checked by the flag's own parser."""
    known = {flag.flag: flag for _, flag in flags(fam.options)}
    out: list[str] = []
    for key, value in given.items():
        flag = known.get("--" + key.lstrip("-"))
        if flag is None:
            raise UserError(f"{where}: {key!r} is not an option of {fam.name}; its options: "
                            f"{', '.join(k[2:] for k in known) or 'none'}")
        out += flag_argv(flag, value, where)
    return out


def flag_argv(flag: Flag, value: Any, where: str) -> list[str]:
    if flag.switch:
        if not isinstance(value, bool):
            raise UserError(f"{where}: {flag.flag[2:]} is a switch: give true or false")
        return [flag.flag] if value else []
    out = []
    for v in (value if isinstance(value, list) and flag.many else [value]):
        text = _text(v)
        try:
            if flag.parse is not None:
                flag.parse(text)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UserError(f"{where}: {flag.flag[2:]} = {v!r}: {exc}") from None
        if flag.choices is not None and text not in flag.choices:
            raise UserError(f"{where}: {flag.flag[2:]} = {v!r}: give one of "
                            f"{', '.join(flag.choices)}")
        out += [flag.flag, text]
    return out


def load(path: str | Path, families: Mapping[str, Family], labels: Sequence[str]) -> Sweep:
    """The sweep file, checked against the registered families and the fingerprint's labels."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise UserError(f"{p}: no such sweep file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{p}: cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{p}: not valid TOML: {exc}") from None
    top = _Reader(p, "file", doc)
    top.keys(("sweep", "configurations", "workloads"))
    s = _Reader(p, "sweep", doc.get("sweep", {}))
    s.keys(("name", "baseline", "profile", "rounds", "max_rounds", "budget", "alpha",
            "resolution"))
    configs = _configurations(p, doc.get("configurations"), labels)
    workloads = _workloads(p, doc.get("workloads"), families)
    for c in configs.values():  # a configuration's hpcprobe options: some workload takes each
        for key, value in c.options.items():
            takers = [w for w in workloads.values()
                      if any(f.flag == "--" + key.lstrip("-")
                              for _, f in flags(families[w.family].options))]
            if not takers:
                raise UserError(f"{p}: [configurations.{c.name}] options: no workload's family "
                                f"takes {key!r}")
            for w in takers:
                family_argv(families[w.family], {key: value}, f"{p}: [configurations.{c.name}]")
    boots = {c.boot for c in configs.values()}
    if len(boots) > 1 and None in boots:
        raise UserError(f"{p}: some configurations name a boot and some do not: when a state "
                        "needs a reboot, every configuration names the boot it runs in")
    name = s.get("name", str, p.stem)
    if not _NAME.match(name):
        s.fail(f"[sweep] name = {name!r}: letters, digits and . _ + - (at most 64)")
    baseline = s.get("baseline", str, next(iter(configs)))
    if baseline not in configs:
        s.fail(f"[sweep] baseline = {baseline!r} is not a configuration; configurations: "
               f"{', '.join(configs)}")
    rounds = s.get("rounds", int, 3)
    max_rounds = s.get("max_rounds", int, max(10, rounds))
    if rounds < 1 or max_rounds < rounds:
        s.fail(f"[sweep] rounds = {rounds}, max_rounds = {max_rounds}: give 1 <= rounds <= "
               "max_rounds")
    try:
        budget = duration(s.get("budget", (str, int, float), 3600))
    except ValueError as exc:
        s.fail(f"[sweep] budget: {exc}")
    alpha = float(s.get("alpha", (int, float), recommend.ALPHA))
    resolution = float(s.get("resolution", (int, float), recommend.RESOLUTION))
    if not (0 < alpha < 1 and 0 < resolution < 1):
        s.fail("[sweep] alpha and resolution lie between 0 and 1")
    return Sweep(name, p, configs, workloads, baseline, s.get("profile", str, "quick"), rounds,
                 max_rounds, budget, alpha, resolution)


def _tables(p: Path, table: Any, kind: str, missing: str) -> Iterator[tuple[str, _Reader]]:
    """Each [KIND.NAME] table with its reader; none at all is the `missing` mistake."""
    if not table:
        raise UserError(f"{p}: no [{kind}.NAME] table: {missing}")
    top = _Reader(p, kind, table)
    for name, t in top.table.items():
        if not _NAME.match(name):
            top.fail(f"[{kind}.{name}]: a name is letters, digits and . _ + -")
        yield name, _Reader(p, f"{kind}.{name}", t)


def _configurations(p: Path, table: Any, labels: Sequence[str]) -> dict[str, Configuration]:
    out = {}
    for name, r in _tables(p, table, "configurations", "a sweep compares at least two"):
        if name == "sweep":
            r.fail("[configurations.sweep]: the name is the summary's tag (NAME:sweep); call it "
                   "otherwise")
        r.keys(("env", "openmp", "options", "wrap", "set", "pre", "post", "expect", "boot"))
        env = {k: _text(v) for k, v in r.mapping("env").items()}
        for k, v in r.mapping("openmp").items():
            if k not in OPENMP:
                r.fail(f"[configurations.{name}] openmp.{k}: unknown; settings: "
                       f"{', '.join(OPENMP)}")
            env[OPENMP[k]] = _text(v)
        sysfs = {k: _text(v) for k, v in r.mapping("set").items()}
        for path in sysfs:
            # `..` resolved first (as the kernel would: /proc/sys/../../etc/x is /etc/x); a
            # link under /sys is the kernel's own
            plain = os.path.normpath(path)
            if not plain.startswith(("/sys/", "/proc/sys/")) or plain != path.rstrip("/"):
                r.fail(f"[configurations.{name}] set: {path!r}: only files under /sys and "
                       "/proc/sys are set, named without . or .. (other state: pre and post "
                       "commands)")
        expect = {k: _text(v) for k, v in r.mapping("expect").items()}
        for k in expect:
            if k not in labels and not k.startswith("env "):
                r.fail(f"[configurations.{name}] expect: {k!r} is not a fingerprint label; "
                       f"labels: {', '.join(labels)}")
        out[name] = Configuration(name, env, r.mapping("options"), r.strings("wrap"), sysfs,
                                  r.commands("pre"), r.commands("post"), expect,
                                  r.get("boot", str))
    if len(out) < 2:
        raise UserError(f"{p}: one configuration: a sweep compares at least two")
    return out


def app_keys(app: Family) -> tuple[str, ...]:
    """The keys of an application's workload: its command, and the options of `hpcprobe app`
    (--lower-is-better as lower_is_better)."""
    return ("command", *(f.flag.lstrip("-").replace("-", "_") for _, f in flags(app.options)))


def _workloads(p: Path, table: Any, families: Mapping[str, Family]) -> dict[str, Workload]:
    out = {}
    app = runs_commands(families)
    for name, r in _tables(p, table, "workloads", "name the families or applications to run"):
        where = f"{p}: [workloads.{name}]"
        figures = r.strings("figures")
        match = r.mapping("where")
        by = r.get("by", str, "time")
        if by not in CRITERIA:
            r.fail(f"[workloads.{name}] by = {by!r}: give one of {', '.join(CRITERIA)}")
        if "command" in r.table:
            r.keys((*app_keys(families[app]), "figures", "where", "by"))
            command = r.strings("command")
            if not command:
                r.fail(f"[workloads.{name}] command is empty")
            opts = {k.replace("_", "-"): v for k, v in r.table.items()
                    if k not in ("command", "figures", "where", "env", "by")}
            env = r.mapping("env")
            if env:
                opts["env"] = [f"{k}={_text(v)}" for k, v in env.items()]
            family_argv(families[app], opts, where)
            out[name] = Workload(name, app, opts, command, figures, match, by)
            continue
        r.keys(("family", "options", "figures", "where", "by"))
        fam = r.get("family", str, name)
        known = {f for f, x in families.items() if x.run is not None and f != app}
        if fam not in known:
            r.fail(f"[workloads.{name}] family {fam!r} is unknown; families: "
                   f"{', '.join(sorted(known))} (or give a command: a user's application)")
        opts = r.mapping("options")
        family_argv(families[fam], opts, where)
        spec_names = set(families[fam].metrics.names())
        for f in figures:
            if spec_names and f not in spec_names:
                r.fail(f"[workloads.{name}] figures: {f!r} is not a metric of {fam}; its "
                       f"metrics: {', '.join(sorted(spec_names))}")
        out[name] = Workload(name, fam, opts, (), figures, match, by)
    return out

