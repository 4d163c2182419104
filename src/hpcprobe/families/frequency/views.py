"""The frequency family's views: the clock against active cores per load, as a table and a curve."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprobe.analysis.verdict import Headline
from hpcprobe.results.model import Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def clock_curve(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Core clock against active cores", "active cores", "GHz")
    return fig if figure.draw(ax, runs, lambda run: figure.grouped(
        run.select("frequency", "clock"), lambda m: f"{m.params['load']} load",
        lambda m: m.params["active_cores"])) else None


def _clock_table(run: Run) -> Table | None:
    clocks = run.select("frequency", "clock")
    if not clocks:
        return None
    loads = list(dict.fromkeys(m.params["load"] for m in clocks))
    cells = {(m.params["active_cores"], m.params["load"]): m for m in clocks}
    cur = {(m.params["active_cores"], m.params["load"]): m
           for m in run.select("frequency", "scaling_cur_freq")}
    t = Table(title=f"Core clock, GHz (dependent add chains; scalar: the chain alone, avx2/avx512:"
                    f" with FMAs of that width in flight), median ±95% CI, {n_range(clocks)}; "
                    f"cores in the order of placement {clocks[0].params['placement']}")
    t.add_column("active cores", justify="right")
    for load in loads:
        t.add_column(f"{load} load", justify="right")
        if any(key[1] == load for key in cur):
            t.add_column(f"{load} cpufreq says", justify="right")
    for k in sorted({key[0] for key in cells}):
        row = [str(k)]
        for load in loads:
            row.append(cell(cells.get((k, load)), 3))
            if any(key[1] == load for key in cur):
                row.append(cell(cur.get((k, load)), 3))
        t.add_row(*row)
    return t


#: The width order of the loads: the widest one the run measured is the clock HPL runs at
WIDTH = ("scalar", "avx2", "avx512")


def headlines(run: Run) -> list[Headline]:
    """The clock with every core loaded by the widest ISA measured."""
    clocks = [m for m in run.select("frequency", "clock") if m.params["load"] in WIDTH]
    if not clocks:
        return []
    widest = max((m.params["load"] for m in clocks), key=WIDTH.index)
    at = [m for m in clocks if m.params["load"] == widest]
    m = max(at, key=lambda m: m.params["active_cores"])
    return [Headline("frequency.all_core_clock", f"clock, {m.params['active_cores']} cores "
                     f"under {widest}", m)]


def tables(run: Run) -> list[Block]:
    return shown(_clock_table(run))


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("clock-curve", "Clock curve", clock_curve(runs)))
