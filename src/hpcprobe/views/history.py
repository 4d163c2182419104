"""A figure's history as the terminal shows it (per figure: the change points of each hardware
group's campaign medians, the nodes that changed together, then a row per host with its runs,
its latest value, a sparkline of the run medians and its change points; past FOLD hosts only
those that changed alone), as a JSON document and as an HTML page with plots."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpcprobe.history import changes as history
from hpcprobe.history.series import History, Series, by_label, differences_text
from hpcprobe.viewkit.table import Table
from hpcprobe.views.verdict import number

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Past this many hosts a figure's table shows only those that changed alone (--details: all)
FOLD = 20


def change_line(c: history.Change) -> str:
    """A change point in one line: since when, how much with its CI, p, the runs either side
    and what changed across it."""
    lo, hi = c.ratio_ci
    what = differences_text(c.differences)
    return (f"{c.after.created[:10]} {100 * c.change:+.1f}% [{100 * (lo - 1):+.1f}, "
            f"{100 * (hi - 1):+.1f}] p={c.p:.0e} ({c.runs_before} runs | {c.runs_after}): {what}")


def _status(s: Series) -> str:
    if s.changes:
        return "\n".join(change_line(c) for c in s.changes)
    if len(s.kept) < history.MIN_RUNS:
        return f"too few runs to search ({len(s.kept)} < {history.MIN_RUNS})"
    return "none"


def table(label: str, series: list[Series]) -> Table:
    s0 = series[0]
    left = sum(s.left_out() for s in series)
    t = Table(title=f"{label} ({s0.unit}, {s0.better} is better): {len(series)} series"
              + (f"; {left} disturbed run(s) left out of the search" if left else ""),
              narrow=True)
    for col, just in (("host", "left"), ("runs", "right"), ("from - to", "left"),
                      ("latest", "right"), ("history", "left"), ("change points", "left")):
        t.add_column(col, just)
    for s in series:
        used = s.undisturbed or range(len(s.runs))
        t.add_row(s.host, str(len(s.runs)), f"{s.created[0][:10]} - {s.created[-1][:10]}",
                  number(float(s.medians[-1])),
                  history.sparkline([float(s.medians[i]) for i in used][-24:]), _status(s))
    return t


def _causes(causes: list[tuple[str, str, int]], of: str) -> str:
    named = [f"{n} of {of} changed {what} {values}" for what, values, n in causes[:2]]
    return "; ".join(named) or "no configuration difference recorded"


def _with_group(f: history.FleetChange, changes: list[history.GroupChange]) -> bool:
    """Whether a fleet change is one of the groups' change points (the same way, in time)."""
    return any(g.group == f.group and (g.change.ratio > 1) == (f.change > 0) and
               history.within(g.change.after.created, f.date) for g in changes)


def fleet_table(label: str, changes: list[history.FleetChange]) -> Table:
    """The figure's fleet changes: nodes that changed the same way at about the same time."""
    t = Table(title=f"{label}: nodes that changed together (within {history.WINDOW_DAYS:g} "
                    "days, the same way)", narrow=True)
    for col, just in (("from", "left"), ("change", "right"), ("nodes", "right"),
                      ("which", "left"), ("what changed", "left")):
        t.add_column(col, just)
    for f in changes:
        which = ", ".join(f.nodes[:6]) + (" ..." if len(f.nodes) > 6 else "")
        t.add_row(f.date[:10], f"{100 * f.change:+.1f}%", f"{len(f.nodes)} of {f.of}", which,
                  _causes(f.causes, "them"))
    return t


def group_table(label: str, changes: list[history.GroupChange]) -> Table:
    """The change points of each hardware group's campaign medians, with how many of its
    nodes moved the same way and what changed on them across it."""
    t = Table(title=f"{label}: change points of each hardware group's campaign medians",
              narrow=True)
    for col, just in (("group", "left"), ("from", "left"), ("change [95% CI]", "right"),
                      ("nodes that moved", "right"), ("what changed on its nodes", "left")):
        t.add_column(col, just)
    for g in changes:
        c = g.change
        lo, hi = c.ratio_ci
        t.add_row(g.group, c.after.created[:10], f"{100 * c.change:+.1f}% [{100 * (lo - 1):+.1f}, "
                  f"{100 * (hi - 1):+.1f}] p={c.p:.0e}", f"{g.moved} of {g.hosts}",
                  _causes(g.causes, str(g.hosts)))
    return t


def group_line(label: str, g: history.GroupChange) -> str:
    """A group's change point in one line."""
    return (f"{g.group}: {label} {100 * g.change.change:+.1f}% since "
            f"{g.change.after.created[:10]} ({g.change.after.tag}), {g.moved} of {g.hosts} "
            f"nodes moved ({_causes(g.causes, str(g.hosts))})")


def _shown(found: History, label: str, series: list[Series], details: bool
           ) -> tuple[list[Series], str]:
    """The hosts a figure's table shows (past FOLD, unless details, those whose change
    points are their own: a fleet change of one node) and what the rest are."""
    if details or len(series) <= FOLD:
        return series, ""
    alone = {f.nodes[0] for f in found.fleets.get(label, []) if len(f.nodes) == 1}
    shown = [s for s in series if s.host in alone]
    changed = sum(1 for s in series if s.changes)
    return shown[:FOLD], (f"{len(series)} hosts: {len(alone)} changed alone"
                          + (f" (the first {FOLD} shown)" if len(alone) > FOLD else "")
                          + f", {changed - len(alone)} with others (above), "
                          f"{len(series) - changed} without a change point; --details for "
                          "every host")


