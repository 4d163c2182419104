"""The dslash family's views: Grid's per-node summary table (best over the kernel variants),
the comparison point under each definition, the robustness, and every variant's figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprobe.families.dslash import bench
from hpcprobe.results.model import Metric, Run
from hpcprobe.views import figure
from hpcprobe.views.table import Block, Lines, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = (("wilson", 1, "Wilson"), *(("dwf", ls, f"DWF Ls={ls}") for ls in bench.DWF_LS))


def _summary(run: Run) -> Table | None:
    figures = run.select("dslash", "dslash")
    if not figures:
        return None
    p = figures[0].params
    cols = [c for c in COLUMNS if any((m.params["action"], m.params["ls"]) == c[:2]
                                      for m in figures)]
    t = Table(title=f"Dslash per node, Mflop/s (Grid's Benchmark_ITT count: "
                    f"{p['flops_per_site']} flops per site and slice, single precision), best "
                    f"over the kernel variants, median ±95% CI, {n_range(figures)}; one rank of "
                    f"{p['threads']} thread(s), no halo exchange")
    t.add_column("L", "right")
    for _, _, name in cols:
        t.add_column(name, "right")
    for l in sorted({m.params["l"] for m in figures}):  # noqa: E741
        t.add_row(str(l), *(_best_cell(figures, a, l, ls) for a, ls, _ in cols))
    return t


def _best_cell(figures: list[Metric], action: str, l: int, ls: int) -> str:  # noqa: E741
    m = bench.best(figures, action, l, ls)
    return "-" if m is None else f"{cell(m, 0)} ({m.params['isa']})"


def _variants(run: Run) -> Table | None:
    figures = run.select("dslash", "dslash")
    isas = list(dict.fromkeys(m.params["isa"] for m in figures))
    if len(isas) < 2:
        return None
    t = Table(title="Dslash per kernel variant, Mflop/s per node, median ±95% CI")
    for col in ("action", "L", "Ls", *isas, "robustness (worst/best)"):
        t.add_column(col, "left" if col == "action" else "right")
    robust = {(m.params["action"], m.params["l"], m.params["ls"]): m
              for m in run.select("dslash", "robustness")}
    keys = sorted({(m.params["action"], m.params["l"], m.params["ls"]) for m in figures})
    for key in keys:
        by_isa = {m.params["isa"]: m for m in figures
                  if (m.params["action"], m.params["l"], m.params["ls"]) == key}
        r = robust.get(key)
        t.add_row(key[0], str(key[1]), str(key[2]), *(cell(by_isa.get(i), 0) for i in isas),
                  f"{r.summary.median:.2f}" if r else "-")
    return t


def _comparison(run: Run) -> Lines | None:
    if not run.select("dslash", "dslash"):
        return None
    got = {m.params["definition"]: m for m in run.select("dslash", "comparison_point")}
    out = []
    for name, (ls, vols) in bench.DEFINITIONS.items():
        what = f"mean of DWF L={'+'.join(map(str, vols))}, Ls={ls}" if len(vols) > 1 else \
            f"DWF L={vols[0]}, Ls={ls}"
        m = got.get(name)
        out.append(f"Comparison point, {name} ({what}): " + (
            f"{m.summary.median:.0f} Mflop/s per node" if m else
            f"not measured (add --l {','.join(map(str, vols))})"))
    return Lines(out)


def _axpy(run: Run) -> Table | None:
    figures = sorted(run.select("dslash", "axpy"), key=lambda m: m.params["l"])
    if not figures:
        return None
    t = Table(title=f"Memory: a x + y over three fields of L^4 sites x {bench.AXPY_SITE_BYTES} B "
                    "(Grid's memory benchmark; STREAM triad kernel and byte counting), GB/s, "
                    f"median ±95% CI, {n_range(figures)}")
    for col in ("L", "bytes", "GB/s", "GB/s per node"):
        t.add_column(col, "right")
    for m in figures:
        t.add_row(str(m.params["l"]), str(m.params["size_bytes"]), cell(m, 2), cell(m, 2))
    return t


def tables(run: Run) -> list[Block]:
    return shown(_axpy(run), _summary(run), _comparison(run), _variants(run))


def _best_by_volume(run: Run) -> dict[str, figure.Points]:
    """Per column of the table, the best variant's figure at each L (Mflop/s per node)."""
    figures = run.select("dslash", "dslash")
    out: dict[str, figure.Points] = {}
    for action, ls, name in COLUMNS:
        pts = [(float(v), m) for v in sorted({m.params["l"] for m in figures})
               if (m := bench.best(figures, action, v, ls)) is not None]
        if pts:
            out[name] = pts
    return out


def volume_curve(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Dslash per node against the local volume L^4 (best variant)", "L",
                         "Mflop/s per node")
    return fig if figure.draw(ax, runs, _best_by_volume) else None


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("dslash-volume", "Dslash against the local volume",
                         volume_curve(runs)))
