"""The entry point: builds the parser from the command registry, dispatches to the command's
handler, and turns what it raises into one line and an exit status."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
from collections.abc import Sequence

from hpcprobe import commands, native
from hpcprobe.commands.base import Parser, split_command
from hpcprobe.common.errors import ERROR_PREFIX, EXIT_INTERRUPTED, HpcprobeError


class _Version(argparse.Action):
    """argparse's version action, the line read only when asked (the release's metadata)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(native.version_line())
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of hpcprobe's own `command` alone (what it is given
    to parse; its module alone imported)."""
    p = Parser(prog="hpcprobe", description="Characterise what an HPC node really delivers.")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="show the version and the kernels' digest, and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for spec in commands.commands(command):
        sp = sub.add_parser(spec.name, help=spec.help, description=spec.description,
                            add_help=not spec.own_help)
        spec.setup(sp)
        sp.set_defaults(handler=spec.handle, takes_command=spec.takes_command)
    return p


def _stacks_on_usr1() -> None:
    """`kill -USR1 PID` prints every thread's stack to stderr: a run that seems hung says
    where it is (`cluster run` asks so of a job before it cancels it for its time)."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__ or 2, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):  # no SIGUSR1, stderr closed
        pass


def option_flags(parser: argparse.ArgumentParser,
                 args: argparse.Namespace | None = None) -> dict[str, str]:
    """The options of the command given (`args`; None: of every command) as errors name them
    (their field, argparse's dest) -> the flag the command line gives them as: lower layers
    name an option <field> (`HpcprobeError.render`), the command line shows its flag, a sweep
    file its key."""
    out: dict[str, str] = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        own = "--" + action.dest.replace("_", "-")
        if longs and (own in longs or action.dest not in out):
            out[action.dest] = own if own in longs else longs[0]
        if isinstance(action, argparse._SubParsersAction):
            chosen = None if args is None else getattr(args, action.dest, None)
            for name, sub in action.choices.items():
                if chosen is None or name == chosen:
                    out.update({k: v for k, v in option_flags(sub, args).items()
                                if k not in out})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    _stacks_on_usr1()
    given = list(sys.argv[1:] if argv is None else argv)
    # `hpcprobe app NAME [OPTIONS] -- COMMAND ARGS...`: what follows -- is the command, as is;
    # the first word before it names the command, whose parser alone is built where it is one
    # of hpcprobe's own
    own, command = split_command(given)
    parser = build_parser(next((a for a in own if not a.startswith("-")), None))
    args = parser.parse_args(own)
    args.after_dashes = command
    if "--" in given and not args.takes_command:
        takers = sorted(s.name for s in commands.commands() if s.takes_command)
        parser.error(f"`--` and what follows it: only {', '.join(takers)} take a command "
                     "after --")
    try:
        return int(args.handler(args))
    except HpcprobeError as exc:  # options named as flags
        # the command's own options first: a family's field may share a name (pgbench's mode)
        from hpcprobe import registry

        names = {**registry.option_names(), **option_flags(parser, args)}
        sys.stderr.write(f"{ERROR_PREFIX}{exc.render(names)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("hpcprobe: interrupted; nothing of this run was stored\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hpcprobe compare ... --csv | head`: the reader has enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
