"""`hpcprobe show`: a stored run (or a run document), as the run showed it."""

from __future__ import annotations

import argparse

from hpcprobe import registry
from hpcprobe.commands import output
from hpcprobe.commands.base import (
    Spec,
    add_db,
    add_json,
    add_judging,
    console,
    load_runs,
    print_json,
)
from hpcprobe.views import terminal


def setup(sh: argparse.ArgumentParser) -> None:
    sh.add_argument("run", help="run id, unique id prefix, tag, 'latest', or a result JSON file")
    add_db(sh)
    add_json(sh, "the run document")
    add_judging(sh)


def handle(a: argparse.Namespace) -> int:
    against = registry.against(a.against)
    [run] = load_runs([a.run], a.db)
    judged = against.judged(run, a.db)
    if a.json:
        print_json(run.to_dict(), a.json)
    else:
        terminal.render(run, console(), registry.views(), console(stderr=True), judged,
                        a.details)
    return output.verdict_exit(against, [judged])



COMMAND = Spec("show", "show a stored run", setup, handle)
