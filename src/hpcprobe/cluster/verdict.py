"""The verdict on a campaign: every node's figures against the fleet of its peers (the same
hardware), each node's links together against the other nodes', each link against the other
links, and what is slow: a node (its own kernels), a network endpoint (every link through a node
slow, its kernels fine) or a link (only that pair slow).

Each figure is judged by the peers judge (judge/peers.py: a robust z-score, a practical
threshold and the best end of its CI). A node or link measured again (the campaign re-measures
what it flags) is flagged only on figures flagged both times; flagged once is a transient,
listed and not counted. Pure: reads run documents only."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.compare import NotJoined
from hpcprobe.common import lazy
from hpcprobe.common.bulk import bulk
from hpcprobe.common.names import natural
from hpcprobe.common.parts import Part
from hpcprobe.judge.peers import (
    Deviation,
    Fig,
    Peers,
    Thresholds,
    figure,
    figures,
    label,
    params_label,
    worst,
)
from hpcprobe.machine import sentinel, steal
from hpcprobe.measure import profiles
from hpcprobe.measure.family import POWER, Scaling, energy_figure
from hpcprobe.results.findings import HEALTH, kind, of_kind
from hpcprobe.results.judgement import Judgement
from hpcprobe.results.model import Metric, Run

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

@dataclass(frozen=True)
class Campaigned:
    """What a campaign's driver records with each run it stores (its provenance part
    `cluster`): a pass's role ("campaign", "remeasure", "links"), its nodes, those measured,
    done and failed (node -> why), why the links were not measured and the pairs whose
    family (`--pairs`) gave no figure (with why), the scheduler, the node probe, the work
    directory and the thresholds it judged with; a run across nodes (role "scaling") its
    family, node count and the figures the family's `Scaling` declares."""

    role: str | None = None
    nodes: list[str] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    link_error: str | None = None
    pairs_failed: list[str] = field(default_factory=list)  # "family a -> b: why"
    scheduler: str | None = None
    probe: list[str] = field(default_factory=list)
    workdir: str | None = None
    thresholds: dict[str, Any] | None = None
    family: str | None = None
    count: int | None = None
    metrics: list[str] = field(default_factory=list)
    grow: list[str] = field(default_factory=list)
    vary: list[str] = field(default_factory=list)
    prefix: str | None = None


#: The runs a campaign's driver stores, and the runs across nodes, keep this part
CAMPAIGN = Part("cluster", Campaigned)

#: What a campaign flags against the peers, each a kind with its code and action: a slow
#: node and a slow network endpoint are drained; a slow link alone is measured again
PEER_KINDS = {k.name: k for k in (
    kind("slow node", "a node worse than its peers of the same hardware", view="the cluster "
         "report and its drain list", code="HP401", action="drain"),
    kind("slow network endpoint", "every link of a node slow: its network port or HCA",
         view="the cluster report and its drain list", code="HP402", action="drain"),
    kind("slow link", "one link slower than the others, its two nodes not", view="the "
         "cluster report", code="HP403", action="re-measure"),
    kind("power-hungry node", "a node that draws more power than its peers of the same "
         "hardware for the same figures (or does less work per watt): not a slow node",
         view="the cluster report", code="HP404", action="watch"))}
SLOW_NODE, SLOW_ENDPOINT, SLOW_LINK, POWER_HUNGRY = PEER_KINDS


def _rounded(m: Any, digits: int) -> list[list[float | None]]:
    """A matrix for JSON: rounded, None where not finite."""
    return [[round(float(x), digits) if np.isfinite(x) else None for x in row] for row in m]


@dataclass
class PeerFinding:
    """A node or link flagged against its peers, with its evidence (a run's own findings are
    results.findings.Finding)."""

    kind: str  # SLOW_NODE, SLOW_ENDPOINT, SLOW_LINK or POWER_HUNGRY
    item: str  # the node, or the link "a - b"
    nodes: tuple[str, ...]
    evidence: list[Deviation]
    confirmed: bool  # also flagged when measured before (re-measured)

    def to_dict(self) -> dict[str, Any]:
        k = PEER_KINDS[self.kind]
        return {"kind": self.kind, "code": k.code, "action": k.action, "item": self.item,
                "nodes": list(self.nodes), "confirmed": self.confirmed,
                "evidence": [d.to_dict() for d in self.evidence]}

    def judgements(self, th: Thresholds) -> list[Judgement]:
        """Its evidence as judgement records, the node or link as their subject."""
        return [d.judgement(self.item, th) for d in self.evidence]


