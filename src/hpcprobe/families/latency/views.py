"""The latency family's views: the latency sweep per page size, loaded latency, the core-to-core
matrix, the cache levels its sweeps saw; its figures: latency against working set, the
core-to-core heat map."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from hpcprobe.analysis.levels import levels_table
from hpcprobe.analysis.verdict import Headline
from hpcprobe.common.units import format_bytes
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def latency_sweep(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Memory latency against working set (pointer chase)",
                         "working set (bytes)", "ns per load", logx=True, logy=True)
    return fig if figure.draw(ax, runs, lambda run: figure.grouped(
        run.select("latency", "latency"), lambda m: f"{m.params['page_size']} pages",
        lambda m: m.params["size_bytes"]), cache_marks=True) else None


def core_to_core(run: Run) -> Figure | None:
    return figure.matrix(run, "latency", "core_to_core", lambda m: (m.params["cpu_a"],
                                                              m.params["cpu_b"]),
                   "Core-to-core latency, one way", "ns")


def _page_order(label: str) -> tuple[int, int]:
    """Base pages first, then larger ones, 'mixed' last."""
    if label == "mixed":
        return (1, 0)
    return (0, int(label[:-3]) << (20 if label.endswith("MiB") else 10))


def _latency_table(run: Run) -> Table | None:
    lat = run.select("latency", "latency")
    if not lat:
        return None
    pages = sorted({m.params["page_size"] for m in lat}, key=_page_order)
    rows: dict[int, dict[str, Metric]] = defaultdict(dict)
    level: dict[int, str] = {}
    for m in lat:
        rows[m.params["size_bytes"]][m.params["page_size"]] = m
        level[m.params["size_bytes"]] = m.params["level"]
    cpu = lat[0].params["cpu"]
    t = Table(title=f"Memory latency, ns per dependent load (pointer chase, 64 B lines) on CPU "
                    f"{cpu}, median ±95% CI, {n_range(lat)}; pages as granted")
    t.add_column("working set", justify="right")
    t.add_column("level")
    for pg in pages:
        t.add_column(f"{pg} pages", justify="right")
    for size in sorted(rows):
        t.add_row(format_bytes(size), level[size], *[cell(rows[size].get(pg)) for pg in pages])
    return t


def _loaded_table(run: Run) -> Table | None:
    lat = {m.params["load_threads"]: m for m in run.metrics
           if m.benchmark == "latency" and m.name == "loaded_latency"}
    bw = {m.params["load_threads"]: m for m in run.metrics
          if m.benchmark == "latency" and m.name == "loaded_bandwidth"}
    if not lat:
        return None
    t = Table(title=f"Loaded latency: DRAM ring on one core while k cores read, median ±95% CI, "
                    f"{n_range(list(lat.values()))}")
    for col in ("k streaming", "CPUs", "latency ns", "their bandwidth GB/s"):
        t.add_column(col, justify="right")
    for k in sorted(lat):
        t.add_row(str(k), lat[k].params["load_cpus"] or "-", cell(lat[k]),
                  cell(bw.get(k)) if k else "-")
    return t


def _c2c_table(run: Run) -> Table | None:
    cells = {(m.params["cpu_a"], m.params["cpu_b"]): m for m in run.metrics
             if m.benchmark == "latency" and m.name == "core_to_core"}
    if not cells:
        return None
    rows = sorted({a for a, _ in cells})
    cols = sorted({b for _, b in cells})
    t = Table(title=f"Core-to-core latency, ns one way (a cache line bounced), median ±95% CI, "
                    f"{n_range(list(cells.values()))}")
    t.add_column("CPU")
    for b in cols:
        t.add_column(str(b), justify="right")
    for a in rows:
        t.add_row(str(a), *[cell(cells.get((a, b))) for b in cols])
    relations = sorted({(m.params["relation"], a, b) for (a, b), m in cells.items()})
    t.caption = "; ".join(f"{a}-{b}: {r}" for r, a, b in relations[:12]) + \
        (" ..." if len(relations) > 12 else "")
    return t


#: Latency moves more than bandwidth from run to run (page placement, a guest's host cache)
LATENCY_FLOOR = 0.10


def headlines(run: Run) -> list[Headline]:
    """The latency of each cache level and of DRAM on base pages: a third into each level's
    working sets (clear of the previous level's edge), DRAM at the largest."""
    lat = run.select("latency", "latency")
    if not lat:
        return []
    base = min({m.params["page_size"] for m in lat}, key=_page_order)
    out = []
    for level in ("L1", "L2", "L3", "DRAM"):
        at = sorted((m for m in lat if m.params["page_size"] == base
                     and m.params["level"] == level), key=lambda m: m.params["size_bytes"])
        if at:
            m = at[-1] if level == "DRAM" else at[len(at) // 3]
            out.append(Headline(f"latency.{level.lower()}", f"{level} latency "
                                f"({format_bytes(m.params['size_bytes'])})", m,
                                floor=LATENCY_FLOOR))
    return out


def tables(run: Run) -> list[Block]:
    return shown(_latency_table(run), _loaded_table(run), _c2c_table(run),
                 levels_table(run, "latency"))


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return (figure.named(("latency-sweep", "Latency against working set", latency_sweep(runs)))
            + figure.per_run(runs, "core-to-core", "Core-to-core latency", core_to_core))
