"""`hpcprobe compare`: runs against the first, with statistics: what differs in their
configuration, then every metric they share."""

from __future__ import annotations

import argparse
import sys

from hpcprobe import registry
from hpcprobe.commands import output
from hpcprobe.commands.base import (
    Spec,
    add_against,
    add_db,
    add_json,
    console,
    load_runs,
    print_json,
    say,
)
from hpcprobe.measure import options
from hpcprobe.views import terminal
from hpcprobe.views import verdict as verdict_view


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
    add_against(c, "each run's headline figures too", "exit status 1 when one is below it")


def handle(a: argparse.Namespace) -> int:
    from hpcprobe.analysis import compare

    against = registry.against(a.against)
    runs = load_runs(a.runs, a.db)
    c = compare.compare(runs, registry.not_joined())
    judged = [against.verdict(r, None) for r in runs] if a.against else []
    shown = console(stderr=bool(a.json or a.csv))  # a document on stdout holds nothing else
    for run, v in zip(runs, judged, strict=False):  # none without --against
        say(shown, f"Run {run.run_id} ({run.host}, {run.tag or 'no tag'}):")
        terminal.print_blocks(verdict_view.blocks(v), shown, verdict_view.WIDTH)
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
    return output.verdict_exit(against, judged) if a.against else 0


COMMAND = Spec("compare", "compare runs with statistics", setup, handle,
               description="Compare runs against the first: what differs in their "
                           "configuration, then every metric they share.")
