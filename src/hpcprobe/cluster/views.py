"""The campaign report: the verdict as blocks of the view toolkit (the same in the terminal and
the HTML page), its figures (a heat map of nodes x figures against the peers' median, a node x
node matrix per link figure, the collectives' scaling curves), and the drain lines."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcprobe.cluster.verdict import (
    PEER_KINDS,
    FleetVerdict,
    PeerFinding,
    drain_reason,
    is_directed,
)
from hpcprobe.common import lazy
from hpcprobe.common.names import natural
from hpcprobe.viewkit.table import Block, Lines, Table

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Rows of the "furthest from the fleet" table.
WORST_ROWS = 10
#: The heat map's colour scale: this far below and above the peers' median.
HEAT_RANGE = 0.2


def _few(names: list[str], n: int = 8) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def to_drain(v: FleetVerdict) -> list[tuple[str, str]]:
    """(node, reason) of each node to take out of service, once each: unhealthy nodes (their
    own first finding, which names the fix, is the reason), the findings whose kind's action
    is a drain (slow nodes and slow endpoints; a slow link is two nodes' cable or port, to be
    measured again), failed nodes and nodes missing their peers' figures."""
    out = [(node, f"hpcprobe {v.campaign}: {found[0]}"[:200])
           for node, found in v.unhealthy.items()]
    out += [(f.item, drain_reason(v.campaign, f)) for f in v.findings
            if PEER_KINDS[f.kind].action == "drain"]
    out += [(node, f"hpcprobe {v.campaign}: failed, {why}"[:200])
            for node, why in v.failed.items()]
    out += [(node, f"hpcprobe {v.campaign}: {len(lacks)} figure(s) of its peers missing, "
             f"{lacks[0]}"[:200]) for node, lacks in v.missing.items()]
    first: dict[str, str] = {}
    for node, why in out:
        first.setdefault(node, why)
    return list(first.items())


def _finding_row(f: PeerFinding) -> list[str]:
    return [f.kind, f.item, "confirmed" if f.confirmed else "not re-measured",
            str(len(f.evidence)), "; ".join(d.text() for d in f.evidence[:3])]


def blocks(v: FleetVerdict, drain_argv: Callable[[str, str], list[str]]) -> list[Block]:
    th = v.thresholds
    out: list[Block] = [Lines([
        f"Campaign {v.campaign}: {len(v.nodes)} node(s), {len(v.measured)} measured, "
        f"{len(v.failed)} failed, {len(v.findings)} finding(s)"
        + (f", {len(v.missing)} node(s) missing figures" if v.missing else "")
        + (f", {len(v.unhealthy)} unhealthy node(s)" if v.unhealthy else "")
        + (", links failed" if v.link_errors else "") + "; "
        f"{len(v.groups)} hardware group(s). A figure is flagged beyond {th.z:g} robust z "
        f"(median, 1.4826 MAD of its peers) and more than {th.worse:.0%} worse."])]
    t = Table("Flagged", caption="confirmed: flagged on the same figures when measured again; "
              "evidence: the worst figures and their change against the peers' median")
    for name, justify in (("kind", "left"), ("item", "left"), ("re-measured", "left"),
                          ("figures", "right"), ("evidence", "left")):
        t.add_column(name, justify)
    for f in v.findings:
        t.add_row(*_finding_row(f))
    out.append(t if t.rows else Lines(["Nothing flagged."]))
    out += _node_states(v)
    if v.link_errors:
        out.append(Lines([f"Links not measured: {e}" for e in v.link_errors]))
    if v.scaling_errors:
        out.append(Lines([f"Across nodes: {e}" for e in v.scaling_errors]))
    if v.suspects:
        t = Table("Suspects (one marginal figure, or derived figures alone: not drained)")
        for name in ("node", "measured again", "evidence"):
            t.add_column(name)
        for f in v.suspects:
            t.add_row(f.item, "yes" if f.confirmed else "no",
                      "; ".join(d.text() for d in f.evidence[:3]))
        out.append(t)
    if v.transients:
        t = Table("Transients (flagged once, not when measured again; not counted)")
        t.add_column("kind")
        t.add_column("item")
        t.add_column("flagged once")
        for f in v.transients:
            t.add_row(f.kind, f.item, "; ".join(d.metric for d in f.evidence[:3]))
        out.append(t)
    if v.groups:
        t = Table("Hardware groups (nodes are judged against their own group)")
        t.add_column("hardware")
        t.add_column("nodes", "right")
        t.add_column("which")
        for fp, nodes in v.groups.items():
            t.add_row(fp, str(len(nodes)), _few(nodes))
        out.append(t)
    out += [b for b in (_worst_nodes(v), _links(v), _scaling(v), _weak(v)) if b is not None]
    if v.unjudged:
        out.append(Lines(v.unjudged))
    cmds = [shlex.join(drain_argv(node, why)) for node, why in to_drain(v)]
    out.append(Lines(["To take the flagged nodes out of service (hpcprobe cluster report "
                      "--drain runs these):", *cmds], True) if cmds
               else Lines(["Nothing to drain."]))
    return out



