"""A family's own command (`hpcprobe mpi`, `hpl`, `gpu`, `app`): the family alone with its
options, one of its actions (`mpi info`), or values by position (`app NAME -- CMD`). Each
family with the Command capability gets one; nothing here names a family."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial

from hpcprobe import registry
from hpcprobe.commands import runargs
from hpcprobe.commands.base import CheckingParser, Spec, add_run_options, split_command
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.measure import options
from hpcprobe.measure.family import Command, Family


def _setup(fam: Family, own: Command, fc: argparse.ArgumentParser) -> None:
    for pos in own.positionals:
        fc.add_argument(pos.dest, metavar=pos.metavar, help=pos.help,
                        **({"nargs": "*"} if pos.many else {"type": pos.parse}))
    if not own.positionals:
        # not `action`: a dest of its own, which no family option (dslash's --action) shares
        fc.add_argument("own_action", nargs="?", choices=("run", *own.actions), default="run",
                        metavar="ACTION",
                        help="run the tests (default); " + "; ".join(
                            f"{name}: {what}" for name, (what, _) in own.actions.items()))
    fc.add_argument("--with", dest="also", type=options.names, default=(), metavar="B1,B2",
                    help="also run these benchmarks in the same run, after it, as `hpcprobe "
                         "run` runs them for the profile (`app hpcg --with cg`: the CG proxy's "
                         "rate beside HPCG's rating)")
    runargs.add_family_options(fc, [fam])
    add_run_options(fc)


def _families(fam: Family, a: argparse.Namespace) -> list[Family]:
    """The family, then those named by --with (each once; not one that takes values by
    position, which has only its own command)."""
    also = registry.resolve(a.also) if a.also else []
    for f in also:
        if f.name == fam.name or f.command_line() == [f.name]:
            raise UserError(f"--with {f.name}: " + ("it is this command's own benchmark"
                            if f.name == fam.name else f"it runs as `hpcprobe {f.name}` only"))
    return [fam, *also]


def _handle(fam: Family, own: Command, a: argparse.Namespace) -> int:
    if getattr(a, "own_action", None) in own.actions:
        return own.actions[a.own_action][1](runargs.family_options(a, fam))
    return runargs.measure(runargs.checked(a, _families(fam, a)), None, standalone=True)


def check(fam: Family, argv: Sequence[str]) -> runargs.Checked:
    """`hpcprobe FAMILY ARGV` (its own command: values by position, a command after `--`)
    checked as the command checks itself, without running it: a UserError where it refuses."""
    own = fam.capability(Command)
    assert own is not None
    given, command = split_command(argv)
    p = CheckingParser(prog=f"hpcprobe {fam.name}")
    _setup(fam, own, p)
    a = p.parse_args(given)
    a.command, a.after_dashes = fam.name, command
    try:
        c = runargs.checked(a, _families(fam, a))
    except OptionError as exc:
        raise UserError(exc.render(registry.option_names())) from None
    missing = [p.metavar for p in own.positionals if not getattr(c.options[fam.name], p.dest)]
    if missing:
        raise UserError(f"{fam.name}: {' and '.join(missing)} missing (`{fam.name} "
                        + " ".join(p.metavar if not p.many else f"-- {p.metavar}"
                                   for p in own.positionals) + "`)")
    return c


def commands() -> list[Spec]:
    """One command per measuring family that declares its own, in registry order."""
    return [Spec(fam.name, own.help, partial(_setup, fam, own), partial(_handle, fam, own),
                 own.description, takes_command=any(p.many for p in own.positionals))
            for fam, own in registry.having(Command).values() if fam.run is not None]
