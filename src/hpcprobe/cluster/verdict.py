"""The verdict on a campaign: every node's figures against the fleet of its peers (the same
hardware), every link against all links, and what is slow: a node (its own kernels), a network
endpoint (every link through a node, its kernels fine) or a link (only pairs through it).

A figure is flagged when it is worse than the peers' median by more than `z` robust z-scores
(median and 1.4826 MAD of the peers) AND by more than `worse` (a practical threshold: a tight
fleet does not make a 1 % wobble a verdict). A node or link measured again (the campaign
re-measures what it flags) is judged on its latest figures; flagged before but not now is a
transient, listed and not counted. Pure: reads run documents only."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hpcprobe.common.names import natural
from hpcprobe.results.model import Run

#: provenance key of the runs a campaign's driver stores (its node list, failures, links)
CAMPAIGN = "cluster"

SLOW_NODE, SLOW_ENDPOINT, SLOW_LINK = "slow node", "slow network endpoint", "slow link"


@dataclass(frozen=True)
class Thresholds:
    z: float = 3.5  # robust z-scores beyond the peers' median
    worse: float = 0.04  # and at least this much worse (relative)
    min_peers: int = 3  # fewer nodes with a figure: not judged


@dataclass(frozen=True)
class Deviation:
    """One flagged figure of a node or link."""

    metric: str
    value: float
    median: float
    unit: str
    z: float  # robust z-score in the worse direction
    worse: float  # relative, 0.12 = 12 % worse than the median

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "median": self.median,
                "unit": self.unit, "z": _finite(self.z), "worse": self.worse}

    def text(self) -> str:
        return f"{self.metric} {-self.worse:+.1%} (z {_finite(self.z) or 'inf'})"


def _finite(x: float) -> float | None:
    return round(x, 2) if np.isfinite(x) else None


@dataclass
class Finding:
    kind: str  # SLOW_NODE, SLOW_ENDPOINT or SLOW_LINK
    item: str  # the node, or the link "a - b"
    nodes: tuple[str, ...]
    evidence: list[Deviation]
    confirmed: bool  # also flagged when measured before (re-measured)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "item": self.item, "nodes": list(self.nodes),
                "confirmed": self.confirmed, "evidence": [d.to_dict() for d in self.evidence]}


@dataclass
class Verdict:
    campaign: str
    thresholds: Thresholds
    nodes: list[str]  # every node the campaign asked for
    failed: dict[str, str]  # node -> why it has no figures
    groups: dict[str, list[str]]  # hardware fingerprint -> its nodes
    findings: list[Finding]
    transients: list[Finding]  # flagged once, not when measured again
    heat_nodes: list[str]
    heat_metrics: list[str]
    heat: Any  # nodes x metrics, value / peers' median oriented so that < 1 is worse
    links: dict[str, dict[tuple[str, str], float]]  # link metric -> (a, b) -> median
    link_units: dict[str, str]
    link_better: dict[str, str]  # link metric -> "higher" or "lower"
    scaling: dict[str, list[tuple[int, float]]]  # "allreduce 8 B" -> (nodes, median us)
    unjudged: list[str] = field(default_factory=list)  # why some figures were not judged

    @property
    def measured(self) -> list[str]:
        return [n for n in self.nodes if n not in self.failed]

    @property
    def flagged(self) -> bool:
        return bool(self.findings or self.failed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "thresholds": vars(self.thresholds),
            "nodes": self.nodes, "failed": self.failed, "groups": self.groups,
            "findings": [f.to_dict() for f in self.findings],
            "transients": [f.to_dict() for f in self.transients],
            "heat": {"nodes": self.heat_nodes, "metrics": self.heat_metrics,
                     "normalised": [[None if not np.isfinite(v) else round(float(v), 4)
                                     for v in row] for row in self.heat]},
            "links": {m: [{"a": a, "b": b, "median": v} for (a, b), v in sorted(pairs.items())]
                      for m, pairs in self.links.items()},
            "link_units": self.link_units, "link_better": self.link_better,
            "scaling": {k: [{"nodes": n, "median": v} for n, v in pts]
                        for k, pts in self.scaling.items()},
            "unjudged": self.unjudged,
        }


def hardware(run: Run) -> str:
    """The hardware fingerprint peers share: CPU model, sockets x cores, NUMA domains, memory
    (GiB) and the widest kernel ISA; nodes that differ in any are grouped apart."""
    t, p = run.topology, run.provenance
    c = t.get("counts", {})
    mem = sum(n.get("memory_bytes") or 0 for n in t.get("numa_nodes", []))
    isa = (p.get("isa_supported") or ["?"])[-1]
    return (f"{p.get('cpu_model') or t.get('cpu_model') or '?'}, {c.get('packages', '?')} x "
            f"{(c.get('cores') or 0) // max(1, c.get('packages') or 1)} cores, "
            f"{c.get('numa_nodes', '?')} NUMA, {mem / 2**30:.0f} GiB, {isa}")


def metric_label(benchmark: str, name: str, params: dict[str, Any]) -> str:
    inner = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{benchmark}.{name}" + (f" {inner}" if inner else "")


def _medians(run: Run) -> dict[str, tuple[float, str, str]]:
    """label -> (median of the samples, unit, better) of a run's figures."""
    out = {}
    for m in run.metrics:
        if m.samples:
            out[metric_label(m.benchmark, m.name, m.params)] = (
                float(np.median(m.samples)), m.unit, m.better)
    return out


