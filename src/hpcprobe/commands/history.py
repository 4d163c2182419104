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
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from hpcprobe import registry
from hpcprobe.analysis import history
from hpcprobe.analysis.compare import joined_params
from hpcprobe.analysis.reference import describe, hardware
from hpcprobe.analysis.verdict import DISTURBED, Headline
from hpcprobe.commands.base import (
    Spec,
    add_db,
    add_json,
    add_selection,
    console,
    print_json,
    selection,
)
from hpcprobe.commands.export import check_metric, metric_name, param
from hpcprobe.common import files
from hpcprobe.common.errors import UserError
from hpcprobe.machine import fingerprint
from hpcprobe.results.model import Metric, Run
from hpcprobe.results.store import Columns, Selection, Store
from hpcprobe.views import history as views

#: More series of one figure a host than this (its params not narrowed): refused, with the
#: params that differ
MAX_SERIES = 4
#: A run's verdict names the change points of its host's history among its last this many runs
RECENT = 10


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metric", metavar="BENCHMARK.NAME", type=metric_name,
                   help="the figure, e.g. memory.bandwidth (default: the headline figures of "
                        "the newest run selected)")
    p.add_argument("--param", type=param, action="append", metavar="KEY=VALUE",
                   help="with --metric: only figures whose param KEY has this VALUE, e.g. "
                        "kernel=triad (repeat it to narrow further)")
    add_selection(p)
    p.add_argument("--tag-prefix", metavar="PREFIX",
                   help="only runs whose tag starts with PREFIX (a campaign's passes)")
    p.add_argument("--group", metavar="TEXT",
                   help="only hosts whose hardware group (CPU, sockets x cores, GPU models, as "
                        "the table titles show it) contains TEXT, e.g. 'EPYC 9654'")
    p.add_argument("--details", action="store_true",
                   help="every host's row (by default, past 20 hosts, only those that changed "
                        "alone)")
    add_json(p, "the series and their change points")
    p.add_argument("--csv", metavar="FILE", help="write every point as CSV (`-`: standard "
                                                 "output)")
    p.add_argument("-o", "--output", metavar="FILE.html",
                   help="also write the HTML page: each figure's table and its plot (every "
                        "host's series, the hosts' median and middle half, the change points)")
    add_db(p)


def _selection(a: argparse.Namespace) -> Selection:
    s = selection(a)
    return Selection(s.tag, s.host, s.since, s.until, a.tag_prefix)


def _wanted(store: Store, a: argparse.Namespace, where: Selection
            ) -> list[tuple[str, Metric | tuple[str, str, dict[str, str]]]]:
    """(label, what to read) for --metric, else for each headline figure of the newest run
    selected."""
    if a.metric:
        benchmark, name = a.metric
        return [(".".join(a.metric), (benchmark, name, dict(a.param or [])))]
    newest = store.runs(limit=1, where=where)
    if not newest:
        raise UserError("no stored run matches the selection")
    run = store.load(newest[0].run_id)
    out: list[tuple[str, Metric | tuple[str, str, dict[str, str]]]] = [
        (h.label, h.metric) for picker in registry.pickers() for h in picker(run)]
    if not out:
        raise UserError(f"the newest run selected ({run.run_id}) has no headline figure: name "
                        "one with --metric")
    return out


def _read(store: Store, label: str, what: Metric | tuple[str, str, dict[str, str]],
          where: Selection, reasons: dict[tuple[str, str], str]) -> list[views.Series]:
    """One figure's series, searched."""
    if isinstance(what, Metric):
        bench, cols = what.benchmark, _across(store, what, where)
    else:
        bench, name, params = what
        cols = store.series_across(bench, name, where, params)
        if not cols:
            return []
    series = _series(label, bench, cols, reasons)
    _search(store, series)
    return series


def _search(store: Store, series: list[views.Series]) -> None:
    """The change points of every series: as kept in the store where its values are those it
    was searched with, else searched (on the node's CPUs where many) and kept."""
    import hashlib

    keys = [hashlib.sha256(json.dumps([s.label, s.host, s.params], sort_keys=True,
                                      default=str).encode()).hexdigest() for s in series]
    digests = [history.digest(*s.searched()) for s in series]
    kept = store.kept("steps", keys)
    todo = [i for i, (k, d) in enumerate(zip(keys, digests, strict=True))
            if kept.get(k, ("",))[0] != d]
    found = dict(zip(todo, history.steps_of([series[i].searched() for i in todo]),
                     strict=True))
    store.keep("steps", {keys[i]: (digests[i], history.steps_text(found[i])) for i in todo})
    for i, s in enumerate(series):
        s.found(found[i] if i in found else history.steps_from(kept[keys[i]][1]))


