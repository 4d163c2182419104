"""Reading a history from the store: each figure's series per host (one SQL query a figure,
`Store.series_across`: the stored summaries, not the samples), their change points searched
once and kept, the configuration differences across each, each hardware group's campaign
medians and theirs; a run's recent change points (its verdict) and a campaign's nodes' own
(`cluster report`). What the families declare comes handed over (`Declared`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hpcprobe.analysis import fingerprint
from hpcprobe.analysis.compare import joined_params
from hpcprobe.analysis.reference import Declared, describe, hardware
from hpcprobe.analysis.verdict import DISTURBED, Headline
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.history import changes
from hpcprobe.history.series import Series, by_label, differences_text
from hpcprobe.results.model import Metric, Run
from hpcprobe.results.store import Columns, Selection, Store

#: More series of one figure a host than this (its params not narrowed): refused, with the
#: params that differ
MAX_SERIES = 4
#: A run's verdict names the change points of its host's history among its last this many runs
RECENT = 10


def wanted(store: Store, metric: tuple[str, str] | None, params: dict[str, str],
           where: Selection, known: Declared
           ) -> list[tuple[str, Metric | tuple[str, str, dict[str, str]]]]:
    """(label, what to read) for the metric named (with these params), else for each headline
    figure of the newest run selected."""
    if metric:
        benchmark, name = metric
        return [(".".join(metric), (benchmark, name, params))]
    newest = store.runs(limit=1, where=where)
    if not newest:
        raise UserError("no stored run matches the selection")
    run = store.load(newest[0].run_id)
    out: list[tuple[str, Metric | tuple[str, str, dict[str, str]]]] = [
        (h.label, h.metric) for picker in known.pickers for h in picker(run)]
    if not out:
        raise OptionError(f"the newest run selected ({run.run_id}) has no headline figure: name "
                          "one with <metric>")
    return out


def read(store: Store, label: str, what: Metric | tuple[str, str, dict[str, str]],
         where: Selection, reasons: dict[tuple[str, str], str], known: Declared
         ) -> list[Series]:
    """One figure's series, searched."""
    if isinstance(what, Metric):
        bench, cols = what.benchmark, across(store, what, where, known)
    else:
        bench, name, params = what
        cols = store.series_across(bench, name, where, params)
        if not cols:
            return []
    series = series_of(label, bench, cols, reasons, known)
    search(store, series)
    return series


def search(store: Store, series: list[Series]) -> None:
    """The change points of every series (`searched`)."""
    begin(store, series)()


def begin(store: Store, series: list[Series]) -> Callable[[], None]:
    """search(store, series) begun (on the workers `changes.ahead` began, if any): the
    function that gives each series its change points, once found."""
    found = searching(store, [([s.label, s.host, s.params], s.searched()) for s in series])

    def done() -> None:
        for s, steps in zip(series, found(), strict=True):
            s.found(steps)
    return done


#: A series to search: what names it, and the medians and relative CIs its search reads
Searched = tuple[object, tuple[Any, Any]]


def searched(store: Store, series: Sequence[Searched]) -> list[list[changes.Step]]:
    """The steps of each series: none below changes.MIN_RUNS runs (nothing to search: a
    fleet's first campaigns), else as kept in the store where its values are those it was
    searched with, else searched (on this node's CPUs where many) and kept; the search is
    loaded only for those."""
    return searching(store, series)()


def searching(store: Store, series: Sequence[Searched]
              ) -> Callable[[], list[list[changes.Step]]]:
    """searched(store, series) begun (`changes.begun`): the function that gives them (and
    keeps those searched), once found."""
    todo, keys, digests, kept = _unsearched(store, series)
    pending = changes.begun([series[i][1] for i in todo])

    def done() -> list[list[changes.Step]]:
        found = dict(zip(todo, pending(), strict=True))
        store.keep("steps", {keys[i]: (digests[i], changes.steps_text(found[i]))
                             for i in todo})
        return [found[i] if i in found else changes.steps_from(kept[keys[i]][1])
                if i in keys else [] for i in range(len(series))]
    return done