@dataclass
class FleetVerdict:
    """The verdict on a campaign's nodes and links (one run's is analysis.verdict.Verdict)."""

    campaign: str
    thresholds: Thresholds
    nodes: list[str]  # every node the campaign asked for
    failed: dict[str, str]  # node -> why it has no figures
    groups: dict[str, list[str]]  # hardware fingerprint -> its nodes
    findings: list[PeerFinding]
    transients: list[PeerFinding]  # flagged once, not when measured again
    heat_nodes: list[str]
    heat_metrics: list[str]
    heat: Any  # nodes x metrics, value / peers' median oriented so that < 1 is worse
    heat_z: Any  # nodes x metrics, robust z-score against the peers, > 0 worse
    links: dict[str, dict[tuple[str, str], float]]  # link metric -> (a, b) -> median
    link_units: dict[str, str]
    link_better: dict[str, str]  # link metric -> "higher" or "lower"
    scaling: dict[str, list[tuple[int, float]]]  # "allreduce 8 B" -> (nodes, median us)
    unjudged: list[str] = field(default_factory=list)  # why some figures were not judged
    #: nodes flagged on derived figures alone, or on one measured figure barely past the
    #: thresholds: said, never drained
    suspects: list[PeerFinding] = field(default_factory=list)
    link_errors: list[str] = field(default_factory=list)  # why links were not measured
    #: families run across nodes: figure -> (nodes, median, parallel efficiency or None)
    weak: dict[str, list[tuple[int, float, float | None]]] = field(default_factory=dict)
    weak_units: dict[str, str] = field(default_factory=dict)
    scaling_errors: list[str] = field(default_factory=list)  # why a node count has no figure
    #: node -> the figures most of its peers have and it lacks (a GPU gone, a kernel failed)
    missing: dict[str, list[str]] = field(default_factory=dict)
    #: node -> what its own checks found that needs an administrator (the health findings of
    #: its latest run of each family: a GPU to reset or replace), whatever its figures
    unhealthy: dict[str, list[str]] = field(default_factory=dict)
    #: node -> the largest share (%) of its CPU time the hypervisor took while a benchmark of
    #: its latest run ran, where it reached a warning: its figures carry the host's load
    steal: dict[str, float] = field(default_factory=dict)
    #: node -> the largest share (%) of its CPUs' time other processes used while a benchmark
    #: of its latest run ran, from `steal.OTHERS` on: a node flagged on such figures alone is a
    #: suspect, never drained (its slowness may be another job's)
    busy: dict[str, float] = field(default_factory=dict)
    #: node -> benchmark -> after/before of the node sentinel around it, where it moved during
    #: the node's latest run: figures that may mix two states of the node
    changed: dict[str, dict[str, float]] = field(default_factory=dict)
    #: node -> (when its latest run was created, its profile): how long its result stands
    measured_at: dict[str, tuple[str, str]] = field(default_factory=dict)

    def valid_until(self, node: str, valid_s: float | None = None) -> datetime:
        """Until when the node's latest result stands: its profile's window (`valid_s`
        instead where given)."""
        return profiles.valid_until(*self.measured_at[node], valid_s)

    def stale(self, now: datetime, valid_s: float | None = None) -> list[str]:
        """The measured nodes whose latest result no longer stands at `now`."""
        return [n for n in self.measured if n in self.measured_at
                and self.valid_until(n, valid_s) <= now]

    def select(self, which: Iterable[str], now: datetime, valid_s: float | None = None
               ) -> list[str]:
        """The nodes a new pass measures again (`cluster run --only`, each of ONLY): those
        that failed, were flagged (a finding of any kind), are suspects, or whose result no
        longer stands at `now`; each once, in that order."""
        picked = {"failed": list(self.failed),
                  "flagged": [n for f in self.findings for n in f.nodes],
                  "suspect": [f.item for f in self.suspects],
                  "stale": self.stale(now, valid_s)}
        return list(dict.fromkeys(n for w in which for n in picked[w]))

    @property
    def measured(self) -> list[str]:
        return [n for n in self.nodes if n not in self.failed]

    @property
    def flagged(self) -> bool:
        return bool(self.findings or self.failed or self.link_errors or self.scaling_errors
                    or self.missing or self.unhealthy)

    def to_dict(self) -> dict[str, Any]:
        return {
            "campaign": self.campaign,
            "thresholds": vars(self.thresholds),
            "nodes": self.nodes, "failed": self.failed, "groups": self.groups,
            "findings": [f.to_dict() for f in self.findings],
            "transients": [f.to_dict() for f in self.transients],
            "heat": {"nodes": self.heat_nodes, "metrics": self.heat_metrics,
                     "normalised": _rounded(self.heat, 4), "z": _rounded(self.heat_z, 2)},
            "links": {m: [{"a": a, "b": b, "median": v} for (a, b), v in sorted(pairs.items())]
                      for m, pairs in self.links.items()},
            "link_units": self.link_units, "link_better": self.link_better,
            "scaling": {k: [{"nodes": n, "median": v} for n, v in pts]
                        for k, pts in self.scaling.items()},
            "unjudged": self.unjudged, "link_errors": self.link_errors,
            "suspects": [f.to_dict() for f in self.suspects],
            "weak_scaling": {k: [{"nodes": n, "median": v, "parallel_efficiency": e}
                                 for n, v, e in pts] for k, pts in self.weak.items()},
            "weak_units": self.weak_units, "scaling_errors": self.scaling_errors,
            "missing": self.missing, "unhealthy": self.unhealthy, "steal_percent": self.steal,
            "others_percent": self.busy, "node_changed": self.changed,
            "judgements": [j.to_dict() for f in self.findings + self.suspects
                           for j in f.judgements(self.thresholds)],
            "valid_until": {n: self.valid_until(n).isoformat(timespec="seconds")
                            for n in self.measured_at},
        }


