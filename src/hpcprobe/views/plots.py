"""The report's figures, drawn with matplotlib from one or more runs (curves of several runs are
overlaid, one colour per run). Each function returns a figure, or None when the runs hold no
such data."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

# Figure objects, not pyplot: no global state and no display backend; savefig renders PNG
from matplotlib.figure import Figure

from hpcprobe.results.model import Metric, Run


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


Points = list[tuple[float, Metric]]


def _draw(ax: Any, runs: list[Run], groups: Callable[[Run], dict[str, Points]],
          cache_marks: bool = False) -> bool:
    """One curve per group of each run (labelled with the run where there are several);
    whether anything was drawn. Cache sizes of the first run are marked where asked."""
    drawn = False
    for run in runs:
        curves = groups(run)
        for what, pts in sorted(curves.items()):
            _curve(ax, pts, _label(run, len(runs) > 1, what))
            drawn = True
        if curves and cache_marks and run is runs[0]:
            _cache_marks(ax, run, 1)
    if drawn:
        ax.legend(fontsize=8)
    return drawn


def _grouped(metrics: list[Metric], key: Callable[[Metric], str | None],
             x: Callable[[Metric], float]) -> dict[str, Points]:
    out: dict[str, Points] = defaultdict(list)
    for m in metrics:
        k = key(m)
        if k is not None:
            out[k].append((x(m), m))
    return out


def bandwidth_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Bandwidth against working set per thread (STREAM counting)",
                   "working set per thread (bytes)", "GB/s", logx=True, logy=True)
    return fig if _draw(ax, runs, lambda run: _grouped(
        run.select("memory", "bandwidth"),
        lambda m: f"{m.params['kernel']} {m.params['threads']}T" if m.params.get("in_sweep")
        else None, lambda m: m.params["size_per_thread_bytes"]), cache_marks=True) else None


def thread_scaling(runs: list[Run]) -> Figure | None:
    fig = Figure(figsize=(9, 4.8), dpi=100)
    ax1, ax2 = fig.subplots(1, 2)

    def dram_triad(m: Metric) -> str | None:
        p = m.params
        ok = (p["kernel"], p["stores"], p["level"], p["placement"]) == \
            ("triad", "regular", "DRAM", "one-per-core") and p.get("phase") != "sweep"
        return "DRAM triad" if ok else None

    peak = _draw(ax1, runs, lambda run: _grouped(
        run.select("compute", "peak"),
        lambda m: f"peak {m.params['isa']}" if m.params.get("scaling") else None,
        lambda m: m.params["threads"]))
    triad = _draw(ax2, runs, lambda run: _grouped(run.select("memory", "bandwidth"),
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


def latency_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Memory latency against working set (pointer chase)", "working set (bytes)",
                   "ns per load", logx=True, logy=True)
    return fig if _draw(ax, runs, lambda run: _grouped(
        run.select("latency", "latency"), lambda m: f"{m.params['page_size']} pages",
        lambda m: m.params["size_bytes"]), cache_marks=True) else None


def _matrix(run: Run, benchmark: str, name: str, key: Callable[[Metric], tuple[Any, Any]],
            title: str, unit: str) -> Figure | None:
    cells = {key(m): m.summary.median for m in run.select(benchmark, name)}
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
    return fig if _draw(ax, runs, lambda run: _grouped(
        run.select("frequency", "clock"), lambda m: f"{m.params['load']} load",
        lambda m: m.params["active_cores"])) else None


def roofline(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("Roofline (all cores)", "arithmetic intensity (FLOP/B)", "GFLOP/s",
                   logy=True)
    ax.set_xscale("log", base=2)
    drawn = False
    for run in runs:
        compute = {m.params["precision"]: m.summary.median
                   for m in run.select("roofline", "compute_ceiling")}
        for m in run.select("roofline", "bandwidth_ceiling"):
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

    def sized(names: tuple[str, ...]) -> Callable[[Run], dict[str, Points]]:
        return lambda run: _grouped(
            [m for m in run.metrics if m.benchmark == "mpi" and m.name in names],
            lambda m: f"{m.name} {m.params.get('pair') or ''}".strip()
            if m.params["size_bytes"] > 0 else None, lambda m: m.params["size_bytes"])

    if not (_draw(ax1, runs, sized(("latency",))) | _draw(ax2, runs, sized(("bandwidth",
                                                                            "bibw")))):
        return None
    for ax, title, unit in ((ax1, "MPI latency (one way)", "us"),
                            (ax2, "MPI bandwidth (window 64)", "MB/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def mpi_collectives(runs: list[Run]) -> Figure | None:
    fig, ax = _fig("MPI collectives: mean latency over ranks", "message size (bytes)", "us",
                   logx=True, logy=True)
    return fig if _draw(ax, runs, lambda run: _grouped(
        [m for m in run.metrics if m.benchmark == "mpi"
         and m.name in ("allreduce", "bcast", "alltoall")],
        lambda m: f"{m.name} {m.params['ranks']} ranks",
        lambda m: m.params["size_bytes"])) else None


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