def _unsearched(store: Store, series: Sequence[Searched]
                ) -> tuple[list[int], dict[int, str], dict[int, str], dict[str, tuple[str, str]]]:
    """The series to search (by index: long enough, and no search of their values kept);
    the key and digest of each one long enough, and what the store keeps by those keys."""
    import hashlib

    long = [i for i, (_, values) in enumerate(series) if len(values[0]) >= changes.MIN_RUNS]
    keys = {i: hashlib.sha256(json.dumps(series[i][0], sort_keys=True, default=str).encode()
                              ).hexdigest() for i in long}
    digests = {i: changes.digest(*series[i][1]) for i in long}
    kept = store.kept("steps", list(keys.values())) if long else {}
    return [i for i in long if kept.get(keys[i], ("",))[0] != digests[i]], keys, digests, kept


def all_series(db: str | None, metric: tuple[str, str] | None, params: dict[str, str],
               where: Selection, known: Declared) -> list[Series]:
    """Every wanted figure's series, searched, one figure after another: each reads the
    series its store keeps and their kept searches (a fleet's figure is a few tenths of a
    second then; handing a thousand series back from a worker process took longer), and
    searches what changed on this node's CPUs."""
    with Store.open(db, create=False) as store, store.keeping():
        why = reasons(store, where)
        got = [read(store, label, what, where, why, known)
               for label, what in wanted(store, metric, params, where, known)]
    if metric and not got[0]:
        raise UserError(f"no figure of {'.'.join(metric)}"
                        + (f" with {' '.join(f'{k}={v}' for k, v in params.items())}"
                           if params else "") + " in the runs selected")
    return [s for series in got for s in series]


def across(store: Store, m: Metric, where: Selection, known: Declared) -> list[Columns]:
    """The figure `m` is in every selected run: its metric with the same params, but those
    that say where or how it was taken (the CPUs), in one query."""
    skip = known.not_joined.of(m.benchmark)
    exact = {k: json.dumps(v) if isinstance(v, bool) or v is None else str(v)
             for k, v in m.params.items() if k not in skip and not isinstance(v, (dict, list))}
    return [c for c in store.series_across(m.benchmark, m.name, where, exact)
            if all(c.params.get(k) == v for k, v in m.params.items() if k not in skip)]


def recent(store: Store, run: Run, headlines: list[Headline], known: Declared,
           last: int = RECENT) -> list[str]:
    """The change points of the run's headline figures in its host's history (its stored runs
    before it, then this run) whose first run after is among the last `last`, one line each
    with what changed in the configuration across it."""
    before = Selection(host=run.host, until=run.created)
    if len(store.runs(limit=changes.MIN_RUNS, where=before)) < changes.MIN_RUNS - 1:
        return []  # too short a history to search: one cheap query
    why = reasons(store, before)
    found: dict[str, list[tuple[str, changes.Change]]] = {}  # by the first run after
    for h in headlines:
        m = h.metric
        try:
            past = series_of(h.label, m.benchmark, across(store, m, before, known), why, known)
        except UserError:  # figures the verdict's params do not tell apart: no history
            continue
        points = (past[0].points if past else []) + [changes.Point(
            run.run_id, run.created, run.host, run.tag, m.summary.median,
            m.summary.rel_ci_halfwidth)]
        for c in changes.change_points(points):
            if points.index(c.after) >= len(points) - last:
                found.setdefault(c.after.run_id, []).append((h.label, c))
    out = []
    runs = {**store.headers([r for after, cs in found.items()
                             for r in (cs[0][1].before.run_id, after)]),
            run.run_id: run}  # this run is not stored yet
    for after, moved in found.items():
        c = moved[0][1]
        what = differences_text(fingerprint.differences([runs[c.before.run_id], runs[after]]))
        out.append(f"since {c.after.created[:10]} ({what}): " + ", ".join(
            f"{label} {100 * ch.change:+.1f}%" for label, ch in moved)
            + f"; `hpcprobe history --host {run.host}`")
    return out