#: The nodes a campaign's new pass may be narrowed to (FleetVerdict.select)
ONLY = ("failed", "flagged", "suspect", "stale")


#: What a run's provenance says peers must share besides the CPU's hardware (a family's
#: inventory: the GPU models measured)
Labels = Callable[[Mapping[str, Any]], list[str]]


def no_labels(provenance: Mapping[str, Any]) -> list[str]:
    return []


def hardware(run: Run, labels: Labels = no_labels) -> str:
    """The hardware fingerprint peers share: CPU model, sockets x cores, NUMA domains, memory
    (GiB), the widest kernel ISA and what `labels` finds in the provenance (the GPU models
    measured); and the kernels' digest, so that a node whose own install of hpcprobe measures
    with other kernels is not called slow for it. Nodes that differ in any are grouped
    apart."""
    t, node = run.topology, run.node
    c = t.get("counts", {})
    mem = sum(n.get("memory_bytes") or 0 for n in t.get("numa_nodes", []))
    isa = (node.isa_supported or ["?"])[-1]
    models = labels(run.provenance)
    return (f"{node.cpu_model or t.get('cpu_model') or '?'}, {c.get('packages', '?')} x "
            f"{(c.get('cores') or 0) // max(1, c.get('packages') or 1)} cores, "
            f"{c.get('numa_nodes', '?')} NUMA, {mem / 2**30:.0f} GiB, {isa}"
            + "".join(f", {m}" for m in models)
            + (f", kernels {node.kernels}" if node.kernels else ""))


#: Params that name a link's ends: the link, not the figure.
LINK_ENDS = frozenset({"a", "b", "from", "to"})


def _latest_and_before(runs: Iterable[tuple[str, Run]]) -> tuple[dict[str, Run],
                                                                  dict[str, list[Run]]]:
    latest: dict[str, Run] = {}
    before: dict[str, list[Run]] = defaultdict(list)
    for key, run in sorted(runs, key=lambda kr: kr[1].created):
        if key in latest:
            before[key].append(latest[key])
        latest[key] = run
    return latest, before


def _figures_of(run: Run, ignore: NotJoined, made: dict[str, dict[str, Fig]] | None
                ) -> dict[str, Fig]:
    """A node run's figures, made once per run where the caller keeps them (`made`)."""
    if made is None:
        return figures(run.metrics, ignore)
    got = made.get(run.run_id)
    if got is None:
        got = made[run.run_id] = figures(run.metrics, ignore)
    return got


