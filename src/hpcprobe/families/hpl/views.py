"""The hpl family's views: HPL's Rmax against Rpeak (measured clock and base clock) per BLAS,
DGEMM on one core and all through each BLAS with the kernels it chose, the NB search, each
one's GFLOP/s per watt where the node's energy counters were read, and Rmax by BLAS as a
plot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.verdict import Headline, best
from hpcprobe.machine.flopmodel import efficiency_label
from hpcprobe.results.ceilings import Ceiling
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _kernels(p: dict[str, Any]) -> str:
    return f"{p['blas_kernels']} ({p['blas_isa'] or '?'})"


def _by_blas(run: Run, name: str) -> dict[str, Metric]:
    return {m.params["blas"]: m for m in run.select("hpl", name)}


def _hpl_table(run: Run) -> Table | None:
    rmax = run.select("hpl", "rmax")
    if not rmax:
        return None
    rpeak, eff = _by_blas(run, "rpeak"), _by_blas(run, "efficiency")
    base, eff_base = _by_blas(run, "rpeak_base"), _by_blas(run, "efficiency_base")
    time, resid = _by_blas(run, "hpl_time"), _by_blas(run, "residual")
    t = Table(title=f"HPL, GFLOP/s (HPL's count: 2/3 N^3 + 3/2 N^2), median ±95% CI, "
                    f"{n_range(rmax)}; Rpeak: FLOP/cycle of the widest FMA x cores x the clock "
                    "measured under that load just before HPL",
              caption="efficiency above 100 % of the measured-clock Rpeak is a finding (see "
                      "the warnings), not an efficiency; the base-clock Rpeak is what the "
                      "CPU's stated clock gives")
    for col, justify in (("BLAS", "left"), ("kernel", "left"), ("program", "left"),
                         ("N", "right"), ("NB", "right"), ("P x Q", "right"),
                         ("ranks x threads", "right"), ("nodes", "right"), ("time s", "right"),
                         ("Rmax", "right"), ("Rpeak", "right"), ("% Rpeak", "right"),
                         ("Rpeak base", "right"), ("% base", "right"),
                         ("residual", "right")):
        t.add_column(col, justify)
    for m in rmax:
        p, b = m.params, m.params["blas"]
        t.add_row(b, _kernels(p), p["program"], str(p["n"]),
                  str(p["nb"]), f"{p['p']} x {p['q']}",
                  f"{p['ranks']} x {p['threads']} ({p['layout']})", str(p["nodes"]),
                  f"{time[b].summary.median:.1f}" if b in time else "-", cell(m),
                  cell(rpeak.get(b)),
                  efficiency_label(eff[b].summary.median, eff[b].summary.ci95[0])
                  if b in eff else "-",
                  f"{base[b].summary.median:.1f}" if b in base else "-",
                  f"{eff_base[b].summary.median:.1f}" if b in eff_base else "-",
                  f"{max(resid[b].samples):.3g} PASSED" if b in resid and resid[b].samples
                  else "-")
    return t


def _dgemm_table(run: Run) -> Table | None:
    dgemm = run.select("hpl", "dgemm")
    if not dgemm:
        return None
    frac = {(m.params["blas"], m.params["threads"]): m for m in run.select("hpl", "dgemm_fraction")}
    counts = sorted({m.params["threads"] for m in dgemm})
    t = Table(title=f"DGEMM through each BLAS (C = A B, n x n, sampled entries checked), GFLOP/s, "
                    f"median ±95% CI, {n_range(dgemm)}; % of the model peak on the clock "
                    "measured under the widest ISA's load")
    for col in ("BLAS", "library", "kernels (ISA)", "n"):
        t.add_column(col)
    for n in counts:
        t.add_column(f"{n} core(s)", "right")
        t.add_column(f"{n}c % peak", "right")
    rows: dict[str, dict[int, Metric]] = {}
    for m in dgemm:
        rows.setdefault(m.params["blas"], {})[m.params["threads"]] = m
    for b, by_n in rows.items():
        p = next(iter(by_n.values())).params
        cells = []
        for n in counts:
            f = frac.get((b, n))
            cells += [cell(by_n.get(n)), f"{f.summary.median:.1f}" if f else "-"]
        t.add_row(b, p["blas_library"], _kernels(p), str(p["n"]), *cells)
    return t


def _nb_table(run: Run) -> Table | None:
    search = run.select("hpl", "nb_search")
    if not search:
        return None
    t = Table(title="HPL block size search (--tune): one short run per NB, GFLOP/s")
    for col in ("BLAS", "N", "NB", "GFLOP/s"):
        t.add_column(col, "left" if col == "BLAS" else "right")
    for m in sorted(search, key=lambda m: (m.params["blas"], m.params["nb"])):
        t.add_row(m.params["blas"], str(m.params["n"]), str(m.params["nb"]),
                  f"{m.summary.median:.1f}")
    return t


def _headline(run: Run) -> Lines | None:
    rmax = run.select("hpl", "rmax")
    if not rmax:
        return None
    best = max(rmax, key=lambda m: m.summary.median)
    p = best.params
    eff = _by_blas(run, "efficiency").get(p["blas"])
    rpeak = _by_blas(run, "rpeak").get(p["blas"])
    line = (f"HPL: Rmax {best.summary.median:.1f} GFLOP/s through {p['blas']} ({p['blas_kernels']} "
            f"kernels), N {p['n']}, {p['nodes']} node(s)")
    if eff is not None and rpeak is not None:
        rp: dict[str, Any] = rpeak.params
        ghz = rpeak.summary.median / (rp["flops_per_cycle"] * rp["cores"])
        line += (f" = {efficiency_label(eff.summary.median, eff.summary.ci95[0])} % of Rpeak "
                 f"{rpeak.summary.median:.1f} ({rp['flops_per_cycle']:g} FLOP/cycle x "
                 f"{rp['cores']} core(s) x {ghz:.2f} GHz measured under {rp['clock_load']} load)")
    eb = _by_blas(run, "efficiency_base").get(p["blas"])
    if eb is not None:
        line += (f"; {eb.summary.median:.1f} % of the base-clock Rpeak "
                 f"({eb.params['clock_ghz']:g} GHz, {eb.params['basis']})"
                 + (": above 100 % because the cores ran above base" if eb.summary.median > 100
                    else ""))
    return Lines([line])


def _dgemm_headline(run: Run) -> list[Headline]:
    dgemm = run.select("hpl", "dgemm")
    if not dgemm:
        return []
    top = max(m.params["threads"] for m in dgemm)
    got = best([m for m in dgemm if m.params["threads"] == top])
    assert got is not None
    return [Headline("hpl.dgemm_all", f"DGEMM, {top} cores, {got.params['blas']}", got),
            *_per_watt(run, got, "hpl.dgemm_all_per_watt", f"DGEMM per watt, {top} cores")]


def _per_watt(run: Run, got: Metric, key: str, label: str) -> list[Headline]:
    """The headline of `got` per watt, where the node's energy was read while it ran."""
    watt = _matching(run, f"{got.name}_per_watt", got)
    return [] if watt is None else [Headline(key, label, watt)]