#: How far back `cluster report` looks in its nodes' own histories (days before the campaign)
DRIFT_DAYS = 120


def campaign(store: Store, runs: list[Run], shown: Sequence[Headline], inside: set[str],
             known: Declared, last: int = RECENT
             ) -> tuple[dict[str, str], list[tuple[str, changes.GroupChange]]]:
    """What a campaign's nodes' own history says (their stored runs of the last DRIFT_DAYS,
    one query a figure for all of them: `shown`, a node run's headlines; `runs` may be
    headers): host -> what changed, for each node in
    `inside` (not flagged against its peers) with a change point among its last `last` runs
    (it drifted from its own past while inside the fleet's spread); and (figure, change) for
    each change point of a hardware group's campaign medians among its last `last` campaigns
    (views/history.group_line says it in a line)."""
    if not runs:
        return {}, []
    newest = max(datetime.fromisoformat(r.created) for r in runs)
    where = Selection(since=(newest - timedelta(days=DRIFT_DAYS)).isoformat())
    # where its first node's first series is to be searched, so are the rest: the searches'
    # workers load the search while they are read
    # and what it keeps (the series extended, their searches) is written at once, at its end
    with changes.ahead(_to_search(store, runs[0].host, shown[:1], where, known)), \
            store.keeping():
        return _campaign(store, runs, shown, inside, known, last, where)


def _to_search(store: Store, host: str, shown: Sequence[Headline], where: Selection,
               known: Declared) -> bool:
    """Whether one host's series of these figures has a search to make (a few queries)."""
    mine = replace(where, host=host)
    why = reasons(store, mine)
    try:
        series = [s for h in shown for s in series_of(
            h.label, h.metric.benchmark, across(store, h.metric, mine, known), why, known)]
    except UserError:
        return False
    return bool(_unsearched(store, [([s.label, s.host, s.params], s.searched())
                                    for s in series])[0])


def _campaign(store: Store, runs: list[Run], shown: Sequence[Headline], inside: set[str],
              known: Declared, last: int, where: Selection
              ) -> tuple[dict[str, str], list[tuple[str, changes.GroupChange]]]:
    hosts = {r.host for r in runs}
    why = reasons(store, where)
    series: list[Series] = []
    searches = []  # each figure's searched on the workers while the next one's are read
    for h in shown:
        try:
            got = series_of(h.label, h.metric.benchmark,
                            [c for c in across(store, h.metric, where, known)
                             if c.host in hosts], why, known)
        except UserError:  # figures the verdict's params do not tell apart: no history
            continue
        series += got
        searches.append(begin(store, got))
    for done in searches:
        done()
    hardware = hardware_groups(store, series, known, {r.run_id: r for r in runs})
    groups = group_changes(store, series, hardware)
    found: dict[str, list[tuple[str, changes.Change]]] = {}
    for s in series:  # a node's own change, not its group's (the same way, at that time)
        found.setdefault(s.host, []).extend(
            (s.label, c) for c in s.changes
            if s.host in inside and s.runs.index(c.after.run_id) >= len(s.runs) - last
            and not any(g.group == hardware[s.host] and changes.together(g.change, c)
                        for g in groups.get(s.label, [])))
    found = {h: cs for h, cs in found.items() if cs}
    configs = store.headers([r for cs in found.values()
                             for r in (cs[0][1].before.run_id, cs[0][1].after.run_id)])
    return ({host: drift(cs, configs) for host, cs in sorted(found.items())},
            [(label, g) for label, gs in groups.items() for g in gs
             if g.change.runs_after <= last])