def _node_verdict(node_runs: list[Run], th: Thresholds, ignore: NotJoined,
                  v: FleetVerdict, labels: Labels, made: dict[str, dict[str, Fig]] | None
                  ) -> None:
    latest, before = _latest_and_before((r.host, r) for r in node_runs)
    groups: dict[str, list[str]] = defaultdict(list)
    for host in sorted(latest, key=natural):
        groups[hardware(latest[host], labels)].append(host)
    v.groups = dict(groups)
    v.measured_at = {h: (r.created, r.profile) for h, r in latest.items()}
    v.unhealthy = _unhealthy(node_runs)
    for host in sorted(latest, key=natural):
        worst = max(latest[host].conditions.steal.values(), default=0.0)
        if steal.warns(worst):
            v.steal[host] = worst
        if moves := sentinel.changes(latest[host].findings):
            v.changed[host] = moves
        if busy := _busy(latest[host]):
            v.busy[host] = max(busy.values())
    heat_rows: dict[str, dict[str, tuple[float, float]]] = {}
    all_labels: dict[str, None] = {}
    for fp, hosts in groups.items():
        rows = [_figures_of(latest[h], ignore, made) for h in hosts]
        judged = Peers(rows, th)
        if len(hosts) < th.min_peers:
            v.unjudged.append(f"{', '.join(hosts)} ({fp}): fewer than {th.min_peers} nodes of "
                              "this hardware, not judged")
        else:
            _missing(v, hosts, rows, ignore.derived)
        med, values, z = judged.fleet.median, judged.values, judged.z
        with np.errstate(invalid="ignore", divide="ignore"):
            norm = np.where(judged.lower, med / values, values / med)
        all_labels.update(dict.fromkeys(judged.labels))
        shown = np.isfinite(norm)
        for i, h in enumerate(hosts):
            heat_rows[h] = {lb: (n, zz) for lb, n, zz, ok in zip(
                judged.labels, norm[i].tolist(), z[i].tolist(), shown[i].tolist(), strict=True)
                if ok}
            earlier = [d for row in judged.of([_figures_of(r, ignore, made) for r in before[h]])
                       for d in row] if before[h] else None
            power, rest = _energy(judged.flagged[i])
            was = None if earlier is None else _energy(earlier)
            _node(v, h, rest, None if was is None else was[1], ignore.derived,
                  set(_busy(latest[h])))
            _judge(v, POWER_HUNGRY, h, power, None if was is None else was[0])
    v.heat_nodes = sorted(heat_rows, key=natural)
    v.heat_metrics = list(all_labels)
    both = np.array([[heat_rows[h].get(lb, (np.nan, np.nan)) for lb in v.heat_metrics]
                     for h in v.heat_nodes]).reshape(len(v.heat_nodes), len(v.heat_metrics), 2)
    v.heat, v.heat_z = both[:, :, 0], both[:, :, 1]


def _name(label: str) -> str:
    """A figure's name from its label ("compute.power isa=…" -> "power")."""
    return label.split(" ", 1)[0].split(".", 1)[-1]


def _is_energy(label: str) -> bool:
    """Whether a figure's label is a power or per-watt figure's."""
    return energy_figure(_name(label))


def _energy(devs: list[Deviation]) -> tuple[list[Deviation], list[Deviation]]:
    """Deviations split into the energy figures' and the others': a node that draws more
    power for the same work is a finding of its own, never a slow node. The energy ones count
    only where a power figure is among them: a slow node's lower figure per watt at the same
    power is its slowness, said by its own finding."""
    energy = [d for d in devs if _is_energy(d.metric)]
    drawn = any(_name(d.metric) == POWER for d in energy)
    return energy if drawn else [], [d for d in devs if not _is_energy(d.metric)]


def _measured(devs: list[Deviation], derived: frozenset[str]) -> list[Deviation]:
    """The deviations of measured figures (not derived from others)."""
    return [d for d in devs if d.metric.split(" ", 1)[0] not in derived]


def _busy(run: Run) -> dict[str, float]:
    """Benchmark -> the share (%) of the CPUs' time other processes used while it ran, where
    that left its figures unjudged (`steal.OTHERS`)."""
    return {b: pct for b, pct in run.conditions.others.items() if steal.busy(pct)}


def _node(v: FleetVerdict, host: str, now: list[Deviation], earlier: list[Deviation] | None,
          derived: frozenset[str], busy: set[str]) -> None:
    """A node's verdict rests on its measured figures: flagged on derived ones alone, or on
    figures measured while other processes used its CPUs (`busy`: their benchmarks), or on
    one measured figure that is barely past either threshold (each time it was measured), it
    is a suspect, said and never drained. Barely past the z-score is marginal too: a figure
    17 % low among peers that spread nearly as much (z 4) is what a neighbour's burst on a
    shared host does to one kernel, while a fault moves it far past both."""
    got, was = _measured(now, derived), None if earlier is None else _measured(earlier, derived)
    if was is not None and (again := {d.metric for d in got} & {d.metric for d in was}):
        # measured again, it rests on the figures flagged both times (the others were not
        # confirmed): one marginal figure confirmed of several flagged once is still a suspect
        now = got = [d for d in got if d.metric in again]
        earlier = was = [d for d in was if d.metric in again]
    th = v.thresholds

    def marginal(devs: list[Deviation]) -> bool:
        return len(devs) <= 1 and all(
            d.worse < th.marginal * th.worse or (d.z < th.marginal * th.z and not d.far)
            for d in devs)

    shared = bool(busy) and all(d.metric.split(".", 1)[0] in busy for d in got)
    if now and (shared or marginal(got) and (was is None or marginal(was))):
        v.suspects.append(PeerFinding(SLOW_NODE, host, (host,), worst(now + (earlier or [])),
                                  earlier is not None))
        return
    _judge(v, SLOW_NODE, host, got, was)