@dataclass
class _Fleet:
    """Per figure: the peers' median and robust spread, and how to read a value."""

    median: Any
    spread: Any  # 1.4826 MAD
    lower_better: Any  # bool per figure

    def judge(self, values: Any) -> tuple[Any, Any]:
        """(z, worse) of values (rows x figures), both in the worse direction."""
        sign = np.where(self.lower_better, 1.0, -1.0)
        diff = (values - self.median) * sign
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(self.spread > 0, diff / self.spread,
                         np.where(diff > 0, np.inf, np.where(diff < 0, -np.inf, 0.0)))
            worse = diff / np.abs(self.median)
        return z, worse


def _fleet(values: Any, lower_better: Any, min_peers: int) -> _Fleet:
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: not judged
            med = np.nanmedian(values, axis=0)
            spread = 1.4826 * np.nanmedian(np.abs(values - med), axis=0)
    few = np.sum(np.isfinite(values), axis=0) < min_peers
    med = np.where(few, np.nan, med)
    return _Fleet(med, spread, lower_better)


def _flags(z: Any, worse: Any, th: Thresholds) -> Any:
    with np.errstate(invalid="ignore"):
        return (z > th.z) & (worse > th.worse)


def _latest_and_before(runs: Iterable[tuple[str, Run]]) -> tuple[dict[str, Run],
                                                                  dict[str, list[Run]]]:
    latest: dict[str, Run] = {}
    before: dict[str, list[Run]] = defaultdict(list)
    for key, run in sorted(runs, key=lambda kr: kr[1].created):
        if key in latest:
            before[key].append(latest[key])
        latest[key] = run
    return latest, before


def _matrix(rows: Sequence[dict[str, tuple[float, str, str]]], labels: list[str]) -> Any:
    index = {lb: j for j, lb in enumerate(labels)}
    m = np.full((len(rows), len(labels)), np.nan)
    for i, row in enumerate(rows):
        for lb, (v, _, _) in row.items():
            if lb in index:  # a figure the others do not have is not compared
                m[i, index[lb]] = v
    return m