def drift(found: list[tuple[str, changes.Change]], configs: dict[str, Run]) -> str:
    """A node's recent change points in a few words: since when, the first three figures and
    what changed in its configuration across the first."""
    first = found[0][1]
    moved = ", ".join(f"{label} {100 * c.change:+.1f}%" for label, c in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    what = differences_text(fingerprint.differences(
        [configs[first.before.run_id], configs[first.after.run_id]]))
    return f"since {first.after.created[:10]}: {moved}{more} ({what})"


def reasons(store: Store, where: Selection) -> dict[tuple[str, str], str]:
    """(run id, benchmark) -> why that run's figures of it are left out ('*': all)."""
    out: dict[tuple[str, str], str] = {}
    for run_id, (findings, interrupted) in store.disturbances(where, list(DISTURBED)).items():
        if interrupted:
            out[(run_id, "*")] = "interrupted"
        for f in findings:
            if isinstance(f, dict) and f.get("kind") in DISTURBED:
                out.setdefault((run_id, str(f.get("benchmark"))), str(f["kind"]))
    return out


def series_of(label: str, bench: str, cols: list[Columns], reasons: dict[tuple[str, str], str],
              known: Declared) -> list[Series]:
    """One series per host and distinct params (those that differ only in where or how they
    were taken, the CPUs, joined in time order)."""
    import numpy as np

    groups: dict[tuple[str, str], list[Columns]] = {}
    skip = known.not_joined.of(bench)
    for c in cols:
        groups.setdefault((c.host, joined_params(c.params, skip)), []).append(c)
    one_per_host(label, groups)
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):  # once: a fleet's figure has 1,000
        for (host, params), cs in sorted(groups.items()):
            c = cs[0] if len(cs) == 1 else merged(cs)
            med = np.array(c.medians, dtype=float)
            rel = np.where(med != 0, (np.array(c.ci_high) - np.array(c.ci_low)) / 2
                           / np.abs(med), np.inf)
            why = [reasons.get((r, "*")) or reasons.get((r, bench)) for r in c.runs] \
                if reasons else [None] * len(c.runs)
            out.append(Series(label, c.unit, c.better, host, json.loads(params), c.runs,
                              c.created, c.tags, med, rel, why))
    return out


def merged(cols: list[Columns]) -> Columns:
    """One host's columns of several params texts as one, in time order."""
    order = sorted((when, i, j) for i, c in enumerate(cols) for j, when in enumerate(c.created))
    runs, created, tags, medians, lows, highs = (
        tuple(getattr(cols[i], f)[j] for _, i, j in order)
        for f in ("runs", "created", "tags", "medians", "ci_low", "ci_high"))
    return cols[0]._replace(runs=runs, created=created, tags=tags, medians=medians,
                            ci_low=lows, ci_high=highs)


def one_per_host(label: str, groups: dict[tuple[str, str], list[Columns]]) -> None:
    """Refuse more than MAX_SERIES series a host (params not narrowed), naming the params
    that differ."""
    per_host: dict[str, int] = {}
    for h, _ in groups:
        per_host[h] = per_host.get(h, 0) + 1
    if max(per_host.values(), default=0) > MAX_SERIES:
        varying = sorted({k for _, p in groups for k, v in json.loads(p).items()
                          if len({json.dumps(json.loads(q).get(k)) for _, q in groups}) > 1})
        raise OptionError(f"{label}: {len(groups)} different figures in the runs selected; "
                          f"narrow with <param> (they differ in: {', '.join(varying)})")


def attribute(store: Store, series: list[Series]) -> None:
    """Each change point's configuration differences between its runs either side (those runs
    read in one query)."""
    runs = store.headers([r for s in series for c in s.changes
                          for r in (c.before.run_id, c.after.run_id)])
    known: Differences = {}
    for s in series:
        for i, c in enumerate(s.changes):
            s.changes[i] = replace(c, differences=differences(
                runs, (c.before.run_id, c.after.run_id), known))


#: The configuration differences of a pair of runs, found once for every figure that shares it
Differences = dict[tuple[str, str], list[tuple[str, list[str]]]]


