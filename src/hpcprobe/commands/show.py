"""`hpcprobe show`: a stored run (or a run document), as the run showed it."""

from __future__ import annotations

import argparse
import contextlib

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
from hpcprobe.common.errors import UserError
from hpcprobe.results.store import Store
from hpcprobe.views import terminal


def setup(sh: argparse.ArgumentParser) -> None:
    sh.add_argument("run", help="run id, unique id prefix, tag, 'latest', or a result JSON file")
    add_db(sh)
    add_json(sh, "the run document")
    add_judging(sh)


def handle(a: argparse.Namespace) -> int:
    against = output.Against.of(a.against)
    [run] = load_runs([a.run], a.db)
    if a.json:
        print_json(run.to_dict(), a.json)
        return 0
    with contextlib.ExitStack() as stack:
        store = None if against.path else _store(a.db)
        if store is not None:
            stack.enter_context(store)
        judged = against.verdict(run, store)
    terminal.render(run, console(), registry.views(), console(stderr=True), judged, a.details)
    return 1 if judged.failed else 0


def _store(db: str | None) -> Store | None:
    """The store whose previous runs judge the run, where there is one."""
    try:
        return Store.open(db, create=False)
    except UserError:
        return None


COMMAND = Spec("show", "show a stored run", setup, handle)
