"""The mpi family's views: its figures listed in the layout of the OSU micro-benchmarks' output;
point-to-point and collective curves."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.verdict import Headline
from hpcprobe.common.units import format_bytes
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HEADERS = {
    "latency": "Latency (us)", "bandwidth": "Bandwidth (MB/s)", "bibw": "Bandwidth (MB/s)",
    "message_rate": "Messages/s", "allreduce": "Avg Latency(us)", "bcast": "Avg Latency(us)",
    "alltoall": "Avg Latency(us)", "barrier": "Avg Latency(us)", "halo": "MB/s per rank",
}
TITLES = {
    "latency": "Latency Test", "bandwidth": "Bandwidth Test", "bibw": "Bi-Directional "
    "Bandwidth Test", "message_rate": "Multiple Bandwidth / Message Rate Test",
    "allreduce": "Allreduce Latency Test", "bcast": "Broadcast Latency Test",
    "alltoall": "All-to-All Personalized Exchange Latency Test",
    "barrier": "Barrier Latency Test", "halo": "4-D Halo Exchange (Grid-style)",
}


def layout_key(p: dict[str, Any]) -> tuple[Any, ...]:
    return p["ranks"], p["placement"], p.get("pair"), p["cpus"], p["hosts"]


def layout(p: dict[str, Any], where: bool = True) -> str:
    """"2 ranks, one-per-core, pair intra-l3", with the CPUs and hosts where asked."""
    return (f"{p['ranks']} ranks, {p['placement']}" + (f", pair {p['pair']}" if p.get("pair")
                                                       else "")
            + (f", CPUs {p['cpus']}" + (f", hosts {p['hosts']}" if p["hosts"] else "")
               if where else ""))


def render(metrics: list[Metric]) -> str:
    """One OSU-style block per test and rank layout: sizes down, median and its CI, n."""
    by: dict[tuple[Any, ...], dict[str, Metric]] = defaultdict(dict)
    for metric in metrics:
        if metric.benchmark == "mpi":
            by[(metric.params.get("size_bytes"), *layout_key(metric.params))][metric.name] = \
                metric
    blocks: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for key in sorted(by, key=lambda k: (str(k[1:]), k[0])):
        names = by[key]
        for test in TITLES:
            m = names.get(test)
            if m is None:
                continue
            p, s = m.params, m.summary
            ci = 100 * s.rel_ci_halfwidth
            if test == "halo":
                bidir = names["halo_bidir"].summary.median
                row = (f"{p['l']:<4d} {p['size_bytes']:>12d} {s.median:14.2f} {bidir:14.2f} "
                       f"{ci:6.1f} {s.n:4d}")
            elif test in ("allreduce", "bcast", "alltoall", "barrier"):
                row = (f"{p['size_bytes']:<12d} {s.median:16.2f} "
                       f"{names[test + '_rank_min'].summary.median:12.2f} "
                       f"{names[test + '_rank_max'].summary.median:12.2f} {ci:6.1f} {s.n:4d}")
            elif test == "message_rate":
                row = (f"{p['size_bytes']:<12d} {s.median * p['size_bytes'] / 1e6:14.2f} "
                       f"{s.median:16.2f} {ci:6.1f} {s.n:4d}")
            else:
                row = f"{p['size_bytes']:<12d} {s.median:18.2f} {ci:6.1f} {s.n:4d}"
            blocks[(test, *layout_key(p))].append(row)
    out = []
    order = list(TITLES)
    for (test, ranks, placement, pair, cpus, hosts), rows in sorted(
            blocks.items(), key=lambda b: (str(b[0][1:]), order.index(b[0][0]))):
        where = layout({"ranks": ranks, "placement": placement, "pair": pair, "cpus": cpus,
                        "hosts": hosts})
        out.append(f"# hpcprobe MPI {TITLES[test]} ({where}); median of the samples, ±CI %")
        if test == "halo":
            out.append(f"# {'L':<4s} {'face bytes':>12s} {'uni MB/s':>14s} {'bidir MB/s':>14s} "
                       f"{'±CI%':>6s} {'n':>4s}")
        elif test in ("allreduce", "bcast", "alltoall", "barrier"):
            out.append(f"# {'Size':<10s} {HEADERS[test]:>16s} {'Min (us)':>12s} "
                       f"{'Max (us)':>12s} {'±CI%':>6s} {'n':>4s}")
        elif test == "message_rate":
            out.append(f"# {'Size':<10s} {'MB/s':>14s} {'Messages/s':>16s} {'±CI%':>6s} "
                       f"{'n':>4s}")
        else:
            out.append(f"# {'Size':<10s} {HEADERS[test]:>18s} {'±CI%':>6s} {'n':>4s}")
        out += rows
        out.append("")
    return "\n".join(out)


def mpi_point_to_point(runs: list[Run]) -> Figure | None:
    fig = figure.blank()
    ax1, ax2 = fig.subplots(1, 2)

    def sized(names: tuple[str, ...]) -> Callable[[Run], dict[str, figure.Points]]:
        return lambda run: figure.grouped(
            [m for m in run.metrics if m.benchmark == "mpi" and m.name in names],
            lambda m: f"{m.name} {m.params.get('pair') or ''}".strip()
            if m.params["size_bytes"] > 0 else None, lambda m: m.params["size_bytes"])

    if not (figure.draw(ax1, runs, sized(("latency",))) | figure.draw(ax2, runs, sized(("bandwidth",
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
    fig, ax = figure.new("MPI collectives: mean latency over ranks", "message size (bytes)", "us",
                   logx=True, logy=True)
    return fig if figure.draw(ax, runs, lambda run: figure.grouped(
        [m for m in run.metrics if m.benchmark == "mpi"
         and m.name in ("allreduce", "bcast", "alltoall")],
        lambda m: f"{m.name} {m.params['ranks']} ranks",
        lambda m: m.params["size_bytes"])) else None


#: Small-message latency moves more from run to run than bandwidth does
LATENCY_FLOOR = 0.10


def headlines(run: Run) -> list[Headline]:
    """Point-to-point latency at 8 B and bandwidth at the largest message, of the first pair
    measured."""
    out = []
    lat = [m for m in run.select("mpi", "latency") if m.params["size_bytes"] == 8]
    if lat:
        m = lat[0]
        out.append(Headline("mpi.latency_8B", f"MPI latency 8 B, {m.params.get('pair', '')}"
                            .rstrip(", "), m, floor=LATENCY_FLOOR))
    bw = run.select("mpi", "bandwidth")
    if bw:
        size = max(m.params["size_bytes"] for m in bw)
        m = next(m for m in bw if m.params["size_bytes"] == size)
        out.append(Headline("mpi.bandwidth_large", f"MPI bandwidth {format_bytes(size)}", m))
    return out


def tables(run: Run) -> list[Block]:
    mpi = [m for m in run.metrics if m.benchmark == "mpi"]
    return [Lines(render(mpi).splitlines(), preformatted=True)] if mpi else []


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("mpi-point-to-point", "MPI latency and bandwidth",
                         mpi_point_to_point(runs)),
                        ("mpi-collectives", "MPI collectives", mpi_collectives(runs)))