def _all_series(a: argparse.Namespace, where: Selection) -> list[views.Series]:
    """Every wanted figure's series, searched, one figure after another: each reads the
    series its store keeps and their kept searches (a fleet's figure is a few tenths of a
    second then; handing a thousand series back from a worker process took longer), and
    searches what changed on this node's CPUs."""
    with Store.open(a.db, create=False) as store:
        reasons = _reasons(store, where)
        got = [_read(store, label, what, where, reasons)
               for label, what in _wanted(store, a, where)]
    if a.metric and not got[0]:
        raise UserError(f"no figure of {'.'.join(a.metric)}"
                        + (f" with {' '.join(f'{k}={v}' for k, v in a.param)}"
                           if a.param else "") + " in the runs selected")
    return [s for series in got for s in series]


def _across(store: Store, m: Metric, where: Selection) -> list[Columns]:
    """The figure `m` is in every selected run: its metric with the same params, but those
    that say where or how it was taken (the CPUs), in one query."""
    skip = registry.not_joined().of(m.benchmark)
    exact = {k: json.dumps(v) if isinstance(v, bool) or v is None else str(v)
             for k, v in m.params.items() if k not in skip and not isinstance(v, (dict, list))}
    return [c for c in store.series_across(m.benchmark, m.name, where, exact)
            if all(c.params.get(k) == v for k, v in m.params.items() if k not in skip)]


def recent(store: Store, run: Run, headlines: list[Headline], last: int = RECENT) -> list[str]:
    """The change points of the run's headline figures in its host's history (its stored runs
    before it, then this run) whose first run after is among the last `last`, one line each
    with what changed in the configuration across it."""
    before = Selection(host=run.host, until=run.created)
    if len(store.runs(limit=history.MIN_RUNS, where=before)) < history.MIN_RUNS - 1:
        return []  # too short a history to search: one cheap query
    reasons = _reasons(store, before)
    found: dict[str, list[tuple[str, history.Change]]] = {}  # by the first run after
    for h in headlines:
        m = h.metric
        try:
            past = _series(h.label, m.benchmark, _across(store, m, before), reasons)
        except UserError:  # figures the verdict's params do not tell apart: no history
            continue
        points = (past[0].points if past else []) + [history.Point(
            run.run_id, run.created, run.host, run.tag, m.summary.median,
            m.summary.rel_ci_halfwidth)]
        for c in history.change_points(points):
            if points.index(c.after) >= len(points) - last:
                found.setdefault(c.after.run_id, []).append((h.label, c))
    out = []
    runs = {**store.headers([r for after, cs in found.items()
                             for r in (cs[0][1].before.run_id, after)]),
            run.run_id: run}  # this run is not stored yet
    for after, changes in found.items():
        c = changes[0][1]
        what = views.differences_text(fingerprint.differences([runs[c.before.run_id],
                                                                runs[after]]))
        out.append(f"since {c.after.created[:10]} ({what}): " + ", ".join(
            f"{label} {100 * ch.change:+.1f}%" for label, ch in changes)
            + f"; `hpcprobe history --host {run.host}`")
    return out


#: How far back `cluster report` looks in its nodes' own histories (days before the campaign)
DRIFT_DAYS = 120


def campaign(store: Store, runs: list[Run], inside: set[str], last: int = RECENT
             ) -> tuple[dict[str, str], list[str]]:
    """What a campaign's nodes' own history says (their stored runs of the last DRIFT_DAYS,
    one query a headline figure for all of them): host -> what changed, for each node in
    `inside` (not flagged against its peers) with a change point among its last `last` runs
    (it drifted from its own past while inside the fleet's spread); and one line per change
    point of a hardware group's campaign medians among its last `last` campaigns."""
    if not runs:
        return {}, []
    newest = max(datetime.fromisoformat(r.created) for r in runs)
    where = Selection(since=(newest - timedelta(days=DRIFT_DAYS)).isoformat())
    hosts = {r.host for r in runs}
    reasons = _reasons(store, where)
    series: list[views.Series] = []
    for h in (h for picker in registry.pickers() for h in picker(runs[0])):
        try:
            series += _series(h.label, h.metric.benchmark,
                              [c for c in _across(store, h.metric, where) if c.host in hosts],
                              reasons)
        except UserError:  # figures the verdict's params do not tell apart: no history
            continue
    _search(store, series)
    hardware = _hardware(store, series)
    groups = _group_changes(store, series, hardware)
    found: dict[str, list[tuple[str, history.Change]]] = {}
    for s in series:  # a node's own change, not its group's (the same way, at that time)
        found.setdefault(s.host, []).extend(
            (s.label, c) for c in s.changes
            if s.host in inside and s.runs.index(c.after.run_id) >= len(s.runs) - last
            and not any(g.group == hardware[s.host] and history.together(g.change, c)
                        for g in groups.get(s.label, [])))
    found = {h: cs for h, cs in found.items() if cs}
    configs = store.headers([r for cs in found.values()
                             for r in (cs[0][1].before.run_id, cs[0][1].after.run_id)])
    return ({host: _drift(cs, configs) for host, cs in sorted(found.items())},
            [views.group_line(label, g) for label, gs in groups.items() for g in gs
             if g.change.runs_after <= last])


