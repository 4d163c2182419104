"""A figure's history as the terminal shows it (one table per figure: a row per host with its
runs, its latest value, a sparkline of the run medians and its change points) and as a JSON
document."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis import history
from hpcprobe.views.table import Block, Table
from hpcprobe.views.verdict import number

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Configuration differences named per change point, at most
DIFFERENCES = 3


@dataclass
class Series:
    """One host's series of one figure (its params fixed), oldest first, and its change
    points once searched."""

    label: str
    unit: str
    better: str
    host: str
    params: dict[str, Any]
    points: list[history.Point]
    changes: list[history.Change] = field(default_factory=list)

    @property
    def used(self) -> list[history.Point]:
        return [p for p in self.points if p.disturbed is None]


def by_label(series: list[Series]) -> dict[str, list[Series]]:
    """The series of each figure, in the order they come."""
    out: dict[str, list[Series]] = {}
    for s in series:
        out.setdefault(s.label, []).append(s)
    return out


def differences_text(differences: list[tuple[str, list[str]]]) -> str:
    """The first DIFFERENCES configuration differences in a few words."""
    return "; ".join(f"{label} {' -> '.join(values)}" for label, values in
                     differences[:DIFFERENCES]) or "no configuration difference recorded"


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
    if len(s.used) < history.MIN_RUNS:
        return f"too few runs to search ({len(s.used)} < {history.MIN_RUNS})"
    return "none"


def table(label: str, series: list[Series]) -> Table:
    s0 = series[0]
    left = sum(len(s.points) - len(s.used) for s in series)
    t = Table(title=f"{label} ({s0.unit}, {s0.better} is better): {len(series)} series"
              + (f"; {left} disturbed run(s) left out of the search" if left else ""),
              narrow=True)
    for col, just in (("host", "left"), ("runs", "right"), ("from - to", "left"),
                      ("latest", "right"), ("history", "left"), ("change points", "left")):
        t.add_column(col, just)
    for s in series:
        used = s.used or s.points
        t.add_row(s.host, str(len(s.points)), f"{s.points[0].created[:10]} - "
                  f"{s.points[-1].created[:10]}", number(s.points[-1].median),
                  history.sparkline([p.median for p in used][-24:]), _status(s))
    return t


def _causes(f: history.FleetChange) -> str:
    named = [f"{n} of them changed {what} {values}" for what, values, n in f.causes[:2]]
    return "; ".join(named) or "no configuration difference recorded"


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
                  _causes(f))
    return t


def show(series: list[Series], fleets: dict[str, list[history.FleetChange]], out: Any) -> None:
    """Per figure: the nodes that changed together (where several hosts are shown and any
    changed), then each host's series."""
    from hpcprobe.views.terminal import rich_table

    for label, ss in by_label(series).items():
        if fleets.get(label):
            out.print(rich_table(fleet_table(label, fleets[label])))
        out.print(rich_table(table(label, ss)))


def document(series: list[Series], fleets: dict[str, list[history.FleetChange]]
             ) -> dict[str, Any]:
    return {"fleet": [{"figure": label, "date": f.date, "change": f.change, "nodes": f.nodes,
                       "of": f.of, "causes": [{"what": w, "values": v, "nodes": n}
                                              for w, v, n in f.causes]}
                      for label, fs in fleets.items() for f in fs],
            "series": [{
        "figure": s.label, "unit": s.unit, "better": s.better, "host": s.host,
        "params": s.params,
        "points": [{"run_id": p.run_id, "created": p.created, "tag": p.tag, "median": p.median,
                    "rel_ci95": p.rel_ci, "disturbed": p.disturbed} for p in s.points],
        "changes": [{"before": c.before.run_id, "after": c.after.run_id,
                     "date": c.after.created, "ratio": c.ratio, "ratio_ci95": list(c.ratio_ci),
                     "p": c.p, "runs_before": c.runs_before, "runs_after": c.runs_after,
                     "level_before": c.level_before, "level_after": c.level_after,
                     "differences": [{"what": k, "values": v} for k, v in c.differences]}
                    for c in s.changes]} for s in series]}


#: Nodes drawn one by one in a figure's plot; past this many, the fleet's median and band only
DRAWN = 40


def plot(label: str, series: list[Series], fleet: list[history.FleetChange]) -> Figure:
    """Each host's run medians over time (thin lines, up to DRAWN of them), the median of the
    hosts on each day with the band of their middle half, and the change points (a node's:
    a dot; the fleet's: a dashed line)."""
    import numpy as np

    from hpcprobe.views import figure

    s0 = series[0]
    fig, ax = figure.new(label, "run date", f"{label} ({s0.unit})")
    by_day: dict[str, list[float]] = {}
    for s in series:
        for p in s.used:
            by_day.setdefault(p.created[:10], []).append(p.median)
        if len(series) <= DRAWN:
            xs = [datetime.fromisoformat(p.created) for p in s.used]
            ax.plot(xs, [p.median for p in s.used], linewidth=0.8, alpha=0.6,
                    label=s.host if len(series) <= 8 else None)
            for c in s.changes:
                ax.plot([datetime.fromisoformat(c.after.created)], [c.after.median], "o",
                        color="black", markersize=4)
    days = sorted(by_day)
    xs = [datetime.fromisoformat(d) for d in days]
    q = np.array([np.percentile(by_day[d], (25, 50, 75)) for d in days])
    if len(series) > 1 and len(days):
        ax.fill_between(xs, q[:, 0], q[:, 2], alpha=0.2, color="grey",
                        label="hosts' middle half")
        ax.plot(xs, q[:, 1], color="black", linewidth=1.5, label="hosts' median")
    for f in fleet:
        ax.axvline(datetime.fromisoformat(f.date), linestyle="--", color="red", linewidth=1)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.autofmt_xdate()
    return fig


def page(series: list[Series], fleets: dict[str, list[history.FleetChange]], title: str
         ) -> str:
    """The HTML page: per figure its fleet changes and host table, and its plot."""
    from hpcprobe.views import html

    blocks: list[Block] = []
    figures = []
    for i, (label, ss) in enumerate(by_label(series).items()):
        if fleets.get(label):
            blocks.append(fleet_table(label, fleets[label]))
        blocks.append(table(label, ss))
        figures.append((f"history-{i}", label, plot(label, ss, fleets.get(label, []))))
    return html.page(title, blocks, figures)
