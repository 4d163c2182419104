"""The view toolkit for figures: matplotlib Figure objects (no pyplot state, no display), median
curves with their 95 % CI, cache-size marks, heat maps; several runs overlaid, one colour each."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcprobe.results.model import Metric, Run

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not at start-up
    from matplotlib.figure import Figure

#: A family's figures of one or more runs: (slug, title, figure) for each it has data for.
Figures = Callable[[list[Run]], list[tuple[str, str, "Figure"]]]


def blank(figsize: tuple[float, float] = (9, 4.8)) -> Figure:
    """An empty figure: a Figure object, not pyplot (no global state, no display backend;
    savefig renders PNG)."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=100)


def label(run: Run, several: bool, what: str) -> str:
    return f"{run.tag or run.run_id}: {what}" if several else what


def new(title: str, xlabel: str, ylabel: str, logx: bool = False,
         logy: bool = False) -> tuple[Figure, Any]:
    fig = blank()
    ax = fig.subplots()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _curve(ax: Any, points: list[tuple[float, Metric]], label: str, **kw: Any) -> None:
    """Median line with the 95 % CI of the median as error bars."""
    points = sorted(points, key=lambda p: p[0])
    xs = [x for x, _ in points]
    med = [m.summary.median for _, m in points]
    lo = [m.summary.median - m.summary.ci95[0] for _, m in points]
    hi = [m.summary.ci95[1] - m.summary.median for _, m in points]
    ax.errorbar(xs, med, yerr=[lo, hi], marker="o", markersize=3, capsize=2, label=label, **kw)


def _cache_marks(ax: Any, run: Run, threads: int) -> None:
    """Dotted vertical lines at each cache level's capacity per thread."""
    for c in run.topology.get("caches", []):
        per = c["size_bytes"] / max(1, min(threads, c.get("pus_per_instance", 1)))
        ax.axvline(per, linestyle=":", color="grey", linewidth=1)
        ax.text(per, 0.98, f" L{c['level']}", transform=ax.get_xaxis_transform(), fontsize=8,
                va="top", color="grey")


Points = list[tuple[float, Metric]]


def draw(ax: Any, runs: list[Run], groups: Callable[[Run], dict[str, Points]],
          cache_marks: bool = False) -> bool:
    """One curve per group of each run (labelled with the run where there are several);
    whether anything was drawn. Cache sizes of the first run are marked where asked."""
    drawn = False
    for run in runs:
        curves = groups(run)
        for what, pts in sorted(curves.items()):
            _curve(ax, pts, label(run, len(runs) > 1, what))
            drawn = True
        if curves and cache_marks and run is runs[0]:
            _cache_marks(ax, run, 1)
    if drawn:
        ax.legend(fontsize=8)
    return drawn


def grouped(metrics: list[Metric], key: Callable[[Metric], str | None],
             x: Callable[[Metric], float]) -> dict[str, Points]:
    out: dict[str, Points] = defaultdict(list)
    for m in metrics:
        k = key(m)
        if k is not None:
            out[k].append((x(m), m))
    return out


def matrix(run: Run, benchmark: str, name: str, key: Callable[[Metric], tuple[Any, Any]],
            title: str, unit: str) -> Figure | None:
    cells = {key(m): m.summary.median for m in run.select(benchmark, name)}
    if not cells:
        return None
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    data = [[cells.get((r, c), float("nan")) for c in cols] for r in rows]
    fig = blank((6, 5))
    ax = fig.subplots()
    im = ax.imshow(data, cmap="viridis")
    ax.set_xticks(range(len(cols)), [str(c) for c in cols])
    ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v == v:  # not NaN
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(im, ax=ax, label=unit)
    ax.set_title(f"{title} ({run.tag or run.run_id})", fontsize=11)
    return fig


def named(*items: tuple[str, str, Figure | None]) -> list[tuple[str, str, Figure]]:
    """The (slug, title, figure) items that have a figure."""
    return [(slug, title, fig) for slug, title, fig in items if fig is not None]


def per_run(runs: list[Run], slug: str, title: str,
            draw_one: Callable[[Run], Figure | None]) -> list[tuple[str, str, Figure]]:
    """One figure per run (heat maps do not overlay)."""
    return named(*[(f"{slug}-{r.run_id}", f"{title} ({r.tag or r.run_id})", draw_one(r))
                   for r in runs])
