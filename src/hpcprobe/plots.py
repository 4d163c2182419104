"""The report's figures, drawn with matplotlib from one or more runs (curves of several runs are
overlaid, one colour per run). Each function returns a figure, or None when the runs hold no
such data."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered to PNG

from matplotlib.figure import Figure  # noqa: E402

from .results import Metric, Run  # noqa: E402


def _metrics(run: Run, benchmark: str, name: str) -> list[Metric]:
    return [m for m in run.metrics if m.benchmark == benchmark and m.name == name]


def _label(run: Run, several: bool, what: str) -> str:
    return f"{run.tag or run.run_id}: {what}" if several else what


def _fig(title: str, xlabel: str, ylabel: str, logx: bool = False,
         logy: bool = False) -> tuple[Figure, Any]:
    fig = Figure(figsize=(9, 4.8), dpi=100)
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


def bandwidth_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Bandwidth against working set per thread (STREAM counting)",
                   "working set per thread (bytes)", "GB/s", logx=True, logy=True)
    drawn = False
    for run in runs:
        curves: dict[tuple[str, int], list[tuple[float, Metric]]] = defaultdict(list)
        for m in _metrics(run, "memory", "bandwidth"):
            if m.params.get("in_sweep"):
                p = m.params
                curves[(p["kernel"], p["threads"])].append((p["size_per_thread_bytes"], m))
        for (kernel, threads), pts in sorted(curves.items()):
            _curve(ax, pts, _label(run, len(runs) > 1, f"{kernel} {threads}T"))
            drawn = True
        if curves and run is runs[0]:
            _cache_marks(ax, run, 1)
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return fig


def thread_scaling(runs: list[Run]) -> Figure | None:
    fig = Figure(figsize=(9, 4.8), dpi=100)
    ax1, ax2 = fig.subplots(1, 2)
    drawn = False
    for run in runs:
        peak = [(m.params["threads"], m) for m in _metrics(run, "compute", "peak")
                if m.params.get("scaling")]
        triad = [(m.params["threads"], m) for m in _metrics(run, "memory", "bandwidth")
                 if m.params["kernel"] == "triad" and m.params["stores"] == "regular"
                 and m.params["level"] == "DRAM" and m.params["placement"] == "one-per-core"
                 and m.params.get("phase") != "sweep"]
        if len(peak) > 1:
            _curve(ax1, peak, _label(run, len(runs) > 1, "peak " + peak[0][1].params["isa"]))
            drawn = True
        if len(triad) > 1:
            _curve(ax2, triad, _label(run, len(runs) > 1, "DRAM triad"))
            drawn = True
    if not drawn:
        return None
    ax1.set_title("Peak compute by threads", fontsize=11)
    ax1.set_xlabel("threads")
    ax1.set_ylabel("GFLOP/s")
    ax2.set_title("DRAM triad by threads", fontsize=11)
    ax2.set_xlabel("threads")
    ax2.set_ylabel("GB/s")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def latency_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Memory latency against working set (pointer chase)", "working set (bytes)",
                   "ns per load", logx=True, logy=True)
    drawn = False
    for run in runs:
        curves: dict[str, list[tuple[float, Metric]]] = defaultdict(list)
        for m in _metrics(run, "latency", "latency"):
            curves[m.params["page_size"]].append((m.params["size_bytes"], m))
        for page, pts in sorted(curves.items()):
            _curve(ax, pts, _label(run, len(runs) > 1, f"{page} pages"))
            drawn = True
        if curves and run is runs[0]:
            _cache_marks(ax, run, 1)
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return fig


def _matrix(run: Run, benchmark: str, name: str, key: Callable[[Metric], tuple[Any, Any]],
            title: str, unit: str) -> Figure | None:
    cells = {key(m): m.summary.median for m in _metrics(run, benchmark, name)}
    if not cells:
        return None
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    data = [[cells.get((r, c), float("nan")) for c in cols] for r in rows]
    fig = Figure(figsize=(6, 5), dpi=100)
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


def numa_latency(run: Run) -> Figure | None:
    return _matrix(run, "numa", "latency", lambda m: (m.params["cpu_domain"],
                                                      m.params["memory_domain"]),
                   "NUMA latency: CPU domain (rows) x memory domain", "ns")


def numa_bandwidth(run: Run) -> Figure | None:
    return _matrix(run, "numa", "bandwidth", lambda m: (m.params["cpu_domain"],
                                                        m.params["memory_domain"]),
                   "NUMA read bandwidth: CPU domain (rows) x memory domain", "GB/s")


def core_to_core(run: Run) -> Figure | None:
    return _matrix(run, "latency", "core_to_core", lambda m: (m.params["cpu_a"],
                                                              m.params["cpu_b"]),
                   "Core-to-core latency, one way", "ns")


def clock_curve(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Core clock against active cores", "active cores", "GHz")
    drawn = False
    for run in runs:
        curves: dict[str, list[tuple[float, Metric]]] = defaultdict(list)
        for m in _metrics(run, "frequency", "clock"):
            curves[m.params["load"]].append((m.params["active_cores"], m))
        for load, pts in curves.items():
            _curve(ax, pts, _label(run, len(runs) > 1, f"{load} load"))
            drawn = True
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return fig


def roofline(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Roofline (all cores)", "arithmetic intensity (FLOP/B)", "GFLOP/s",
                   logy=True)
    ax.set_xscale("log", base=2)
    drawn = False
    for run in runs:
        compute = {m.params["precision"]: m.summary.median
                   for m in _metrics(run, "roofline", "compute_ceiling")}
        for m in _metrics(run, "roofline", "bandwidth_ceiling"):
            bw = m.summary.median
            top = max(compute.values(), default=0.0)
            if not top:
                continue
            ai = sorted([2.0 ** k for k in range(-6, 9)] + [top / bw])  # bend at the ridge
            ax.plot(ai, [min(top, a * bw) for a in ai],
                    label=_label(run, len(runs) > 1, f"{m.params['level']} {bw:.0f} GB/s"))
            drawn = True
        for precision, peak in compute.items():
            ax.axhline(peak, linestyle="--", linewidth=1, color="black")
            ax.text(2.0 ** -6, peak, f" {precision.upper()} peak {peak:.0f}", va="bottom",
                    fontsize=8)
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return fig


def mpi_point_to_point(runs: list[Run]) -> Figure | None:
    fig = Figure(figsize=(9, 4.8), dpi=100)
    ax1, ax2 = fig.subplots(1, 2)
    drawn = False
    for run in runs:
        for name, ax in (("latency", ax1), ("bandwidth", ax2), ("bibw", ax2)):
            curves: dict[str, list[tuple[float, Metric]]] = defaultdict(list)
            for m in _metrics(run, "mpi", name):
                if m.params["size_bytes"] > 0:
                    curves[f"{name} {m.params.get('pair') or ''}".strip()].append(
                        (m.params["size_bytes"], m))
            for what, pts in curves.items():
                _curve(ax, pts, _label(run, len(runs) > 1, what))
                drawn = True
    if not drawn:
        return None
    for ax, title, unit in ((ax1, "MPI latency (one way)", "us"),
                            (ax2, "MPI bandwidth (window 64)", "MB/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def mpi_collectives(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("MPI collectives: mean latency over ranks", "message size (bytes)", "us",
                   logx=True, logy=True)
    drawn = False
    for run in runs:
        curves: dict[tuple[str, int], list[tuple[float, Metric]]] = defaultdict(list)
        for name in ("allreduce", "bcast", "alltoall"):
            for m in _metrics(run, "mpi", name):
                curves[(name, m.params["ranks"])].append((m.params["size_bytes"], m))
        for (name, ranks), pts in sorted(curves.items()):
            _curve(ax, pts, _label(run, len(runs) > 1, f"{name} {ranks} ranks"))
            drawn = True
    if not drawn:
        return None
    ax.legend(fontsize=7)
    return fig


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    """(slug, title, figure) of every plot the runs have data for, in report order; heat maps
    per run."""
    out: list[tuple[str, str, Figure | None]] = [
        ("bandwidth-sweep", "Bandwidth against working set", bandwidth_sweep(runs)),
        ("thread-scaling", "Thread scaling", thread_scaling(runs)),
        ("latency-sweep", "Latency against working set", latency_sweep(runs)),
    ]
    for run in runs:
        tag = run.tag or run.run_id
        out += [(f"numa-latency-{run.run_id}", f"NUMA latency matrix ({tag})", numa_latency(run)),
                (f"numa-bandwidth-{run.run_id}", f"NUMA bandwidth matrix ({tag})",
                 numa_bandwidth(run)),
                (f"core-to-core-{run.run_id}", f"Core-to-core latency ({tag})",
                 core_to_core(run))]
    out += [("clock-curve", "Clock curve", clock_curve(runs)),
            ("roofline", "Roofline", roofline(runs)),
            ("mpi-point-to-point", "MPI latency and bandwidth", mpi_point_to_point(runs)),
            ("mpi-collectives", "MPI collectives", mpi_collectives(runs))]
    return [(slug, title, fig) for slug, title, fig in out if fig is not None]
