"""`hpcprobe import`: store run documents written with --json, each checked first."""

from __future__ import annotations

import argparse

from hpcprobe.commands.base import Spec, add_db
from hpcprobe.results import export
from hpcprobe.results import model as results
from hpcprobe.results.store import Store


def setup(im: argparse.ArgumentParser) -> None:
    im.add_argument("files", nargs="+", metavar="FILE.json")
    add_db(im)


def handle(a: argparse.Namespace) -> int:
    runs = [results.read_json(f) for f in a.files]  # all checked before any is stored
    with Store.open(a.db) as st:
        stored, skipped = export.import_runs(st, runs)
        where = st.path
    print(f"Imported {len(stored)} run(s) into {where}"
          + (f"; {len(skipped)} stored already, skipped: {', '.join(skipped)}" if skipped
             else "") + ".")
    return 0


COMMAND = Spec("import", "store run documents written with --json", setup, handle,
               description="Store runs measured elsewhere (a compute node offline, another "
                           "store): every file is read and checked first; a run stored "
                           "already is skipped, so importing twice stores it once.")
