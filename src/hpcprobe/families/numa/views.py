"""The numa family's views: latency and bandwidth matrices, as tables and heat maps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprobe.results.model import Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table, cell, n_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def numa_latency(run: Run) -> Figure | None:
    return figure.matrix(run, "numa", "latency", lambda m: (m.params["cpu_domain"],
                                                      m.params["memory_domain"]),
                   "NUMA latency: CPU domain (rows) x memory domain", "ns")


def numa_bandwidth(run: Run) -> Figure | None:
    return figure.matrix(run, "numa", "bandwidth", lambda m: (m.params["cpu_domain"],
                                                        m.params["memory_domain"]),
                   "NUMA read bandwidth: CPU domain (rows) x memory domain", "GB/s")


def _numa_tables(run: Run) -> list[Table]:
    out = []
    for name, what in (("latency", "latency, ns per load (one thread)"),
                       ("bandwidth", "read bandwidth, GB/s (all cores of the domain)")):
        cells = {(m.params["cpu_domain"], m.params["memory_domain"]): m for m in run.metrics
                 if m.benchmark == "numa" and m.name == name}
        if not cells:
            continue
        mems = sorted({j for _, j in cells})
        t = Table(title=f"NUMA {what}: CPU domain (rows), memory bound to domain (columns), "
                        f"median ±95% CI, {n_range(list(cells.values()))}")
        t.add_column("CPU domain")
        for j in mems:
            t.add_column(f"mem {j}", justify="right")
        for i in sorted({i for i, _ in cells}):
            t.add_row(str(i), *[cell(cells.get((i, j))) for j in mems])
        out.append(t)
    return out


def tables(run: Run) -> list[Block]:
    return list(_numa_tables(run))


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return (figure.per_run(runs, "numa-latency", "NUMA latency matrix", numa_latency)
            + figure.per_run(runs, "numa-bandwidth", "NUMA bandwidth matrix", numa_bandwidth))
