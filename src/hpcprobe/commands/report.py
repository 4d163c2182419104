"""`hpcprobe report`: one self-contained HTML file with runs' tables and plots."""

from __future__ import annotations

import argparse
import sys

from hpcprobe import registry
from hpcprobe.commands import output
from hpcprobe.commands.base import Spec, add_against, add_db, add_output, load_runs
from hpcprobe.common import files


def setup(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("runs", nargs="*", metavar="RUN", default=["latest"],
                    help="run id, prefix, tag, host, 'latest' (default) or a result JSON file")
    add_output(rp, "FILE.html", "the HTML report to write", True)
    rp.add_argument("--png", metavar="DIR", help="also write each plot as a PNG file there")
    add_db(rp)
    add_against(rp, "each run's headline figures", "default: the host's previous runs in the "
                "store")


def handle(a: argparse.Namespace) -> int:
    from hpcprobe.views import html as report

    files.check_writable(a.output, "-o")
    against = registry.against(a.against)
    runs = load_runs(a.runs, a.db)
    judged = [against.judged(r, a.db) for r in runs]
    n = report.write(runs, a.output, registry.views(), registry.figures(),
                     registry.not_joined(), a.png, verdicts=judged)
    print(f"Wrote {a.output} ({n} plots" + (f", PNGs in {a.png}" if a.png else "") + ").",
          file=sys.stderr if files.is_stdout(a.output) else sys.stdout)
    return output.verdict_exit(against, judged)


COMMAND = Spec("report", "write an HTML report of runs, with plots", setup, handle,
               description="One self-contained HTML file (opens without network) with the "
                           "runs' tables and plots; with several runs, the comparison and "
                           "overlaid curves.")
