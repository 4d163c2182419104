"""`hpcprobe history`: one figure (or the headline figures) over time for a host, a tag prefix
or the whole store, each host's series with its change points, each hardware group's campaign
medians with theirs, what changed in the nodes' configuration across each, and the runs left
out as disturbed. Its figures come from one SQL query each (`Store.figure_across`: the stored
summaries, not the samples), the configurations of the runs that matter from one more."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from hpcprobe import registry
from hpcprobe.commands.base import (
    Spec,
    add_db,
    add_details,
    add_figure,
    add_json,
    add_output,
    add_selection,
    check_metric,
    console,
    print_json,
    selection,
)
from hpcprobe.common import files
from hpcprobe.common.errors import UserError
from hpcprobe.history import read
from hpcprobe.history.series import History, Series
from hpcprobe.results.store import Selection, Store
from hpcprobe.views import history as views


def setup(p: argparse.ArgumentParser) -> None:
    add_figure(p, "the figure, e.g. memory.bandwidth (default: the headline figures of the "
               "newest run selected)")
    add_selection(p)
    p.add_argument("--tag-prefix", metavar="PREFIX",
                   help="only runs whose tag starts with PREFIX (a campaign's passes)")
    p.add_argument("--group", metavar="TEXT",
                   help="only hosts whose hardware group (CPU, sockets x cores, GPU models, as "
                        "the table titles show it) contains TEXT, e.g. 'EPYC 9654'")
    add_details(p, "every host's row (by default, past 20 hosts, only those that changed "
                "alone)")
    add_json(p, "the series and their change points")
    p.add_argument("--csv", metavar="FILE", help="write every point as CSV (`-`: standard "
                                                 "output)")
    add_output(p, "FILE.html", "also write the HTML page: each figure's table and its plot "
               "(every host's series, the hosts' median and middle half, the change points)")
    add_db(p)


def _selection(a: argparse.Namespace) -> Selection:
    s = selection(a)
    return Selection(s.tag, s.host, s.since, s.until, a.tag_prefix)


def _in_group(series: list[Series], groups: dict[str, str], text: str
              ) -> list[Series]:
    """The series of the hosts whose hardware group contains `text` (any case)."""
    kept = [s for s in series if text.lower() in groups[s.host].lower()]
    if not kept:
        raise UserError(f"--group {text}: no host selected is of such hardware; their groups: "
                        + "; ".join(sorted(set(groups.values()))))
    return kept


def handle(a: argparse.Namespace) -> int:
    if a.param and not a.metric:
        raise UserError("--param selects figures of one metric: add --metric")
    if a.metric:
        check_metric(*a.metric)
    files.check_outputs((a.json, "--json"), (a.csv, "--csv"), (a.output, "-o"))
    outs = [x for x in (a.json, a.csv, a.output) if files.is_stdout(x)]  # one at most
    known = registry.declared()
    series = read.all_series(a.db, a.metric, dict(a.param or []), _selection(a), known)
    with Store.open(a.db, create=False) as store:
        groups = read.hardware_groups(store, series, known)
        if a.group:
            series = _in_group(series, groups, a.group)
            groups = {s.host: groups[s.host] for s in series}
        read.attribute(store, series)
        found = History(series, read.fleets(series, groups), groups,
                        read.group_changes(store, series, groups))
    if not outs:
        views.show(found, console(), a.details)
    if a.json:
        print_json(views.document(found), a.json)
    if a.csv:
        _write_csv(series, a.csv)
    if a.output:
        _write(views.page(found, "hpcprobe history"), a.output, "-o")
    return 0


def _write_csv(series: list[Series], path: str) -> None:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["figure", "params", "host", "run_id", "created", "tag", "median", "unit",
                "rel_ci95", "disturbed"])
    for s in series:
        for p in s.points:
            w.writerow([s.label, json.dumps(s.params, sort_keys=True), s.host, p.run_id,
                        p.created, p.tag or "", p.median, s.unit, p.rel_ci, p.disturbed or ""])
    _write(buf.getvalue(), path, "--csv")


def _write(text: str, path: str, option: str) -> None:
    """A document to its file (atomically) or standard output (`-`)."""
    files.atomic_write(path, text.encode(), option)  # `-`: standard output
    if not files.is_stdout(path):
        print(f"Wrote {path}.", file=sys.stderr)


COMMAND = Spec("history", "a figure over time per host, with its change points and what "
                          "changed", setup, handle,
               description="One figure (--metric, --param) or the headline figures over time, "
                           "per host: the series, the change points (ruptures' PELT, Welch's "
                           "test), the configuration differences across each, the disturbed "
                           "runs left out. See docs/history.md.")