def headlines(run: Run) -> list[Headline]:
    """HPL's Rmax (the best BLAS's; its Rpeak bounds it); where HPL was not launched (the
    quick profile), the all-core DGEMM (the FLOP model bounds it); each per watt, where the
    node's energy counters were read while it ran (judged against a reference, as the
    Green500 ranks GFLOP/s per watt)."""
    got = best(run.select("hpl", "rmax"))
    if got is None:
        return _dgemm_headline(run)
    return [Headline("hpl.rmax", f"HPL Rmax, N={got.params['n']}, {got.params['blas']}", got),
            *_per_watt(run, got, "hpl.rmax_per_watt", "HPL Rmax per watt")]


def _matching(run: Run, name: str, metric: Metric) -> Metric | None:
    """The run's `name` figure whose params include all of the metric's."""
    return next((m for m in run.select("hpl", name)
                 if metric.params.items() <= m.params.items()), None)


def rmax_ceiling(run: Run, metric: Metric) -> Ceiling:
    """Rmax's ceiling: the Rpeak of its run on the clock measured under load."""
    peak = _matching(run, "rpeak", metric)
    return Ceiling(None if peak is None else peak.summary.median,
                   "Rpeak: FLOP/cycle x cores x the clock measured under load" if peak else
                   "no Rpeak: no FLOP model for this CPU")


def dgemm_ceiling(run: Run, metric: Metric) -> Ceiling:
    """DGEMM's ceiling: the FLOP model at the measured clock, read back from its fraction."""
    frac = _matching(run, "dgemm_fraction", metric)
    value = None if frac is None or not frac.summary.median else \
        metric.summary.median / (frac.summary.median / 100)
    return Ceiling(value, "FLOP model x the measured clock" if value else
                   "no FLOP model for this CPU")


def _energy_table(run: Run) -> Table | None:
    """Each figure's power and GFLOP/s per watt, where the energy counters were read while it
    ran (HPL: over its timed solves; DGEMM: over its timed calls)."""
    watts = [(m, w) for m in run.select("hpl", "rmax") + run.select("hpl", "dgemm")
             if (w := _matching(run, f"{m.name}_per_watt", m)) is not None]
    if not watts:
        return None
    t = Table(title="HPL and DGEMM per watt: GFLOP/s over the mean power of the domains read "
                    "while the timed part ran (HPL's solves, DGEMM's timed calls), median",
              caption="W: " + ", ".join(sorted({w.params["domains"] for _, w in watts})))
    for col, justify in (("figure", "left"), ("BLAS", "left"), ("cores", "right"),
                         ("GFLOP/s", "right"), ("W", "right"), ("GFLOP/s per W", "right")):
        t.add_column(col, justify)
    for m, w in watts:
        power = _matching(run, "power", m)
        t.add_row("HPL Rmax" if m.name == "rmax" else "DGEMM", m.params["blas"],
                  str(m.params.get("threads") if m.name == "dgemm" else
                      m.params["ranks"] * m.params["threads"]),
                  f"{m.summary.median:.1f}",
                  "-" if power is None else f"{power.summary.median:.1f}",
                  f"{w.summary.median:.3f}")
    return t


def tables(run: Run) -> list[Block]:
    return shown(_hpl_table(run), _dgemm_table(run), _nb_table(run), _energy_table(run),
                 _headline(run))


def rmax_plot(runs: list[Run]) -> Figure | None:
    """Rmax per BLAS (and run, with several)."""
    rows = [(run, m) for run in runs for m in run.select("hpl", "rmax")]
    if not rows:
        return None
    fig, ax = figure.new("HPL Rmax per BLAS", "", "GFLOP/s")
    labels = [f"{m.params['blas']}\n{run.run_id[:6]}" if len(runs) > 1 else m.params["blas"]
              for run, m in rows]
    ax.bar(range(len(rows)), [m.summary.median for _, m in rows], color="tab:blue")
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    return fig


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("hpl-rmax", "HPL Rmax per BLAS", rmax_plot(runs)))