def _node_verdict(node_runs: list[Run], th: Thresholds, v: Verdict) -> None:
    latest, before = _latest_and_before((r.host, r) for r in node_runs)
    groups: dict[str, list[str]] = defaultdict(list)
    for host in sorted(latest, key=natural):
        groups[hardware(latest[host])].append(host)
    v.groups = dict(groups)
    heat_rows: dict[str, dict[str, float]] = {}
    all_labels: dict[str, None] = {}
    for fp, hosts in groups.items():
        rows = [_medians(latest[h]) for h in hosts]
        labels = list(dict.fromkeys(lb for row in rows for lb in row))
        info = {lb: (u, b) for row in rows for lb, (_, u, b) in row.items()}
        lower = np.array([info[lb][1] == "lower" for lb in labels], dtype=bool)
        values = _matrix(rows, labels)
        fleet = _fleet(values, lower, th.min_peers)
        if len(hosts) < th.min_peers:
            v.unjudged.append(f"{', '.join(hosts)} ({fp}): fewer than {th.min_peers} nodes of "
                              "this hardware, not judged")
        with np.errstate(invalid="ignore", divide="ignore"):
            norm = np.where(lower, fleet.median / values, values / fleet.median)
        units = [info[lb][0] for lb in labels]
        flagged = _deviations(values, labels, units, fleet, th)
        all_labels.update(dict.fromkeys(labels))
        for i, h in enumerate(hosts):
            heat_rows[h] = {lb: float(norm[i, j]) for j, lb in enumerate(labels)
                            if np.isfinite(norm[i, j])}
            if not before[h]:
                if flagged[i]:
                    v.findings.append(Finding(SLOW_NODE, h, (h,), flagged[i], False))
                continue
            # measured again: only what is flagged both times is a verdict
            earlier = [d for r in before[h] for d in _deviations(
                _matrix([_medians(r)], labels), labels, units, fleet, th)[0]]
            was = {d.metric for d in earlier}
            still = [d for d in flagged[i] if d.metric in was]
            if still:
                v.findings.append(Finding(SLOW_NODE, h, (h,), still, True))
            elif earlier or flagged[i]:
                v.transients.append(Finding(SLOW_NODE, h, (h,), _worst(earlier + flagged[i]),
                                            False))
    v.heat_nodes = sorted(heat_rows, key=natural)
    v.heat_metrics = list(all_labels)
    v.heat = np.array([[heat_rows[h].get(lb, np.nan) for lb in v.heat_metrics]
                       for h in v.heat_nodes]).reshape(len(v.heat_nodes), len(v.heat_metrics))


def _deviations(values: Any, labels: list[str], units: list[str], fleet: _Fleet,
                th: Thresholds) -> list[list[Deviation]]:
    """The flagged figures of each row of values (rows x labels), worst first."""
    z, worse = fleet.judge(values)
    flags = _flags(z, worse, th)
    return [_worst([Deviation(labels[j], float(values[i, j]), float(fleet.median[j]), units[j],
                              float(z[i, j]), float(worse[i, j])) for j in np.flatnonzero(row)])
            for i, row in enumerate(flags)]


def _worst(evidence: list[Deviation]) -> list[Deviation]:
    return sorted(evidence, key=lambda d: -d.worse)


def link_key(params: dict[str, Any]) -> tuple[str, str] | None:
    """(sender, receiver) of a directed figure, (a, b) sorted of an undirected one."""
    if "from" in params and "to" in params:
        return str(params["from"]), str(params["to"])
    if "a" in params and "b" in params:
        return _undirected((str(params["a"]), str(params["b"])))
    return None