def differences(runs: dict[str, Run], pair: tuple[str, str], known: Differences
                 ) -> list[tuple[str, list[str]]]:
    if pair not in known:
        known[pair] = fingerprint.differences([runs[r] for r in pair])
    return known[pair]


def hardware_groups(store: Store, series: list[Series], known: Declared,
                    have: dict[str, Run] | None = None) -> dict[str, str]:
    """Host -> its hardware group (CPU, sockets x cores, the families' devices), as its newest
    run shown says: from `have` (run id -> run, the caller's) where it holds that run, else
    read from the store (a 1,000-node campaign's report read them again: 0.35-0.45 s)."""
    newest = {s.host: s.runs[-1] for s in series}
    have = have or {}
    runs = {**have, **store.headers([r for r in newest.values() if r not in have])}
    return {h: describe(hardware(runs[r], known.labels)) for h, r in newest.items()}


def group_changes(store: Store, series: list[Series], groups: dict[str, str]
                   ) -> dict[str, list[changes.GroupChange]]:
    """Per figure, the change points of each hardware group's campaign medians (groups of two
    hosts or more; searched once and kept, as a host's series), each attributed over the
    group's hosts: their runs either side of it."""
    import numpy as np

    wanted: list[tuple[str, str, dict[str, Series], list[changes.Point]]] = []
    for label, ss in by_label(series).items():
        members: dict[str, dict[str, Series]] = {}
        for s in ss:
            members.setdefault(groups[s.host], {})[s.host] = s
        wanted += [(label, group, hosts, [p for p in medians(hosts.values(), group)
                                          if p.disturbed is None and p.median > 0])
                   for group, hosts in sorted(members.items()) if len(hosts) > 1]
    steps = searched(store, [(["group", label, group],
                              (np.array([p.median for p in points], dtype=float),
                               np.array([p.rel_ci for p in points], dtype=float)))
                             for label, group, _, points in wanted])
    found = [(label, group, hosts, s.change(points[s.cut - 1], points[s.cut]))
             for (label, group, hosts, points), ss in zip(wanted, steps, strict=True)
             for s in ss]
    pairs = {(label, group, c.after.created): {h: s.either_side(c.after.created)
                                               for h, s in hosts.items()}
             for label, group, hosts, c in found}
    runs = store.headers([p.run_id for ps in pairs.values() for pair in ps.values() if pair
                          for p in pair])
    out: dict[str, list[changes.GroupChange]] = {}
    known: Differences = {}
    for label, group, hosts, c in found:
        diffs = [differences(runs, (pair[0].run_id, pair[1].run_id), known)
                 for pair in pairs[(label, group, c.after.created)].values() if pair]
        out.setdefault(label, []).append(changes.GroupChange(
            group, c, len(hosts), changes.moved_with(c, {h: s.changes for h, s in
                                                        hosts.items()}),
            changes.count_causes(diffs)))
    return out


def medians(series: Iterable[Series], group: str) -> list[changes.Point]:
    """A group's campaign medians from its hosts' series (their runs kept)."""
    runs: list[changes.HostRuns] = []
    for s in series:
        kept = s.kept
        runs.append((s.host, [s.created[i] for i in kept], [s.tags[i] for i in kept],
                     s.medians[kept]))
    return changes.campaign_medians_of(runs, group)


def fleets(series: list[Series], groups: dict[str, str]
            ) -> dict[str, list[changes.FleetChange]]:
    """Per figure, each hardware group's nodes' change points grouped into changes together
    (the same way, at about the same time; a change of one node is its own)."""
    out: dict[str, list[changes.FleetChange]] = {}
    for label, ss in by_label(series).items():
        members: dict[str, dict[str, list[changes.Change]]] = {}
        for s in ss:
            members.setdefault(groups[s.host], {})[s.host] = s.changes
        out[label] = [f for group, hosts in sorted(members.items())
                      for f in changes.fleet(hosts, len(hosts), group=group)]
    return out
