"""The registry of commands, in the order `hpcprobe --help` lists them. A command is one module
under commands/ (its parser and its handler in a Spec) and one line here; a family's own
command (`hpcprobe mpi`) comes from its Command capability."""

from __future__ import annotations

from hpcprobe.commands import (
    check,
    cluster,
    compare,
    export,
    family,
    history,
    import_,
    list_,
    plan,
    prune,
    reference,
    report,
    run,
    scale,
    show,
    sweep,
    topology,
)
from hpcprobe.commands.base import Spec


def commands() -> list[Spec]:
    return [
        run.COMMAND,
        *family.commands(),
        check.COMMAND,
        scale.COMMAND,
        sweep.COMMAND,
        compare.COMMAND,
        report.COMMAND,
        reference.COMMAND,
        history.COMMAND,
        topology.COMMAND,
        plan.COMMAND,
        list_.COMMAND,
        prune.COMMAND,
        import_.COMMAND,
        export.COMMAND,
        cluster.COMMAND,
        show.COMMAND,
    ]