def _unhealthy(node_runs: list[Run]) -> dict[str, list[str]]:
    """Each node's health findings (what needs an administrator), as the latest run of each
    benchmark that reported them says: a run after the fix clears them, a later run of other
    benchmarks does not."""
    latest: dict[tuple[str, str], Run] = {}
    for run in sorted(node_runs, key=lambda r: r.created):
        for b in run.benchmarks:
            latest[(run.host, b)] = run
    health: dict[str, list[Mapping[str, Any]]] = {}  # each run's, found once (not once a
    # benchmark: a fleet's runs carry dozens of findings of other kinds)
    out: dict[str, list[str]] = defaultdict(list)
    for (host, b), run in sorted(latest.items(), key=lambda kv: (natural(kv[0][0]), kv[0][1])):
        if run.run_id not in health:
            health[run.run_id] = of_kind(run.findings, HEALTH)
        out[host] += [f["message"] for f in health[run.run_id] if f.get("benchmark") == b]
    return {host: found for host, found in out.items() if found}


def _missing(v: FleetVerdict, hosts: list[str], rows: list[dict[str, Fig]],
             derived: frozenset[str]) -> None:
    """Each node's measured figures that most of its group has (more than half of the nodes)
    and it lacks: a device gone from the bus, a family that could not run there, a failed
    check. A derived figure is not one: the roofline's compute ceiling follows whichever peak
    kernel was fastest on the node, so its params differ from node to node."""
    have: Counter[str] = Counter(lb for row in rows for lb in row)
    # a node whose energy counters cannot be read is not a faulty node
    usual = [lb for lb, k in have.items() if 2 * k > len(hosts)
             and lb.split(" ", 1)[0] not in derived and not _is_energy(lb)]
    for h, row in zip(hosts, rows, strict=True):
        lacks = [lb for lb in usual if lb not in row]
        if lacks:
            v.missing[h] = lacks


def _judge(v: FleetVerdict, kind: str, item: str, now: list[Deviation],
           earlier: list[Deviation] | None) -> None:
    """A node's finding: flagged now (measured once), or flagged now and before on the same
    figures (measured again: confirmed); flagged only once of several times, a transient."""
    if earlier is None:
        if now:
            v.findings.append(PeerFinding(kind, item, (item,), now, False))
        return
    was = {d.metric for d in earlier}
    still = [d for d in now if d.metric in was]
    if still:
        v.findings.append(PeerFinding(kind, item, (item,), still, True))
    elif now or earlier:
        v.transients.append(PeerFinding(kind, item, (item,), worst(now + earlier), False))


def link_key(params: dict[str, Any]) -> tuple[str, str] | None:
    """(sender, receiver) of a directed figure, (a, b) sorted of an undirected one."""
    if "from" in params and "to" in params:
        return str(params["from"]), str(params["to"])
    if "a" in params and "b" in params:
        return undirected((str(params["a"]), str(params["b"])))
    return None


Links = dict[tuple[str, str], Fig]


def _link_verdict(campaign_runs: list[Run], th: Thresholds, ignore: NotJoined,
                  v: FleetVerdict) -> None:
    """Links: first each node's links together (the median of its links' figures, against the
    other nodes': a node all of whose links are slow is a slow endpoint, and one slow link does
    not move the median); then each link against the links not through a slow node or
    endpoint (a slow link)."""
    latest: dict[str, Links] = defaultdict(dict)
    before: dict[str, dict[tuple[str, str], list[Fig]]] = defaultdict(lambda: defaultdict(list))
    left_out: dict[str, frozenset[str]] = {}  # per benchmark
    for run in sorted(campaign_runs, key=lambda r: r.created):
        for m in run.metrics:
            key = link_key(m.params)
            if key is None or not m.samples:
                continue
            if m.benchmark not in left_out:
                left_out[m.benchmark] = ignore.of(m.benchmark) | LINK_ENDS
            # labelled without its ends: each link's figure is made once, not 10,000 times
            name = params_label(m.benchmark, m.name, {k: v for k, v in m.params.items()
                                                      if k not in LINK_ENDS},
                                left_out[m.benchmark])
            if key in latest[name]:
                before[name][key].append(latest[name][key])
            latest[name][key] = figure(m)
            v.link_units[name] = m.unit
            v.link_better[name] = m.better
    v.links = {name: {k: f[0] for k, f in links.items()} for name, links in latest.items()}
    slow = {f.item for f in v.findings if f.kind == SLOW_NODE}
    _endpoints(latest, before, slow, th, v)
    bad = slow | {f.item for f in v.findings if f.kind == SLOW_ENDPOINT}
    for name, links in latest.items():
        _links_of(name, links, before[name], bad, th, v)


