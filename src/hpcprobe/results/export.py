"""Moving runs in and out of a store: export as JSON lines or CSV (runs, metrics with their
summary, or every sample), import of run documents written with --json (idempotent)."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from hpcprobe.common import jsondoc
from hpcprobe.results.model import Metric, Run
from hpcprobe.results.store import Selection, Store

WHAT = ("runs", "metrics", "samples")
FORMATS = ("jsonl", "csv")
COLUMNS = {
    "runs": ("run_id", "created", "host", "tag", "profile", "benchmarks", "metrics",
             "duration_s"),
    "metrics": ("run_id", "created", "host", "tag", "benchmark", "name", "unit", "better",
                "params", "n", "median", "ci_low", "ci_high", "min", "max"),
    "samples": ("run_id", "host", "tag", "benchmark", "name", "unit", "params", "seq", "value"),
}


def _metric_rows(head: dict[str, Any], m: Metric, what: str) -> Iterator[dict[str, Any]]:
    head = {**head, "benchmark": m.benchmark, "name": m.name, "unit": m.unit,
            "better": m.better, "params": m.params}
    if what == "metrics":
        s = m.summary
        yield {**head, "n": s.n, "median": s.median, "ci_low": s.ci95[0], "ci_high": s.ci95[1],
               "min": s.min, "max": s.max}
    else:
        for seq, value in enumerate(m.samples):
            yield {**head, "seq": seq, "value": value}


def rows(store: Store, what: str, where: Selection, metric: tuple[str, str] | None = None,
         params: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
    """The selected runs as rows of `what`, oldest run first; with `metric` (benchmark, name),
    only that metric of each run, fetched in one query, and of those only the ones whose
    params have these values."""
    if metric is not None and what != "runs":
        for head, m in store.metric_across(*metric, where, params):
            yield from _metric_rows(head, m, what)
        return
    if what == "runs":
        for info in reversed(store.runs(where=where)):
            yield {"run_id": info.run_id, "created": info.created, "host": info.host,
                   "tag": info.tag, "profile": info.profile, "benchmarks": info.benchmarks,
                   "metrics": info.metrics, "duration_s": info.duration_s}
        return
    for run in store.load_all(where):  # oldest first, in three queries
        for m in run.metrics:
            yield from _metric_rows({"run_id": run.run_id, "created": run.created,
                                     "host": run.host, "tag": run.tag}, m, what)


def render(records: Iterator[dict[str, Any]], what: str, fmt: str) -> str:
    """JSON lines (nested values as JSON), or CSV with a header (nested values as JSON text)."""
    if fmt == "jsonl":
        return "".join(jsondoc.dumps(r) + "\n" for r in records)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS[what], extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: jsondoc.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                    for k, v in r.items()})
    return buf.getvalue()


def import_runs(store: Store, runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """(stored, already there) run ids of runs as `read_json` made them (checked as read):
    `Store.save_all` (one transaction where the store has them), a run given twice stored
    once."""
    skipped = store.save_all(runs, checked=True)
    left = Counter(skipped)  # the runs not stored, one count each
    stored = []
    for run in runs:
        if left[run.run_id]:
            left[run.run_id] -= 1
        else:
            stored.append(run.run_id)
    return stored, skipped
