"""The memory family's views: the working-set sweep, the STREAM table, the cache levels its
sweeps saw; its figures: bandwidth against working set, thread scaling."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.levels import levels_table
from hpcprobe.analysis.verdict import Headline, best
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import facts
from hpcprobe.native.kernels import KERNELS
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def bandwidth_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Bandwidth against working set per thread (STREAM counting)",
                   "working set per thread (bytes)", "GB/s", logx=True, logy=True)
    return fig if figure.draw(ax, runs, lambda run: figure.grouped(
        run.select("memory", "bandwidth"),
        lambda m: f"{m.params['kernel']} {m.params['threads']}T" if m.params.get("in_sweep")
        else None, lambda m: m.params["size_per_thread_bytes"]), cache_marks=True) else None


def thread_scaling(runs: list[Run]) -> Figure | None:
    fig = figure.blank()
    ax1, ax2 = fig.subplots(1, 2)

    def dram_triad(m: Metric) -> str | None:
        p = m.params
        ok = (p["kernel"], p["stores"], p["level"], p["placement"]) == \
            ("triad", "regular", "DRAM", "one-per-core") and p.get("phase") != "sweep"
        return "DRAM triad" if ok else None

    peak = figure.draw(ax1, runs, lambda run: figure.grouped(
        run.select("compute", "peak"),
        lambda m: f"peak {m.params['isa']}" if m.params.get("scaling") else None,
        lambda m: m.params["threads"]))
    triad = figure.draw(ax2, runs, lambda run: figure.grouped(run.select("memory", "bandwidth"),
                                                  dram_triad, lambda m: m.params["threads"]))
    if not (peak or triad):
        return None
    for ax, title, unit in ((ax1, "Peak compute by threads", "GFLOP/s"),
                            (ax2, "DRAM triad by threads", "GB/s")):
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("threads")
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def _sweep_table(bw: list[Metric]) -> Table | None:
    sweep = [m for m in bw if m.params.get("in_sweep")]
    if not sweep:
        return None
    threads = sorted({m.params["threads"] for m in sweep})
    kernels = sorted({m.params["kernel"] for m in sweep}, key=list(KERNELS).index)
    cells: dict[tuple[int, int, str], Metric] = {}
    level: dict[tuple[int, int], str] = {}
    for m in sweep:
        ws, t = m.params["size_per_thread_bytes"], m.params["threads"]
        cells[(ws, t, m.params["kernel"])] = m
        level[(ws, t)] = m.params["level"]
    t = Table(title=f"Working-set sweep, GB/s (STREAM counting), median ±95% CI, {n_range(sweep)}")
    t.add_column("size/thread", justify="right")
    for n in threads:
        t.add_column(f"level {n}T")
        for k in kernels:
            t.add_column(f"{k} {n}T", justify="right")
    for ws in sorted({key[0] for key in cells}):
        row = [format_bytes(ws)]
        for n in threads:
            row.append(level.get((ws, n), ""))
            row += [cell(cells.get((ws, n, k))) for k in kernels]
        t.add_row(*row)
    return t


def _stream_rows(bw: list[Metric]) -> tuple[list[str], dict[tuple[Any, ...], dict[str, Metric]]]:
    """The STREAM figures (not the sweep's) by row (placement, threads, CPUs, stores, size,
    level) and kernel, and the kernels measured in their order."""
    stream = [m for m in bw if m.params.get("phase") != "sweep"]
    kernels = [k for k in KERNELS if any(m.params["kernel"] == k for m in stream)]
    rows: dict[tuple[Any, ...], dict[str, Metric]] = defaultdict(dict)
    for m in stream:
        p = m.params
        key = (p["placement"], p["threads"], p["cpus"], p["stores"], p["size_bytes"]
               if p["phase"] == "single" else None, p["level"])
        rows[key][p["kernel"]] = m
    return kernels, rows


def _stream_table(bw: list[Metric], best: bool = False) -> Table | None:
    """STREAM's ladder, each kernel's median ±95 % CI; or (`best`) each one's best sample,
    the figure STREAM and likwid-bench print, in a table of its own so that each fits 100
    columns."""
    kernels, rows = _stream_rows(bw)
    if not rows:
        return None
    figures = [m for r in rows.values() for m in r.values()]
    t = Table(title="STREAM best, GB/s: each kernel's fastest sample, the figure STREAM and "
                    "likwid-bench print" if best else
                    f"STREAM, GB/s (STREAM counting; write-allocate corrected in the stored "
                    f"bandwidth_write_allocate), median ±95% CI, {n_range(figures)}")
    for col in ("threads, placement, CPUs", "stores", "level"):
        t.add_column(col)
    for k in kernels:
        t.add_column(f"{k} best" if best else k, justify="right")
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[3])):
        placement, threads, cpus, stores, size, lvl = key
        label = lvl if size is None else f"{lvl} {format_bytes(size)}"
        got = [rows[key].get(k) for k in kernels]
        t.add_row(f"{threads} {placement} {cpus}", stores, label,
                  *(("-" if m is None else f"{m.summary.max:.1f}") if best else cell(m)
                    for m in got))
    if not best:
        t.caption = ("Every kernel, copy included, ran with the store type of its row: "
                     "`regular` stores allocate each line written, `nt` (streaming) bypass the "
                     "caches. McCalpin STREAM built with gcc at -O2/-O3 turns copy into memcpy, "
                     "which streams (nt) at DRAM sizes: compare its copy with the nt row.")
    return t


def _against_ceiling(run: Run, bw: list[Metric]) -> Lines | None:
    """The DRAM triad on the most threads (the better store type) as a share of the DRAM
    ceiling the DIMMs give, or why there is no ceiling to judge it by."""
    dram = [m for m in bw if m.params.get("level") == "DRAM" and m.params["kernel"] == "triad"]
    if not dram:
        return None
    most = max(m.params["threads"] for m in dram)
    best = max((m for m in dram if m.params["threads"] == most), key=lambda m: m.summary.median)
    ceil = facts.dram_ceiling(run, best)
    if ceil is None:
        return None
    what = (f"DRAM triad on {most} thread(s), {best.params['stores']} stores: "
            f"{best.summary.median:.1f} GB/s")
    if ceil.value is None:
        return Lines([f"{what}; no DRAM ceiling to judge it by: {ceil.source}"])
    pct = 100.0 * best.summary.median / ceil.value
    return Lines([f"{what} = {pct:.1f} % of the DRAM ceiling {ceil.value:.1f} GB/s" +
                  (" (ABOVE it: the ceiling or the figure is wrong)" if pct > 100.0 else "")])


def _dram_triad(run: Run, threads: int | None) -> Metric | None:
    """The DRAM triad on `threads` (None: the most) one per core, at the largest size, the
    better store type."""
    dram = [m for m in run.select("memory", "bandwidth") if m.params.get("level") == "DRAM"
            and m.params["kernel"] == "triad" and m.params["placement"] == "one-per-core"]
    if threads is None and dram:
        threads = max(m.params["threads"] for m in dram)
    dram = [m for m in dram if m.params["threads"] == threads]
    if not dram:
        return None
    size = max(m.params["size_bytes"] for m in dram)
    return best([m for m in dram if m.params["size_bytes"] == size])


def headlines(run: Run) -> list[Headline]:
    """The DRAM triad on one core and on all cores (one per core; the DIMMs bound it)."""
    out = []
    one, most = _dram_triad(run, 1), _dram_triad(run, None)
    if one is not None:
        out.append(Headline("memory.dram_triad_1core", "DRAM triad, 1 core", one))
    if most is not None and most is not one:
        out.append(Headline("memory.dram_triad_all", f"DRAM triad, {most.params['threads']} "
                            "cores", most))
    return out


def tables(run: Run) -> list[Block]:
    bw = run.select("memory", "bandwidth")
    return shown(_sweep_table(bw), _stream_table(bw), _stream_table(bw, best=True),
                 levels_table(run, "memory"),
                 _against_ceiling(run, bw))


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("bandwidth-sweep", "Bandwidth against working set",
                         bandwidth_sweep(runs)),
                        ("thread-scaling", "Thread scaling", thread_scaling(runs)))