def _drift(changes: list[tuple[str, history.Change]], configs: dict[str, Run]) -> str:
    """A node's recent change points in a few words: since when, the first three figures and
    what changed in its configuration across the first."""
    first = changes[0][1]
    moved = ", ".join(f"{label} {100 * c.change:+.1f}%" for label, c in changes[:3])
    more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    what = views.differences_text(fingerprint.differences(
        [configs[first.before.run_id], configs[first.after.run_id]]))
    return f"since {first.after.created[:10]}: {moved}{more} ({what})"


def _reasons(store: Store, where: Selection) -> dict[tuple[str, str], str]:
    """(run id, benchmark) -> why that run's figures of it are left out ('*': all)."""
    out: dict[tuple[str, str], str] = {}
    for run_id, (findings, interrupted) in store.disturbances(where).items():
        if interrupted:
            out[(run_id, "*")] = "interrupted"
        for f in findings:
            if isinstance(f, dict) and f.get("kind") in DISTURBED:
                out.setdefault((run_id, str(f.get("benchmark"))), str(f["kind"]))
    return out


def _series(label: str, bench: str, cols: list[Columns],
            reasons: dict[tuple[str, str], str]) -> list[views.Series]:
    """One series per host and distinct params (those that differ only in where or how they
    were taken, the CPUs, joined in time order)."""
    import numpy as np

    groups: dict[tuple[str, str], list[Columns]] = {}
    skip = registry.not_joined().of(bench)
    for c in cols:
        groups.setdefault((c.host, joined_params(c.params, skip)), []).append(c)
    _one_per_host(label, groups)
    out = []
    for (host, params), cs in sorted(groups.items()):
        c = cs[0] if len(cs) == 1 else _merged(cs)
        med = np.array(c.medians, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(med != 0, (np.array(c.ci_high) - np.array(c.ci_low)) / 2
                           / np.abs(med), np.inf)
        why = [reasons.get((r, "*")) or reasons.get((r, bench)) for r in c.runs] if reasons \
            else [None] * len(c.runs)
        out.append(views.Series(label, c.unit, c.better, host, json.loads(params), c.runs,
                                c.created, c.tags, med, rel, why))
    return out


def _merged(cols: list[Columns]) -> Columns:
    """One host's columns of several params texts as one, in time order."""
    order = sorted((when, i, j) for i, c in enumerate(cols) for j, when in enumerate(c.created))
    runs, created, tags, medians, lows, highs = (
        tuple(getattr(cols[i], f)[j] for _, i, j in order)
        for f in ("runs", "created", "tags", "medians", "ci_low", "ci_high"))
    return cols[0]._replace(runs=runs, created=created, tags=tags, medians=medians,
                            ci_low=lows, ci_high=highs)


def _one_per_host(label: str, groups: dict[tuple[str, str], list[Columns]]) -> None:
    """Refuse more than MAX_SERIES series a host (params not narrowed), naming the params
    that differ."""
    per_host: dict[str, int] = {}
    for h, _ in groups:
        per_host[h] = per_host.get(h, 0) + 1
    if max(per_host.values(), default=0) > MAX_SERIES:
        varying = sorted({k for _, p in groups for k, v in json.loads(p).items()
                          if len({json.dumps(json.loads(q).get(k)) for _, q in groups}) > 1})
        raise UserError(f"{label}: {len(groups)} different figures in the runs selected; narrow "
                        f"with --param (they differ in: {', '.join(varying)})")


def _attribute(store: Store, series: list[views.Series]) -> None:
    """Each change point's configuration differences between its runs either side (those runs
    read in one query)."""
    runs = store.headers([r for s in series for c in s.changes
                          for r in (c.before.run_id, c.after.run_id)])
    known: Differences = {}
    for s in series:
        for i, c in enumerate(s.changes):
            s.changes[i] = replace(c, differences=_differences(
                runs, (c.before.run_id, c.after.run_id), known))


#: The configuration differences of a pair of runs, found once for every figure that shares it
Differences = dict[tuple[str, str], list[tuple[str, list[str]]]]


def _differences(runs: dict[str, Run], pair: tuple[str, str], known: Differences
                 ) -> list[tuple[str, list[str]]]:
    if pair not in known:
        known[pair] = fingerprint.differences([runs[r] for r in pair])
    return known[pair]


def _hardware(store: Store, series: list[views.Series]) -> dict[str, str]:
    """Host -> its hardware group (CPU, sockets x cores, the families' devices), as its newest
    run shown says."""
    newest = {s.host: s.runs[-1] for s in series}
    runs = store.headers(list(newest.values()))
    return {h: describe(hardware(runs[r], registry.hardware_labels)) for h, r in newest.items()}


def _in_group(series: list[views.Series], groups: dict[str, str], text: str
              ) -> list[views.Series]:
    """The series of the hosts whose hardware group contains `text` (any case)."""
    kept = [s for s in series if text.lower() in groups[s.host].lower()]
    if not kept:
        raise UserError(f"--group {text}: no host selected is of such hardware; their groups: "
                        + "; ".join(sorted(set(groups.values()))))
    return kept


def _group_changes(store: Store, series: list[views.Series], groups: dict[str, str]
                   ) -> dict[str, list[history.GroupChange]]:
    """Per figure, the change points of each hardware group's campaign medians (groups of two
    hosts or more), each attributed over the group's hosts: their runs either side of it."""
    found: list[tuple[str, str, dict[str, views.Series], history.Change]] = []
    for label, ss in views.by_label(series).items():
        members: dict[str, dict[str, views.Series]] = {}
        for s in ss:
            members.setdefault(groups[s.host], {})[s.host] = s
        for group, hosts in sorted(members.items()):
            if len(hosts) > 1:
                found += [(label, group, hosts, c)
                          for c in history.change_points(_medians(hosts.values(), group))]
    pairs = {(label, group, c.after.created): {h: s.either_side(c.after.created)
                                               for h, s in hosts.items()}
             for label, group, hosts, c in found}
    runs = store.headers([p.run_id for ps in pairs.values() for pair in ps.values() if pair
                          for p in pair])
    out: dict[str, list[history.GroupChange]] = {}
    known: Differences = {}
    for label, group, hosts, c in found:
        diffs = [_differences(runs, (pair[0].run_id, pair[1].run_id), known)
                 for pair in pairs[(label, group, c.after.created)].values() if pair]
        out.setdefault(label, []).append(history.GroupChange(
            group, c, len(hosts), history.moved_with(c, {h: s.changes for h, s in
                                                        hosts.items()}),
            history.count_causes(diffs)))
    return out


def _medians(series: Iterable[views.Series], group: str) -> list[history.Point]:
    """A group's campaign medians from its hosts' series (their runs kept)."""
    runs: list[history.HostRuns] = []
    for s in series:
        kept = s.kept
        runs.append((s.host, [s.created[i] for i in kept], [s.tags[i] for i in kept],
                     s.medians[kept]))
    return history.campaign_medians_of(runs, group)


def _fleets(series: list[views.Series], groups: dict[str, str]
            ) -> dict[str, list[history.FleetChange]]:
    """Per figure, each hardware group's nodes' change points grouped into changes together
    (the same way, at about the same time; a change of one node is its own)."""
    out: dict[str, list[history.FleetChange]] = {}
    for label, ss in views.by_label(series).items():
        members: dict[str, dict[str, list[history.Change]]] = {}
        for s in ss:
            members.setdefault(groups[s.host], {})[s.host] = s.changes
        out[label] = [f for group, hosts in sorted(members.items())
                      for f in history.fleet(hosts, len(hosts), group=group)]
    return out


def handle(a: argparse.Namespace) -> int:
    if a.param and not a.metric:
        raise UserError("--param selects figures of one metric: add --metric")
    if a.metric:
        check_metric(*a.metric)
    files.check_outputs((a.json, "--json"), (a.csv, "--csv"), (a.output, "-o"))
    outs = [x for x in (a.json, a.csv, a.output) if files.is_stdout(x)]  # one at most
    where = _selection(a)
    series = _all_series(a, where)
    with Store.open(a.db, create=False) as store:
        groups = _hardware(store, series)
        if a.group:
            series = _in_group(series, groups, a.group)
            groups = {s.host: groups[s.host] for s in series}
        _attribute(store, series)
        found = views.History(series, _fleets(series, groups), groups,
                              _group_changes(store, series, groups))
    if not outs:
        views.show(found, console(), a.details)
    if a.json:
        print_json(views.document(found), a.json)
    if a.csv:
        _write_csv(series, a.csv)
    if a.output:
        _write(views.page(found, "hpcprobe history"), a.output, "-o")
    return 0


def _write_csv(series: list[views.Series], path: str) -> None:
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
