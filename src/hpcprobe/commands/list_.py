"""`hpcprobe list`: the stored runs, newest first."""

from __future__ import annotations

import argparse

from hpcprobe.commands.base import (
    Spec,
    add_db,
    add_json,
    add_selection,
    console,
    print_json,
    selection,
)
from hpcprobe.measure import options
from hpcprobe.results.store import Store


def setup(ls: argparse.ArgumentParser) -> None:
    add_db(ls)
    ls.add_argument("--limit", type=options.at_least(1, "a run count"), default=50,
                    help="most recent runs to list (default 50)")
    add_json(ls, "the list")
    add_selection(ls)


def handle(a: argparse.Namespace) -> int:
    with Store.open(a.db, create=False) as st:
        rows = st.runs(a.limit, selection(a))
        where = st.path
    if a.json:
        print_json([r.__dict__ for r in rows], a.json)
        return 0
    from rich.table import Table

    t = Table(title=f"Runs in {where}", title_justify="left")
    for col in ("run", "created", "host", "tag", "profile", "benchmarks", "metrics", "seconds"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.run_id, r.created, r.host, r.tag or "", r.profile, ",".join(r.benchmarks)
                  + (" (interrupted)" if r.interrupted else ""), str(r.metrics),
                  f"{r.duration_s:.1f}")
    console().print(t)
    return 0


COMMAND = Spec("list", "list stored runs", setup, handle)