def _per_node(latest: dict[str, Links], bad: frozenset[str] = frozenset()
              ) -> dict[str, dict[str, Fig]]:
    """Each node's links taken together, per link figure (directed: into and out of the node
    apart): the median over its links, and as the best end the best of its links (so that all
    of a node's links must be worse than the fleet for it to be flagged); a node's links whose
    other end is `bad` (a slow node or endpoint, which slows them) left out."""
    sides: dict[tuple[str, str], list[float]] = defaultdict(list)
    info: dict[str, tuple[str, str]] = {}
    for name, links in latest.items():
        directed = is_directed(links)
        for (a, b), (med, _, unit, better) in links.items():
            for node, side, other in ((a, "out of", b), (b, "into", a)):
                if other in bad:
                    continue
                each = f"{name} {side} the node" if directed else f"{name} of the node"
                sides[(node, each)].append(med)
                info[each] = (unit, better)
    out: dict[str, dict[str, Fig]] = defaultdict(dict)
    for (node, each), xs in sides.items():
        unit, better = info[each]
        out[node][each] = (statistics.median(xs), max(xs) if better == "higher" else min(xs),
                           unit, better)
    return out


def _endpoints(latest: dict[str, Links], before: dict[str, dict[tuple[str, str], list[Fig]]],
               slow: set[str], th: Thresholds, v: FleetVerdict) -> None:
    """Slow endpoints: nodes (not slow themselves) whose links are worse than the other nodes';
    re-measured links must show it both times. The links through a slow node are left out of
    every node's figures; so are, in a second pass, those through the endpoints the first
    found: a node whose links into the one shaped port (and to the slow node) are half of its
    links is slow by their median, not by a fault of its own."""
    first = {name: {k: before[name][k][0] if k in before[name] else f for k, f in links.items()}
             for name, links in latest.items()}  # each link as first measured
    ends: set[str] = set()
    for _ in range(2):
        found = _slow_ends(latest, first, before, frozenset(slow | ends), slow, th)
        ends = {node for node, now, _ in found if now}
    for node, now, then in found:
        _judge(v, SLOW_ENDPOINT, node, now, then)


def _slow_ends(latest: dict[str, Links], first: dict[str, Links],
               before: dict[str, dict[tuple[str, str], list[Fig]]], bad: frozenset[str],
               slow: set[str], th: Thresholds
               ) -> list[tuple[str, list[Deviation], list[Deviation] | None]]:
    """Each node's (not slow) endpoint deviations now and as first measured (None: its links
    were measured once), every node's links through a `bad` node left out."""
    rows, rows_first = _per_node(latest, bad), _per_node(first, bad)
    nodes = sorted(rows, key=natural)
    judged = Peers([rows[n] for n in nodes], th, _scatter(latest, bad))
    then = judged.of([rows_first.get(n, {}) for n in nodes])
    return [(node, judged.flagged[i],
             then[i] if any(node in k for b in before.values() for k in b) else None)
            for i, node in enumerate(nodes) if node not in slow]


def _scatter(latest: dict[str, Links], bad: frozenset[str]) -> dict[str, float]:
    """Per node figure of the links (`_per_node`'s labels), the spread that the scatter of the
    links alone gives a median of a node's links: the links' robust spread of log values (those
    not through a `bad` node) over the square root of the links a node has, times 1.25 (a
    median's standard error). Five nodes' medians can agree by chance far closer than that; a
    fabric whose links scatter 4x among themselves (123-468 MB/s on shared cores) cannot make a
    node 20 % below the others a slow endpoint, while a port at 3 % of its peers stays one."""
    out: dict[str, float] = {}
    for name, links in latest.items():
        good = {k: f[0] for k, f in links.items() if not set(k) & bad}
        logs = np.log([x for x in good.values() if x > 0])
        if len(logs) < 3 or len(logs) < len(good):
            continue
        spread = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
        sides = (("out of", (0,)), ("into", (1,))) if is_directed(links) else (("of", (0, 1)),)
        for side, ends in sides:
            per: dict[str, int] = defaultdict(int)
            for k in good:
                for end in ends:
                    per[k[end]] += 1
            each = statistics.median(per.values())
            out[f"{name} {side} the node"] = 1.2533 * spread / math.sqrt(each)
    return out


def is_directed(pairs: dict[tuple[str, str], Any]) -> bool:
    """Whether a link figure was measured each way (a -> b and b -> a apart)."""
    return any((b, a) in pairs for a, b in pairs)


