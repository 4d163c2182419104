"""`hpcprobe export`: stored runs, their metrics or every sample, as JSON lines or CSV; or the
newest node run of each host and profile as OpenMetrics (headline figures, ceilings,
references, verdicts) for a monitoring system."""

from __future__ import annotations

import argparse
import sys

from hpcprobe.commands.base import (
    Spec,
    add_against,
    add_db,
    add_figure,
    add_output,
    add_selection,
    check_metric,
    selection,
)
from hpcprobe.common import files
from hpcprobe.common.errors import UserError
from hpcprobe.results import export
from hpcprobe.results.model import Run
from hpcprobe.results.store import Store


def setup(ex: argparse.ArgumentParser) -> None:
    ex.add_argument("--what", choices=export.WHAT, default="metrics",
                    help="one row per run, per metric (default) or per sample")
    ex.add_argument("--format", choices=[*export.FORMATS, "openmetrics"], default="jsonl",
                    help="jsonl, csv, or openmetrics: the newest node run of each host and "
                         "profile selected, its headline figures judged against the host's "
                         "previous runs (or --against FILE)")
    add_against(ex, "the headline figures (--format openmetrics)", "default: each host's "
                "previous runs in the store")
    add_selection(ex)
    add_figure(ex, "only this metric of each run, e.g. memory.bandwidth (the fleet view)",
               "for more")
    add_output(ex, "FILE", "write here (default: stdout)")
    add_db(ex)


def _openmetrics(st: Store, a: argparse.Namespace) -> str:
    """The newest node run of each host and profile selected, judged, in OpenMetrics."""
    from hpcprobe import registry
    from hpcprobe.views import prometheus

    against = registry.against(a.against)
    newest: dict[tuple[str, str], Run] = {}
    for info in st.runs(where=selection(a)):  # newest first
        if info.interrupted or (info.host, info.profile) in newest:
            continue
        if (run := st.load(info.run_id)).kind == "node":
            newest[(info.host, info.profile)] = run
    if not newest:
        raise UserError("no node run selected: nothing to export")
    judged = against.verdicts(list(newest.values()), st)  # their previous runs read at once
    reg = prometheus.registry([(r, judged[r.run_id]) for r in newest.values()])
    return prometheus.openmetrics(reg).decode()


def handle(a: argparse.Namespace) -> int:
    if a.output:
        files.check_writable(a.output, "-o")
    if a.format == "openmetrics":
        if a.metric or a.param or a.what != "metrics":
            raise UserError("--format openmetrics exports the headline figures of each host's "
                            "newest run: drop --metric, --param and --what")
        with Store.open(a.db, create=False) as st:
            text = _openmetrics(st, a)
    elif a.against:
        raise UserError("--against judges the runs of --format openmetrics only")
    if a.metric:
        check_metric(*a.metric)
    if a.format != "openmetrics":
        with Store.open(a.db, create=False) as st:
            if a.param and not a.metric:
                raise UserError("--param selects figures of one metric: add --metric")
            records = list(export.rows(st, a.what, selection(a), a.metric,
                                       dict(a.param or [])))
            if a.param and not records and a.what != "runs":
                _check_params(st, a)
            text = export.render(iter(records), a.what, a.format)
    if a.output:
        files.atomic_write(a.output, text.encode(), "-o")
    else:
        sys.stdout.write(text)
    return 0




def _check_params(st: Store, a: argparse.Namespace) -> None:
    """--param that matched no figure of a metric the selected runs have: the params they have
    (a typo in a key or a value), refused; where none has the metric, an empty export."""
    benchmark, name = a.metric
    figs = st.metric_across(benchmark, name, selection(a))
    if figs:
        have: dict[str, set[str]] = {}
        for _, m in figs:
            for k, v in m.params.items():
                have.setdefault(k, set()).add(str(v))
        said = "; ".join(f"{k}: {', '.join(sorted(v)[:6])}" + (" ..." if len(v) > 6 else "")
                         for k, v in sorted(have.items()))
        raise UserError(f"--param {' '.join(f'{k}={v}' for k, v in a.param)}: no figure of "
                        f"{'.'.join(a.metric)} in the runs selected has it; their params: {said}")


COMMAND = Spec("export", "write stored runs as JSON lines or CSV", setup, handle,
               description="Runs, their metrics (with median and 95% CI) or every sample, "
                           "selected by tag, host and date.")
