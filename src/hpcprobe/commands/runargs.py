"""The command line of `hpcprobe run` and the one check of it: the families' option fields as
flags, their options dataclasses from the flags given, and `check(families, argv)`, which run,
scale, sweep and cluster run all call, so that a nested run refused on its node is refused
where it is set up too, with the same words; and what such a command line does (`measure`,
or its plan with --dry-run), for `run` and each family's own command."""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hpcprobe import registry
from hpcprobe.commands import output
from hpcprobe.commands.base import (
    CheckingParser,
    add_isa,
    add_report,
    add_run_options,
    open_store,
)
from hpcprobe.common.errors import HpcprobeError, OptionError, UserError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import sentinel, topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import Command, Family, Flag, flags, notes
from hpcprobe.measure.runner import resolve_isa
from hpcprobe.results.store import Selection, Store


def setup(r: argparse.ArgumentParser, families: Sequence[Family] | None = None) -> None:
    """The arguments of `hpcprobe run` (`families`: whose options `--help` shows, all by
    default; every family's options are always taken)."""
    if not any(isinstance(x, argparse._HelpAction) for x in r._actions):  # noqa: SLF001
        r.add_argument("-h", "--help", action=_Help, help="show this help (after BENCHMARK: "
                       "its options only) and exit")
    r.add_argument("benchmarks", nargs="*", metavar="BENCHMARK",
                   help="benchmarks to run (" + ", ".join(f.name for f in registry.measuring())
                        + ")")
    add_run_options(r)
    add_report(r, "this run", short=True)
    add_isa(r, "the best this CPU supports; compute and frequency: every one it supports")
    add_family_options(r, families or registry.measuring())


