"""`hpcprobe compare`: runs against the first, with statistics: what differs in their
configuration, then every metric they share."""

from __future__ import annotations

import argparse
import sys

from hpcprobe import registry
from hpcprobe.commands.base import Spec, add_db, add_json, console, load_runs, print_json
from hpcprobe.measure import options
from hpcprobe.views import terminal


def setup(c: argparse.ArgumentParser) -> None:
    c.add_argument("runs", nargs="+", metavar="RUN",
                   help="run id, unique id prefix, tag, host (its latest run), 'latest', or a "
                        "result JSON file; the first is the baseline")
    add_db(c)
    out = c.add_mutually_exclusive_group()
    add_json(out, "the comparison")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    c.add_argument("--limit", type=options.at_least(0, "a row count"), default=40,
                   help="rows in the text view (default 40, 0 for all; JSON and CSV have all)")


def handle(a: argparse.Namespace) -> int:
    from hpcprobe.analysis import compare

    c = compare.compare(load_runs(a.runs, a.db), registry.not_joined())
    if a.json:
        print_json(compare.to_json(c), a.json)
    elif a.csv:
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=compare.CSV_COLUMNS, extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for r in c.rows:
            w.writerow(r.to_dict())
    else:
        terminal.render_comparison(c, console(), a.limit if a.limit > 0 else None)
    return 0


COMMAND = Spec("compare", "compare runs with statistics", setup, handle,
               description="Compare runs against the first: what differs in their "
                           "configuration, then every metric they share.")