def _links_of(label: str, latest: Links, before: dict[tuple[str, str], list[Fig]],
              bad: set[str], th: Thresholds, v: FleetVerdict) -> None:
    """Slow links of one figure: each link not through a slow node or endpoint against those
    links; a re-measured link must be flagged both times."""
    keys = [k for k in latest if not set(k) & bad]
    directed = is_directed(latest)
    if len(keys) < th.min_links:
        if keys:
            v.unjudged.append(f"{label}: {len(keys)} link(s) not through a slow node or "
                              f"endpoint, fewer than {th.min_links}: not judged one by one")
        _far_unjudged(label, latest, list(latest), keys or list(latest), th, v, directed,
                      f"fewer than {th.min_links} links to judge it against")
        return
    judged_alone = set(keys)
    _far_unjudged(label, latest, [k for k in latest if k not in judged_alone], keys, th, v,
                  directed,
                  "it runs through a node or endpoint flagged slow, so it is not judged alone")
    judged = Peers([{label: latest[k]} for k in keys], th)
    found = {f.item: f for f in v.findings if f.kind == SLOW_LINK}
    gone = {f.item: f for f in v.transients if f.kind == SLOW_LINK}
    for k, devs in zip(keys, judged.flagged, strict=True):
        devs = _named(devs, label, k, directed)
        again = k in before
        if again:
            was = _named([d for row in judged.of([{label: f} for f in before[k]]) for d in row],
                         label, k, directed)
            if not (devs and was):
                if devs or was:
                    _add(gone, v.transients, k, devs or was, False)
                continue
        if devs:
            _add(found, v.findings, k, devs, again)


def _far_unjudged(label: str, latest: Links, unjudged: list[tuple[str, str]],
                  peers: list[tuple[str, str]], th: Thresholds, v: FleetVerdict, directed: bool,
                  why: str) -> None:
    """Links not judged one by one that are `far` times worse than the median of the judged
    ones (or of all, where too few were judged) are listed with why: never silent."""
    if len(peers) < 2:
        return
    centre = statistics.median(latest[k][0] for k in peers)
    for k in unjudged:
        med, _, unit, better = latest[k]
        factor = (centre / med if med > 0 else math.inf) if better == "higher" else \
            (med / centre if centre > 0 else math.inf)
        if factor >= th.far:
            a, b = k if directed else undirected(k)
            v.unjudged.append(f"{label} {a} {'->' if directed else '-'} {b}: {med:.3g} {unit}, "
                              f"{factor:.1f}x worse than the median {centre:.3g} of "
                              f"{len(peers)} link(s), not flagged: {why}")


def _add(index: dict[str, PeerFinding], into: list[PeerFinding], k: tuple[str, str],
         devs: list[Deviation], confirmed: bool) -> None:
    """Add a link's deviations to its finding (one finding per link, both directions)."""
    a, b = undirected(k)
    item = f"{a} - {b}"
    if item in index:
        index[item].evidence = worst(index[item].evidence + devs)
    else:
        index[item] = PeerFinding(SLOW_LINK, item, (a, b), worst(devs), confirmed)
        into.append(index[item])


def _named(devs: list[Deviation], label: str, k: tuple[str, str], directed: bool
           ) -> list[Deviation]:
    """A directed figure's deviations name their direction."""
    return [replace(d, metric=f"{label} {k[0]}->{k[1]}") if directed else d for d in devs]


def undirected(k: tuple[str, str]) -> tuple[str, str]:
    """A link by its ends in natural order."""
    return k if natural(k[0]) <= natural(k[1]) else (k[1], k[0])


def _scaling(campaign_runs: list[Run], v: FleetVerdict) -> None:
    """The links job's collectives as nodes are added."""
    curves: dict[str, dict[int, float]] = defaultdict(dict)
    for run in sorted(campaign_runs, key=lambda r: r.created):
        for m in run.metrics:
            if m.benchmark == "scaling" and "nodes" in m.params and m.samples:
                size = m.params.get("size")
                key = f"{m.name} {size} B" if size else m.name
                curves[key][int(m.params["nodes"])] = statistics.median(m.samples)
    v.scaling = {k: sorted(c.items()) for k, c in curves.items()}


#: per family run across nodes that has one, its total work rate from one count's metrics
WorkRates = Mapping[str, Callable[[list[Metric]], tuple[list[float], str] | None]]


def work_rates(scalings: Mapping[str, Scaling]) -> WorkRates:
    """The work rates of these families' Scaling capabilities, where they declare one."""
    return {f: s.rate for f, s in scalings.items() if s.rate is not None}