def blocks(found: History, details: bool) -> list[Table | str]:
    """Per figure: its groups' change points, its nodes' changes together not seen in a
    group's, and its hosts' table (folded past FOLD hosts)."""
    out: list[Table | str] = []
    for label, ss in by_label(found.series).items():
        groups = found.group_changes.get(label, [])
        if groups:
            out.append(group_table(label, groups))
        together = [f for f in found.fleets.get(label, [])
                    if len(f.nodes) > 1 and not _with_group(f, groups)]
        if together:
            out.append(fleet_table(label, together))
        shown, rest = _shown(found, label, ss, details)
        if shown:
            out.append(table(label, shown))
        if rest:
            out.append(f"{label}: {rest}")
    return out


def show(found: History, out: Any, details: bool = False) -> None:
    from hpcprobe.views.terminal import rich_table

    for b in blocks(found, details):
        if isinstance(b, str):
            out.print(b, markup=False, highlight=False)
        else:
            out.print(rich_table(b))


def document(found: History) -> dict[str, Any]:
    return {"fleet": [{"figure": label, "group": f.group, "date": f.date, "change": f.change,
                       "nodes": f.nodes, "of": f.of, "causes": [{"what": w, "values": v, "nodes": n}
                                              for w, v, n in f.causes]}
                      for label, fs in found.fleets.items() for f in fs],
            "groups": [{"figure": label, "group": g.group, "hosts": g.hosts,
                        "moved": g.moved, **_change(g.change),
                        "causes": [{"what": w, "values": v, "hosts": n}
                                   for w, v, n in g.causes]}
                       for label, gs in found.group_changes.items() for g in gs],
            "hardware": found.groups,
            "series": [{
        "figure": s.label, "unit": s.unit, "better": s.better, "host": s.host,
        "params": s.params,
        "points": [{"run_id": p.run_id, "created": p.created, "tag": p.tag, "median": p.median,
                    "rel_ci95": p.rel_ci, "disturbed": p.disturbed} for p in s.points],
        "changes": [{**_change(c), "before": c.before.run_id, "after": c.after.run_id,
                     "differences": [{"what": k, "values": v} for k, v in c.differences]}
                    for c in s.changes]} for s in found.series],
            "judgements": [c.judgement(s.label, s.unit, s.better, s.host).to_dict()
                           for s in found.series for c in s.changes]}


def _change(c: history.Change) -> dict[str, Any]:
    return {"date": c.after.created, "ratio": c.ratio, "ratio_ci95": list(c.ratio_ci), "p": c.p,
            "runs_before": c.runs_before, "runs_after": c.runs_after,
            "level_before": c.level_before, "level_after": c.level_after}


#: Nodes drawn one by one in a figure's plot; past this many, the fleet's median and band only
DRAWN = 40


def plot(label: str, series: list[Series], found: History) -> Figure:
    """Each host's run medians over time (thin lines, up to DRAWN of them), per hardware group
    the median of its hosts on each day with the band of their middle half, and the change
    points (a node's: a dot; a group's or nodes' together: a dashed line)."""
    from hpcprobe.viewkit import figure

    s0 = series[0]
    fig, ax = figure.new(label, "run date", f"{label} ({s0.unit})")
    members: dict[str, list[Series]] = {}
    for s in series:
        members.setdefault(found.groups.get(s.host, ""), []).append(s)
        if len(series) <= DRAWN:
            used = s.used
            xs = [datetime.fromisoformat(p.created) for p in used]
            ax.plot(xs, [p.median for p in used], linewidth=0.8, alpha=0.6,
                    label=s.host if len(series) <= 8 else None)
            for c in s.changes:
                ax.plot([datetime.fromisoformat(c.after.created)], [c.after.median], "o",
                        color="black", markersize=4)
    for group, ss in members.items():
        if len(ss) > 1:
            _band(ax, ss, group if len(members) > 1 else "hosts'")
    for when in [g.change.after.created for g in found.group_changes.get(label, [])] + \
            [f.date for f in found.fleets.get(label, []) if len(f.nodes) > 1]:
        ax.axvline(datetime.fromisoformat(when), linestyle="--", color="red", linewidth=1)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return fig


def _band(ax: Any, series: list[Series], name: str) -> None:
    """The hosts' median on each day and the band of their middle half."""
    import numpy as np

    days = np.concatenate([np.asarray(s.created, dtype="U10")[s.kept] for s in series])
    if not len(days):
        return
    names, day = np.unique(days, return_inverse=True)  # each run's day, as a code in order
    values = np.concatenate([s.medians[s.kept] for s in series])
    order = np.lexsort((values, day))
    starts = np.flatnonzero(np.r_[True, np.diff(day[order]) != 0])
    rows = [(str(names[day[order[lo]]]), np.percentile(values[order[lo:hi]], (25, 50, 75)))
            for lo, hi in zip(starts, [*starts[1:], len(order)], strict=True)]
    xs = [datetime.fromisoformat(d) for d, _ in rows]
    q = np.array([r for _, r in rows])
    line = ax.plot(xs, q[:, 1], linewidth=1.5, label=f"{name} median")
    ax.fill_between(xs, q[:, 0], q[:, 2], alpha=0.2, color=line[0].get_color(),
                    label=f"{name} middle half")


def page(found: History, title: str) -> str:
    """The HTML page: per figure its tables (every host) and its plot."""
    from hpcprobe.views import html

    figures = [(f"history-{i}", label, plot(label, ss, found))
               for i, (label, ss) in enumerate(by_label(found.series).items())]
    return html.page(title, [b for b in blocks(found, True) if not isinstance(b, str)], figures)
