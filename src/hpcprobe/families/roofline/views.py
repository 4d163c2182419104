"""The roofline's views: ceilings and ridge points as a table, and the roofline plot."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprobe.common.units import format_bytes
from hpcprobe.families.roofline import derive
from hpcprobe.results.model import Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines, Table, cell, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def roofline(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Roofline (all cores)", "arithmetic intensity (FLOP/B)", "GFLOP/s",
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
                    label=figure.label(run, len(runs) > 1, f"{m.params['level']} {bw:.0f} GB/s"))
            drawn = True
        for precision, peak in compute.items():
            ax.axhline(peak, linestyle="--", linewidth=1, color="black")
            ax.text(2.0 ** -6, peak, f" {precision.upper()} peak {peak:.0f}", va="bottom",
                    fontsize=8)
    if not drawn:
        return None
    ax.legend(fontsize=8)
    return fig


def _roofline_table(run: Run) -> Table | None:
    ceilings = run.select("roofline", "bandwidth_ceiling")
    compute = {m.params["precision"]: m for m in run.select("roofline", "compute_ceiling")}
    if not ceilings or not compute:
        return None
    ridge = {(m.params["precision"], m.params["level"]): m
             for m in run.select("roofline", "ridge_point")}
    tops = ", ".join(f"{p.upper()} {m.summary.median:.1f} GFLOP/s ({m.params['isa']} "
                     f"{m.params['op']})" for p, m in compute.items())
    t = Table(title=f"Roofline on {ceilings[0].params['threads']} core(s): compute ceilings {tops};"
                    " ridge point = peak / bandwidth (FLOP/B, STREAM byte counting)")
    for col in ("level", "bandwidth GB/s", "kernel", *[f"ridge {p.upper()} FLOP/B"
                                                         for p in compute]):
        t.add_column(col, justify="right")
    for m in ceilings:
        lvl = m.params["level"]
        t.add_row(lvl, cell(m), f"{m.params['kernel']} {m.params['stores']}",
                  *[f"{ridge[(p, lvl)].summary.median:.2f}" if (p, lvl) in ridge else "-"
                    for p in compute])
    return t


def _ports(run: Run) -> Lines | None:
    """L1 and L2 against their load/store ports: each level's best figure per thread count as a
    share of the ceiling the ports give at the clock measured on that many cores."""
    ceilings = run.select("roofline", "port_ceiling")
    if not ceilings:
        return None
    measured = run.select("memory", "bandwidth")
    lines = []
    for c in ceilings:
        p = c.params
        got = [m for m in measured if all(m.params.get(k) == p[k] for k in derive.PORT_KEYS)]
        if not got:
            continue
        fig, ceil = got[0].summary.median, c.summary.max  # the fastest clock: a ceiling
        pct = 100 * fig / ceil
        lines.append(f"{p['level']} {p['kernel']} ({p['isa']}, {format_bytes(p['size_bytes'])})"
                     f" on {p['threads']} core(s): {fig:.1f} GB/s = {pct:.0f} % of the ports' "
                     f"{ceil:.1f} GB/s ({p['bytes_per_cycle']:g} B a cycle x "
                     f"{ceil / p['bytes_per_cycle'] / p['threads']:.3g} GHz)"
                     + (" ABOVE it: the ceiling or the figure is wrong" if pct > 101 else ""))
    source = ceilings[0].params.get("source")
    return Lines(["Caches against their load/store ports (the fastest clock measured on as "
                  "many cores):", *(f"  {x}" for x in lines), f"  ports: {source}"]) \
        if lines else None


def tables(run: Run) -> list[Block]:
    return shown(_roofline_table(run), _ports(run))


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("roofline", "Roofline", roofline(runs)))