def _link_verdict(campaign_runs: list[Run], th: Thresholds, v: Verdict) -> None:
    """Links: first each node's links together (the median of its links' figures, against the
    other nodes': a node all of whose links are slow is a slow endpoint, and one slow link does
    not move the median); then each link against the links not through a slow node or
    endpoint (a slow link)."""
    first: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    before: dict[str, dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in sorted(campaign_runs, key=lambda r: r.created):
        for m in run.metrics:
            key = link_key(m.params)
            if key is None or not m.samples:
                continue
            rest = {k: p for k, p in m.params.items() if k not in ("a", "b", "from", "to")}
            label = metric_label(m.benchmark, m.name, rest)
            value = float(np.median(m.samples))
            latest = v.links.setdefault(label, {})
            if key in latest:
                before[label][key].append(latest[key])
            else:
                first[label][key] = value
            latest[key] = value
            v.link_units[label] = m.unit
            v.link_better[label] = m.better
    slow = {f.item for f in v.findings if f.kind == SLOW_NODE}
    _endpoints(first, before, slow, th, v)
    bad = slow | {f.item for f in v.findings if f.kind == SLOW_ENDPOINT}
    for label, latest in v.links.items():
        _links_of(label, latest, before[label], bad, th, v)


def _through(pairs: dict[tuple[str, str], float], directed: bool
             ) -> dict[str, dict[str, list[float]]]:
    """node -> side ("", or "into"/"out of" for a directed figure) -> its links' values."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (a, b), value in pairs.items():
        out[a]["out of" if directed else ""].append(value)
        out[b]["into" if directed else ""].append(value)
    return out


def _endpoints(first: dict[str, dict[tuple[str, str], float]],
               before: dict[str, dict[tuple[str, str], list[float]]], slow: set[str],
               th: Thresholds, v: Verdict) -> None:
    """Slow endpoints: nodes (not slow themselves) whose links' median figure is worse than
    the other nodes'; re-measured links must show it both times."""
    rows: dict[str, dict[str, tuple[float, str, str]]] = defaultdict(dict)
    rows_first: dict[str, dict[str, tuple[float, str, str]]] = defaultdict(dict)
    for label, latest in v.links.items():
        directed = _is_directed(latest)
        unit, better = v.link_units[label], v.link_better[label]
        for values, target in ((latest, rows), ({**latest, **first[label]}, rows_first)):
            for node, sides in _through(values, directed).items():
                for side, xs in sides.items():
                    name = f"{label} {side} the node" if side else f"{label} of the node"
                    target[node][name] = (float(np.median(xs)), unit, better)
    nodes = sorted(rows, key=natural)
    labels = list(dict.fromkeys(lb for n in nodes for lb in rows[n]))
    info = {lb: (u, b) for n in nodes for lb, (_, u, b) in rows[n].items()}
    units = [info[lb][0] for lb in labels]
    values = _matrix([rows[n] for n in nodes], labels)
    fleet = _fleet(values, np.array([info[lb][1] == "lower" for lb in labels], dtype=bool),
                   th.min_peers)
    now = _deviations(values, labels, units, fleet, th)
    then = _deviations(_matrix([rows_first[n] for n in nodes], labels), labels, units, fleet, th)
    for i, node in enumerate(nodes):
        if node in slow:
            continue
        again = any(node in k for b in before.values() for k in b)
        if not again:
            if now[i]:
                v.findings.append(Finding(SLOW_ENDPOINT, node, (node,), now[i], False))
            continue
        was = {d.metric for d in then[i]}
        still = [d for d in now[i] if d.metric in was]
        if still:
            v.findings.append(Finding(SLOW_ENDPOINT, node, (node,), still, True))
        elif now[i] or then[i]:
            v.transients.append(Finding(SLOW_ENDPOINT, node, (node,), _worst(now[i] + then[i]),
                                        False))


def _is_directed(pairs: dict[tuple[str, str], float]) -> bool:
    return any((b, a) in pairs for a, b in pairs)


def _links_of(label: str, latest: dict[tuple[str, str], float],
              before: dict[tuple[str, str], list[float]], bad: set[str], th: Thresholds,
              v: Verdict) -> None:
    """Slow links of one figure: each link not through a slow node or endpoint against those
    links; a re-measured link must be flagged both times."""
    keys = [k for k in latest if not set(k) & bad]
    if not keys:
        return
    directed = _is_directed(latest)
    unit = [v.link_units[label]]
    values = np.array([[latest[k]] for k in keys])
    fleet = _fleet(values, np.array([v.link_better[label] == "lower"]), th.min_peers)
    found = {f.item: f for f in v.findings if f.kind == SLOW_LINK}
    gone = {f.item: f for f in v.transients if f.kind == SLOW_LINK}
    for k, devs in zip(keys, _deviations(values, [label], unit, fleet, th), strict=True):
        devs = _named(devs, label, k, directed)
        again = k in before
        if again:
            old = np.array([[x] for x in before[k]])
            was = _named([d for row in _deviations(old, [label], unit, fleet, th) for d in row],
                         label, k, directed)
            if not (devs and was):
                if devs or was:
                    _add(gone, v.transients, k, devs or was, False)
                continue
        if devs:
            _add(found, v.findings, k, devs, again)


def _add(index: dict[str, Finding], into: list[Finding], k: tuple[str, str],
         devs: list[Deviation], confirmed: bool) -> None:
    """Add a link's deviations to its finding (one finding per link, both directions)."""
    a, b = _undirected(k)
    item = f"{a} - {b}"
    if item in index:
        index[item].evidence = _worst(index[item].evidence + devs)
    else:
        index[item] = Finding(SLOW_LINK, item, (a, b), _worst(devs), confirmed)
        into.append(index[item])


def _named(devs: list[Deviation], label: str, k: tuple[str, str], directed: bool
           ) -> list[Deviation]:
    """A directed figure's deviations name their direction."""
    return [replace(d, metric=f"{label} {k[0]}->{k[1]}") if directed else d for d in devs]


def _undirected(k: tuple[str, str]) -> tuple[str, str]:
    return k if natural(k[0]) <= natural(k[1]) else (k[1], k[0])


def _scaling(campaign_runs: list[Run], v: Verdict) -> None:
    curves: dict[str, dict[int, float]] = defaultdict(dict)
    for run in sorted(campaign_runs, key=lambda r: r.created):
        for m in run.metrics:
            if "nodes" in m.params and m.samples:
                size = m.params.get("size")
                key = f"{m.name} {size} B" if size else m.name
                curves[key][int(m.params["nodes"])] = float(np.median(m.samples))
    v.scaling = {k: sorted(c.items()) for k, c in curves.items()}


def is_campaign_run(run: Run) -> bool:
    return CAMPAIGN in run.provenance


def analyse(runs: list[Run], campaign: str, th: Thresholds | None = None) -> Verdict:
    """The verdict on the runs of one campaign: the node runs (one or more per node) and the
    driver's campaign runs (node list, failures, link figures)."""
    th = th or Thresholds()
    node_runs = [r for r in runs if not is_campaign_run(r)]
    campaign_runs = [r for r in runs if is_campaign_run(r)]
    nodes: dict[str, None] = {}
    failed: dict[str, str] = {}
    for run in sorted(campaign_runs, key=lambda r: r.created):
        info = run.provenance[CAMPAIGN]
        nodes.update(dict.fromkeys(info.get("nodes", [])))
        failed.update(info.get("failed", {}))
        for n in info.get("done", []):
            failed.pop(n, None)
    measured = {r.host for r in node_runs}
    nodes.update(dict.fromkeys(sorted(measured, key=natural)))
    for n in measured:
        failed.pop(n, None)
    v = Verdict(campaign, th, sorted(nodes, key=natural), failed, {}, [], [], [], [],
                np.zeros((0, 0)), {}, {}, {}, {})
    _node_verdict(node_runs, th, v)
    _link_verdict(campaign_runs, th, v)
    _scaling(campaign_runs, v)
    order = {SLOW_NODE: 0, SLOW_ENDPOINT: 1, SLOW_LINK: 2}
    v.findings.sort(key=lambda f: (order[f.kind], natural(f.item)))
    return v


def drain_reason(campaign: str, f: Finding) -> str:
    """A short reason for the scheduler's node record: the kind, how many figures, the worst."""
    if not f.evidence:
        return f"hpcprobe {campaign}: {f.kind}"
    worst = f.evidence[0]
    return (f"hpcprobe {campaign}: {f.kind}, {len(f.evidence)} figure(s) worse, "
            f"{worst.metric.split()[0]} {-worst.worse:+.0%}")


def dumps(v: Verdict) -> str:
    return json.dumps(v.to_dict(), indent=1)
