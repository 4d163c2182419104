"""`hpcprobe prune`: remove the runs created before a date, whole, in one transaction."""

from __future__ import annotations

import argparse

from hpcprobe.commands.base import Spec, add_db, add_dry_run, add_host, date
from hpcprobe.results.store import Selection, Store


def setup(pr: argparse.ArgumentParser) -> None:
    pr.add_argument("--before", type=date, metavar="DATE", required=True,
                    help="remove runs created before this UTC date/time (ISO 8601)")
    pr.add_argument("--keep-tagged", action="store_true",
                    help="keep runs that carry a tag (campaigns, configurations)")
    add_host(pr)
    add_dry_run(pr, "say what would go, remove nothing")
    add_db(pr)


def handle(a: argparse.Namespace) -> int:
    with Store.open(a.db, create=False) as st:
        old = [r for r in st.runs(where=Selection(host=a.host, until=a.before))
               if not (a.keep_tagged and r.tag)]
        if a.dry_run:
            print(f"Would remove {len(old)} run(s) created before {a.before} from {st.path}"
                  + (f": {', '.join(r.run_id for r in old[:20])}" if old else "")
                  + (" ..." if len(old) > 20 else "") + ".")
            return 0
        gone = st.delete([r.run_id for r in old])
        print(f"Removed {gone} run(s) created before {a.before} from {st.path}"
              + (" (tagged runs kept)" if a.keep_tagged else "") + ".")
    return 0


COMMAND = Spec("prune", "remove old runs from the store", setup, handle,
               description="Remove the runs created before a date, whole (their metrics and "
                           "samples too), in one transaction.")