def _node_states(v: FleetVerdict) -> list[Block]:
    """The nodes that failed, lack their peers' figures, found a device to fix, or ran under
    the host's load."""
    out: list[Block] = []
    if v.failed:
        t = Table("Failed nodes")
        t.add_column("node")
        t.add_column("why")
        for node in sorted(v.failed, key=natural):
            t.add_row(node, v.failed[node])
        out.append(t)
    if v.missing:
        t = Table("Missing figures (most of the node's peers have them; it does not)")
        t.add_column("node")
        t.add_column("figures", "right")
        t.add_column("which")
        for node in sorted(v.missing, key=natural):
            t.add_row(node, str(len(v.missing[node])), _few(v.missing[node], 4))
        out.append(t)
    if v.unhealthy:
        t = Table("Unhealthy nodes (their own checks: a device to reset or replace)")
        t.add_column("node")
        t.add_column("finding")
        for node in sorted(v.unhealthy, key=natural):
            for found in v.unhealthy[node]:
                t.add_row(node, found)
        out.append(t)
    if v.steal or v.changed or v.busy:
        t = Table("Host load (steal %: the largest share of CPU time the hypervisor took while a "
                  "benchmark ran; others %: the largest share other processes used, from which "
                  "a slow node is a suspect, never drained; node changed: the benchmarks around "
                  "which the node sentinel's DRAM triad moved, after/before): the node's "
                  "figures carry that load or change, and a slow one may be the host's or a "
                  "neighbour's, not the node's")
        t.add_column("node")
        t.add_column("steal %", "right")
        t.add_column("others %", "right")
        t.add_column("node changed")
        for node in sorted(v.steal.keys() | v.changed.keys() | v.busy.keys(), key=natural):
            t.add_row(node, f"{v.steal[node]:.1f}" if node in v.steal else "-",
                      f"{v.busy[node]:.0f}" if node in v.busy else "-",
                      ", ".join(f"{b} x{r:.2f}" for b, r in v.changed.get(node, {}).items())
                      or "-")
        out.append(t)
    return out


def _worst_nodes(v: FleetVerdict) -> Table | None:
    if not v.heat_nodes or not v.heat_metrics:
        return None
    with np.errstate(all="ignore"):
        filled = np.where(np.isfinite(v.heat), v.heat, np.inf)
    worst = np.argmin(filled, axis=1)
    ratio = filled[np.arange(len(v.heat_nodes)), worst]
    order = np.argsort(ratio, kind="stable")[:WORST_ROWS]
    t = Table("Nodes furthest below their peers (worst figure of each)",
              caption="ratio: the node's figure over its peers' median, oriented so that < 1 "
              "is worse; z: robust z-score against its peers (> 0 worse)")
    t.add_column("node")
    t.add_column("ratio", "right")
    t.add_column("z", "right")
    t.add_column("figure")
    for i in order:
        if np.isfinite(ratio[i]):
            z = v.heat_z[i, worst[i]]
            t.add_row(v.heat_nodes[i], f"{ratio[i]:.3f}", f"{z:.1f}" if np.isfinite(z) else "inf",
                      v.heat_metrics[worst[i]])
    return t


def _links(v: FleetVerdict) -> Table | None:
    if not v.links:
        return None
    t = Table("Links", caption="per pair of nodes; bandwidth each way")
    for name, justify in (("figure", "left"), ("links", "right"), ("median", "right"),
                          ("worst", "right"), ("worst link", "left"), ("unit", "left")):
        t.add_column(name, justify)
    for label, pairs in v.links.items():
        values = list(pairs.values())
        lower = v.link_better[label] == "lower"
        worst_key = (max if lower else min)(pairs, key=lambda k: pairs[k])
        t.add_row(label, str(len(values)), f"{np.median(values):.4g}", f"{pairs[worst_key]:.4g}",
                  f"{worst_key[0]} - {worst_key[1]}", v.link_units[label])
    return t


def _scaling(v: FleetVerdict) -> Table | None:
    if not v.scaling:
        return None
    counts = sorted({n for pts in v.scaling.values() for n, _ in pts})
    t = Table("Collectives as nodes are added (one rank per node, us)")
    t.add_column("collective")
    for n in counts:
        t.add_column(f"{n} nodes", "right")
    for key, pts in v.scaling.items():
        got = dict(pts)
        t.add_row(key, *(f"{got[n]:.4g}" if n in got else "-" for n in counts))
    return t


