"""The scaling views: per family and mode, the rate at each rank count (median ±95 % CI), the
speedup against the first count with its bootstrap 95 % CI (strong: the same problem faster;
weak: the scaled speedup, a problem grown with the ranks), the parallel efficiency (speedup
over the ideal) and the ideal; a plot of the speedup against the ranks with the ideal line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hpcprobe.common import stats
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Point:
    ranks: int
    rate: Metric
    ideal: float  # ranks over the first count's
    speedup: float
    low: float  # bootstrap 95 % CI of the speedup
    high: float

    @property
    def efficiency(self) -> float:
        return self.speedup / self.ideal


def series(run: Run) -> dict[tuple[str, str, str], list[Point]]:
    """(family, mode, figure) -> its points by rank count, against the first count's rate."""
    groups: dict[tuple[str, str, str], list[Metric]] = {}
    for m in run.select("scale", "rate"):
        key = (m.params["family"], m.params["mode"], m.params["figure"])
        groups.setdefault(key, []).append(m)
    out = {}
    for key, ms in groups.items():
        ms.sort(key=lambda m: m.params["ranks"])
        base = next((m for m in ms if m.params["ranks"] == m.params["base_ranks"]), None)
        if base is None:  # the first count failed: no speedup to speak of
            continue
        pts = []
        for m in ms:
            lo, hi = stats.median_ratio_ci(base.samples, m.samples)
            pts.append(Point(m.params["ranks"], m, m.params["ranks"] / base.params["ranks"],
                             m.summary.median / base.summary.median, lo, hi))
        out[key] = pts
    return out


def _tables(run: Run) -> list[Block]:
    out: list[Block] = []
    for (family, mode, what), pts in series(run).items():
        speed = "speedup" if mode == "strong" else "scaled speedup"
        held = "the total problem held" if mode == "strong" else "the problem a rank held"
        t = Table(title=f"{family}: {mode} scaling of {what} ({held}), "
                        f"{pts[0].rate.unit} median ±95% CI, {n_range([p.rate for p in pts])}; "
                        f"{speed} "
                        f"against {pts[0].ranks} rank(s) with its bootstrap 95% CI; parallel "
                        "efficiency = speedup / ideal")
        for col in ("ranks", pts[0].rate.unit, speed, "95% CI", "ideal", "efficiency %"):
            t.add_column(col, "right")
        base = pts[0].rate.samples
        for p in pts:
            # a single sample on either side gives no interval: none is shown
            spread = min(len(base), len(p.rate.samples)) > 1
            t.add_row(str(p.ranks), cell(p.rate, 2), f"{p.speedup:.2f}",
                      f"[{p.low:.2f}, {p.high:.2f}]" if spread else "-", f"{p.ideal:g}",
                      f"{100 * p.efficiency:.0f}" + (
                          f" [{100 * p.low / p.ideal:.0f}, {100 * p.high / p.ideal:.0f}]"
                          if spread else ""))
        out.append(t)
    return out


def tables(run: Run) -> list[Block]:
    return shown(*_tables(run))


def speedup_plot(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Speedup against the first rank count, with the ideal", "ranks",
                         "speedup", logx=True, logy=True)
    drawn = False
    top = 1.0
    for run in runs:
        for (family, mode, _), pts in series(run).items():
            xs = [p.ranks for p in pts]
            ax.errorbar(xs, [p.speedup for p in pts],
                        yerr=[[p.speedup - p.low for p in pts], [p.high - p.speedup for p in pts]],
                        marker="o", capsize=3,
                        label=figure.label(run, len(runs) > 1, f"{family} {mode}"))
            top = max(top, max(p.ideal for p in pts))
            ax.plot(xs, [p.ideal for p in pts], linestyle=":", color="grey")
            drawn = True
    if not drawn:
        return None
    ax.plot([], [], linestyle=":", color="grey", label="ideal")
    ax.legend(fontsize=8)
    return fig


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("scale-speedup", "Speedup against the rank count", speedup_plot(runs)))
