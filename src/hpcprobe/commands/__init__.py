"""The registry of commands, in the order `hpcprobe --help` lists them. A command is one module
under commands/ (its parser and its handler in a Spec named as the command) and one line here; a
family's own command (`hpcprobe mpi`) comes from its Command capability, listed after `run`. A
command's module is imported when the command is parsed: `hpcprobe check` in a prolog loads
check's alone, not every command's (tests/test_layers.py holds each name to its module's)."""

from __future__ import annotations

from importlib import import_module

from hpcprobe.commands.base import Spec

#: Each command of hpcprobe's own -> its module under commands/, in `--help` order
CORE = {
    "run": "run",
    "check": "check",
    "scale": "scale",
    "sweep": "sweep",
    "compare": "compare",
    "report": "report",
    "reference": "reference",
    "history": "history",
    "topology": "topology",
    "plan": "plan",
    "list": "list_",
    "prune": "prune",
    "import": "import_",
    "export": "export",
    "cluster": "cluster",
    "show": "show",
}


def spec(name: str) -> Spec:
    """The command of hpcprobe's own called `name` (its module imported now)."""
    found: Spec = import_module(f"hpcprobe.commands.{CORE[name]}").COMMAND
    return found


def commands(name: str | None = None) -> list[Spec]:
    """Every command, or where `name` is one of hpcprobe's own, that one alone."""
    if name in CORE:
        return [spec(name)]
    from hpcprobe.commands import family

    own = [spec(n) for n in CORE]
    return [own[0], *family.commands(), *own[1:]]