class _Help(argparse.Action):
    """--help: with benchmarks named before it (`hpcprobe run memory --help`), the run's own
    options and theirs only."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        named = [f for f in registry.measuring() if f.name in (getattr(
            namespace, "benchmarks", None) or [])]
        if named:
            parser = argparse.ArgumentParser(
                prog=f"{parser.prog} {' '.join(f.name for f in named)}", add_help=False,
                description=parser.description, formatter_class=parser.formatter_class)
            setup(parser, named)
        parser.print_help()
        parser.exit()


def dest(flag: Flag) -> str:
    return flag.flag.lstrip("-").replace("-", "_")


def add_family_options(p: argparse.ArgumentParser, families: Sequence[Family],
                       skip: frozenset[str] = frozenset()) -> None:
    """Each family's option fields as flags (but those in skip), in one group per family; a
    flag that several families declare is one option, in the group of the first."""
    seen: dict[str, Flag] = {}
    users = _users(families, lambda flag: True)
    said = {f.name: notes(f.options) for f in families}
    for fam in families:
        group = p.add_argument_group(f"narrowing the {fam.name} benchmark")
        for _, flag in flags(fam.options):
            if flag.flag in skip:
                continue
            if flag.flag in seen:
                if (seen[flag.flag].parse, seen[flag.flag].choices) != (flag.parse, flag.choices):
                    raise AssertionError(f"{flag.flag} is declared twice with different types")
                continue
            seen[flag.flag] = flag
            shared = users[flag.flag]
            meant = [f"{name}: {said[name][flag.flag]}" for name in shared
                     if flag.flag in said[name]]
            kw: dict[str, Any] = {"dest": dest(flag), "help": flag.help
                                  + (f" ({'; '.join(meant)})" if meant else "")
                                  + (f" [{', '.join(shared)}]" if len(shared) > 1 else "")}
            if flag.switch:
                kw["action"] = "store_true"
            else:
                kw.update(type=flag.parse, choices=flag.choices, metavar=flag.metavar)
                if flag.many:
                    kw["action"] = "append"
            group.add_argument(flag.flag, **kw)


def _users(families: Sequence[Family], keep: Callable[[Flag], bool]) -> dict[str, list[str]]:
    """Flag -> the families that declare it, for the flags kept."""
    users: dict[str, list[str]] = {}
    for fam in families:
        for _, flag in flags(fam.options):
            if keep(flag):
                users.setdefault(flag.flag, []).append(fam.name)
    return users


def _given(a: argparse.Namespace, flag: Flag) -> bool:
    value = getattr(a, dest(flag), None)
    return value is not None and value is not False


def family_options(a: argparse.Namespace, fam: Family) -> Any:
    """The family's options dataclass from the flags given (and its command's positionals)."""
    kw = {}
    for name, flag in flags(fam.options):
        if _given(a, flag):
            value = getattr(a, dest(flag))
            kw[name] = flag.convert(value) if flag.convert else value
    own = fam.capability(Command)
    for pos in own.positionals if own and getattr(a, "command", None) == fam.name else ():
        value, after = getattr(a, pos.dest), getattr(a, "after_dashes", None)
        if pos.many and value and after:
            raise UserError(f"{' '.join(value)}: more values than {fam.name} takes before -- "
                            f"(its {pos.metavar} follows --)")
        kw[pos.dest] = tuple(after or value) if pos.many else value
    return fam.options(**kw)


def by_position(fam: Family, values: Sequence[str], rest: Sequence[str]) -> dict[str, Any]:
    """The family's values by position given to another command (`hpcprobe scale app NAME --
    COMMAND...`): its options' fields, or the user's mistake."""
    own = fam.capability(Command)
    pos = own.positionals if own else ()
    single = [p for p in pos if not p.many]
    if len(values) != len(single) or (rest and not any(p.many for p in pos)):
        wants = " ".join(p.metavar for p in single) + (
            " -- " + " ".join(p.metavar for p in pos if p.many) if any(p.many for p in pos)
            else "")
        raise UserError(f"{fam.name} takes " + (f"`{wants.strip()}`" if wants.strip() else
                                                 "no values by position or command after --")
                        + f"; given: {' '.join(values) or 'none'}"
                        + (f" -- {' '.join(rest)}" if rest else ""))
    kw: dict[str, Any] = {}
    for p, text in zip(single, values, strict=True):
        try:
            kw[p.dest] = p.parse(text) if p.parse else text
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{p.metavar}: {exc}") from None
    kw.update({p.dest: tuple(rest) for p in pos if p.many})
    return kw


def _check_narrowing(a: argparse.Namespace, chosen: Sequence[Family]) -> None:
    """A flag given for families none of which runs is a mistake, said once per flag group."""
    users = _users(registry.measuring(), lambda flag: _given(a, flag))
    names = {f.name for f in chosen}
    idle: dict[tuple[str, ...], list[str]] = {}  # families -> their idle flags
    for flag_name, fams in users.items():
        if not names & set(fams):
            idle.setdefault(tuple(fams), []).append(flag_name)
    for group, flag_names in idle.items():
        which = group[0] if len(group) == 1 else ", ".join(group[:-1]) + " and " + group[-1]
        raise UserError(f"{'/'.join(flag_names)} narrow{'s' if len(flag_names) == 1 else ''} "
                        f"the {which} benchmark{'s' if len(group) > 1 else ''}; add "
                        f"{f'`{group[0]}`' if len(group) == 1 else 'one of them'} to the "
                        "benchmarks")


@dataclass(frozen=True)
class Checked:
    """A run's command line, checked: the families in order, each one's options, the profile
    and the parsed arguments."""

    families: list[Family]
    options: dict[str, Any]
    profile: profiles.Profile
    args: argparse.Namespace


def checked(a: argparse.Namespace, chosen: Sequence[Family]) -> Checked:
    """The families' options from parsed arguments, or the user's mistake (a flag no chosen
    family takes, a value a family refuses). What it checks holds on any machine: what depends
    on the node (its cores, its ISA) is its plan's, on the node."""
    _check_narrowing(a, chosen)
    return Checked(list(chosen), {f.name: family_options(a, f) for f in chosen},
                   profiles.get(a.profile), a)


def check(families: Sequence[str], argv: Sequence[str]) -> Checked:
    """`hpcprobe run FAMILIES ARGV` checked as the run itself checks it, without running it: a
    UserError with the run's own message where it would refuse."""
    p = CheckingParser(prog="hpcprobe run")
    setup(p)
    a = p.parse_args([*families, *argv])
    a.command = "run"
    try:
        return checked(a, registry.resolve(a.benchmarks))
    except OptionError as exc:  # options named as the command line names them
        raise UserError(exc.render(registry.option_names())) from None


def measure(c: Checked, isa_given: str | None, standalone: bool = False) -> int:
    """Run the checked families (with the ISA variant `--isa` gave, else the best), show the
    run, store it and write its documents as asked."""
    a = c.args
    isa = resolve_isa(isa_given)
    isa_asked = isa_given is not None
    if a.input and not a.dry_run:
        raise UserError("--input plans for another machine: add --dry-run (measurements run on "
                        "this one)")
    out = output.Outputs.of(a)
    if a.dry_run:
        return dry_run(c, isa, isa_asked, standalone)
    store = open_store(a.db, a.no_store)
    topo = topology.discover()
    return output.measured(out, store, lambda bar: (registry.execute(
        topo, c.profile, [f.name for f in c.families], isa, c.options, bar,
        oversubscribe=a.oversubscribe, tag=a.tag, isa_asked=isa_asked,
        standalone=standalone), []))


def dry_run(c: Checked, isa: str, isa_asked: bool, standalone: bool) -> int:
    """What the run would measure (and refuse), and nothing else."""
    a = c.args
    topo = topology.load(a.input)
    todo = registry.plan(topo, c.profile, [f.name for f in c.families], isa, c.options,
                         a.oversubscribe, isa_asked, standalone)
    # an hwloc XML states no instruction set: the kernels listed are those this machine runs
    where = f"{a.input} (ISA and kernel variants: this machine's)" if a.input else "this machine"
    print(f"Profile {c.profile.name}, ISA {isa}, on {topo.counts()['cores']} core(s) of {where}; "
          "nothing measured or stored (--dry-run):")
    took = {} if a.input else _seconds(a.db, c.profile.name)
    _print_plan(todo, took)
    with contextlib.suppress(HpcprobeError):  # a machine it cannot read: its run says why
        p = sentinel.probe(topo).describe()
        print(f"and around them the node sentinel: a DRAM triad on CPUs {p['cpus']}, "
              f"{format_bytes(p['size_bytes'])}, before the first benchmark and after each")
    return 0


def _seconds(db: str | None, profile: str, runs: int = 3) -> dict[str, float]:
    """Family -> the median of its seconds in this host's last runs of this profile in the
    store (as their provenance recorded them); nothing where there are none."""
    try:
        store = Store.open(db, create=False)
    except UserError:
        return {}
    took: dict[str, list[float]] = {}
    with store:
        infos = [i for i in store.runs(limit=20, where=Selection(host=socket.gethostname()))
                 if i.profile == profile and not i.interrupted][:runs]
        for info in infos:
            for name, s in store.load(info.run_id).conditions.seconds.items():
                took.setdefault(name, []).append(float(s))
    return {name: statistics.median(s) for name, s in took.items()}


def _print_plan(todo: Sequence[tuple[str, list[str]]], took: dict[str, float]) -> None:
    for name, lines in todo:
        when = f", about {took[name]:.0f} s" if name in took else ""
        print(f"{name}: {len(lines)} measurement(s){when}")
        for line in lines:
            print(f"  {line}")
    known = [took[name] for name, _ in todo if name in took]
    unknown = [name for name, _ in todo if name not in took]
    if known and not unknown:
        print(f"In all about {sum(known):.0f} s (the median of this host's last runs of this "
              "profile in the store)")
    elif known:
        print(f"In all about {sum(known):.0f} s and the time of {', '.join(unknown)}, which "
              "this host has not run in this profile yet")
    else:
        print("Time: not known until this host has run this profile once (each run records "
              "its time per benchmark)")
