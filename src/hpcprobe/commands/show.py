"""`hpcprobe show`: a stored run (or a run document), as the run showed it."""

from __future__ import annotations

import argparse

from hpcprobe import registry
from hpcprobe.commands.base import Spec, add_db, console, load_runs, print_json
from hpcprobe.views import terminal


def setup(sh: argparse.ArgumentParser) -> None:
    sh.add_argument("run", help="run id, unique id prefix, tag, 'latest', or a result JSON file")
    add_db(sh)
    sh.add_argument("--json", action="store_true", help="print the run document")


def handle(a: argparse.Namespace) -> int:
    [run] = load_runs([a.run], a.db)
    if a.json:
        print_json(run.to_dict())
    else:
        terminal.render(run, console(), registry.views())
    return 0


COMMAND = Spec("show", "show a stored run", setup, handle)