def _weak(campaign_runs: list[Run], ignore: NotJoined, v: FleetVerdict, rates: WorkRates) -> None:
    """The families run across 1, 2, 4, ... nodes: their declared figures per node count (the
    latest run of each count), the parallel efficiency of those that grow with the nodes (and
    of a family's work rate), and why a count has none."""
    points: dict[str, dict[int, float]] = defaultdict(dict)
    grow: set[str] = set()
    for run in sorted(campaign_runs, key=lambda r: r.created):
        info = CAMPAIGN.of(run.provenance)
        if info is None or info.role != "scaling" or info.family is None:
            continue
        count, family, prefix = int(info.count or 0), info.family, info.prefix
        v.scaling_errors += [f"{family} on {count} node(s): {e}" for e in run.errors]
        for m in run.metrics:
            named = m.name in info.metrics or bool(prefix) and m.name.startswith(prefix or "")
            if m.benchmark == family and named and m.samples:
                name = label(m, ignore | frozenset(info.vary))
                points[name][count] = statistics.median(m.samples)
                v.weak_units[name] = m.unit
                if m.name in info.grow:
                    grow.add(name)
        rate = rates[family](run.metrics) if family in rates else None
        if rate is not None and rate[0]:
            name = f"{family} work rate"
            points[name][count] = statistics.median(rate[0])
            v.weak_units[name] = rate[1]
            grow.add(name)
    for name, by_count in points.items():
        one = by_count.get(1)
        v.weak[name] = [(k, x, x / (k * one) if name in grow and one else None)
                        for k, x in sorted(by_count.items())]


def is_campaign_run(run: Run) -> bool:
    return CAMPAIGN.key in run.provenance


def campaign_thresholds(runs: list[Run]) -> Thresholds | None:
    """The thresholds the campaign's latest pass judged with; None where no pass stored them
    (runs of no campaign, or of a version that did not keep them)."""
    passes = [(r.created, info.thresholds) for r in runs
              if (info := CAMPAIGN.of(r.provenance)) is not None and info.thresholds]
    if not passes:
        return None
    kept = max(passes, key=lambda p: p[0])[1] or {}
    return Thresholds(**{f.name: kept[f.name] for f in fields(Thresholds) if f.name in kept})


def analyse(runs: list[Run], campaign: str, th: Thresholds | None = None,
            ignore: NotJoined | None = None, labels: Labels = no_labels,
            rates: WorkRates | None = None, made: dict[str, dict[str, Fig]] | None = None
            ) -> FleetVerdict:
    """The verdict on the runs of one campaign: the node runs (one or more per node) and the
    driver's campaign runs (node list, failures, link figures). Figures are joined across
    nodes as `compare` joins them, without the params in `ignore` (the families' not_joined);
    nodes are peers where their hardware and what `labels` reads agree; `rates`: the work rates
    of the families run across nodes that declare one (their parallel efficiency); `made`:
    each node run's figures by its id, kept by a caller that judges the same runs again with
    the same `ignore` (a campaign, after its re-measures: 0.9 s of a 1,000-node verdict)."""
    th = th or Thresholds()
    ignore = ignore or NotJoined()
    node_runs = [r for r in runs if not is_campaign_run(r)]
    campaign_runs = [r for r in runs if is_campaign_run(r)]
    nodes: dict[str, None] = {}
    failed: dict[str, str] = {}
    link_errors: list[str] = []
    for run in sorted(campaign_runs, key=lambda r: r.created):
        info = CAMPAIGN.of(run.provenance) or Campaigned()
        nodes.update(dict.fromkeys(info.nodes))
        failed.update(info.failed)
        link_errors += [f"{run.created} ({info.role}): {e}"
                        for e in ([info.link_error] if info.link_error else []) + info.pairs_failed]
        for n in info.done:
            failed.pop(n, None)
    measured = {r.host for r in node_runs}
    nodes.update(dict.fromkeys(sorted(measured, key=natural)))
    for n in measured:
        failed.pop(n, None)
    v = FleetVerdict(campaign, th, sorted(nodes, key=natural), failed, {}, [], [], [], [],
                np.zeros((0, 0)), np.zeros((0, 0)), {}, {}, {}, {}, link_errors=link_errors)
    with bulk():
        _node_verdict(node_runs, th, ignore, v, labels, made)
        _link_verdict(campaign_runs, th, ignore, v)
    _scaling(campaign_runs, v)
    _weak(campaign_runs, ignore, v, rates or {})
    order = {kind: i for i, kind in enumerate(PEER_KINDS)}
    v.findings.sort(key=lambda f: (order[f.kind], natural(f.item)))
    return v


def drain_reason(campaign: str, f: PeerFinding) -> str:
    """A short reason for the scheduler's node record: the kind, how many figures, the worst."""
    said = f"hpcprobe {campaign}: {PEER_KINDS[f.kind].code} {f.kind}"
    if not f.evidence:
        return said
    worst = f.evidence[0]
    return (f"{said}, {len(f.evidence)} figure(s) worse, "
            f"{worst.metric.split()[0]} {-worst.worse:+.0%}")