def _weak(v: FleetVerdict) -> Table | None:
    if not v.weak:
        return None
    t = Table("Across nodes (the work per node kept, or an application's as its command "
              "sizes it)",
              caption="parallel efficiency: the figure on k nodes over k times its figure on "
                      "one node, for figures that grow with the nodes")
    for name, justify in (("figure", "left"), ("nodes", "right"), ("median", "right"),
                          ("unit", "left"), ("per node", "right"),
                          ("parallel efficiency", "right")):
        t.add_column(name, justify)
    for label, pts in v.weak.items():
        for k, x, eff in pts:
            t.add_row(label, str(k), f"{x:.4g}", v.weak_units[label],
                      f"{x / k:.4g}" if eff is not None else "-",
                      f"{100 * eff:.1f} %" if eff is not None else "-")
    return t


def _image(ax: Any, data: Any, **kw: Any) -> Any:
    """A matrix drawn each pixel in its nearest value's colour, resampled before the colours
    are mapped (the same pixels as mapping first): a 1,000-node campaign's 1,000 x 1,000 link
    matrix mapped whole took 0.21 s a figure here, this 0.09-0.14 s (the PNG the same, byte
    for byte)."""
    return ax.imshow(data, interpolation="nearest", interpolation_stage="data", **kw)


def figures(v: FleetVerdict) -> list[tuple[str, str, Figure]]:
    from hpcprobe.viewkit import figure

    out = []
    if v.heat_nodes and v.heat_metrics:
        fig = figure.blank((11, max(3.0, min(14.0, 0.25 * len(v.heat_nodes) + 2))))
        ax = fig.subplots()
        im = _image(ax, v.heat, aspect="auto", cmap="RdYlGn", vmin=1 - HEAT_RANGE,
                    vmax=1 + HEAT_RANGE)
        if len(v.heat_nodes) <= 64:
            ax.set_yticks(range(len(v.heat_nodes)), v.heat_nodes, fontsize=7)
        ax.set_xlabel(f"{len(v.heat_metrics)} figures of the node probe")
        ax.set_ylabel("node")
        fig.colorbar(im, ax=ax, label="figure / peers' median (< 1 worse)")
        title = "Nodes x figures against their peers' median"
        ax.set_title(title, fontsize=11)
        out.append(("cluster-heat", title, fig))
    for label, pairs in v.links.items():
        nodes = sorted({x for k in pairs for x in k}, key=natural)
        at = {n: i for i, n in enumerate(nodes)}
        data = np.full((len(nodes), len(nodes)), np.nan)
        for (a, b), value in pairs.items():
            data[at[a], at[b]] = value
            if (b, a) not in pairs:  # undirected: both halves
                data[at[b], at[a]] = value
        fig = figure.blank((7, 6))
        ax = fig.subplots()
        im = _image(ax, data,
                    cmap="viridis_r" if v.link_better[label] == "lower" else "viridis")
        if len(nodes) <= 48:
            ax.set_xticks(range(len(nodes)), nodes, fontsize=7, rotation=90)
            ax.set_yticks(range(len(nodes)), nodes, fontsize=7)
        fig.colorbar(im, ax=ax, label=v.link_units[label])
        title = f"Links: {label}" + (" (row sends to column)" if is_directed(pairs) else "")
        ax.set_title(title, fontsize=11)
        out.append((f"cluster-links-{len(out)}", title, fig))
    if v.scaling:
        fig, ax = figure.new("Collectives as nodes are added", "nodes", "us", logx=True)
        for key, pts in v.scaling.items():
            ax.plot([n for n, _ in pts], [y for _, y in pts], marker="o", label=key)
        ax.legend(fontsize=8)
        out.append(("cluster-scaling", "Collectives as nodes are added", fig))
    grow = {k: pts for k, pts in v.weak.items() if any(e is not None for _, _, e in pts)}
    if grow:
        title = "Across nodes: parallel efficiency against one node"
        fig, ax = figure.new(title, "nodes", "parallel efficiency %", logx=True)
        for key, weak in grow.items():
            ax.plot([n for n, _, _ in weak], [100 * (e or 0) for _, _, e in weak], marker="o",
                    label=key)
        ax.axhline(100, linestyle=":", color="grey", label="ideal")
        ax.legend(fontsize=8)
        out.append(("cluster-weak", title, fig))
    return out


def document(v: FleetVerdict, drain_argv: Callable[[str, str], list[str]]) -> dict[str, Any]:
    """The JSON report: the verdict and the drain commands."""
    return {**v.to_dict(), "flagged": v.flagged,
            "drain": [shlex.join(drain_argv(node, why)) for node, why in to_drain(v)]}
