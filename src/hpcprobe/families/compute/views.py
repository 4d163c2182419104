"""The compute family's views: peak per kernel against its model, core scaling beside the DRAM
triad, and the headline peak per precision."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hpcprobe.analysis.verdict import Headline, best
from hpcprobe.machine.flopmodel import above_model, efficiency_label
from hpcprobe.results.ceilings import Ceiling
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Block, Lines, Table, cell, n_range, shown


def _kernel_key(p: dict[str, Any]) -> tuple[str, str, str]:
    return p["isa"], p["precision"], p["op"]


def _compute_table(run: Run) -> Table | None:
    peaks = run.select("compute", "peak")
    table = [m for m in peaks if m.params["phase"] == "peak"]
    if not table:
        return None
    models = {(_kernel_key(m.params), m.params["threads"]): m
              for m in run.select("compute", "peak_model")}
    counts = sorted({m.params["threads"] for m in table})
    t = Table(title=f"Peak compute, GFLOP/s (FMA = 2 FLOPs), median ±95% CI, {n_range(table)}; "
                    "% of the model: FLOP/cycle/core x cores x the clock measured under the "
                    "same ISA load")
    for col in ("ISA", "precision", "kernel"):
        t.add_column(col)
    for n in counts:
        t.add_column(f"{n}T GFLOP/s", justify="right")
        t.add_column(f"{n}T % model", justify="right")
    t.add_column("model FLOP/cycle/core")
    rows: dict[tuple[str, str, str], dict[int, Metric]] = defaultdict(dict)
    for m in table:
        rows[_kernel_key(m.params)][m.params["threads"]] = m
    for key, by_n in rows.items():
        cells: list[str] = []
        source = "-"
        for n in counts:
            got, model = by_n.get(n), models.get((key, n))
            cells.append(cell(got))
            cells.append("-" if got is None or model is None else
                         efficiency_label(percent_of(got, model), percent_of(got, model, 0)))
            if model is not None:
                p = model.params
                source = f"{p['flops_per_cycle']:g} ({p['model_source']}: {p['microarch']})"
        t.add_row(*key, *cells, source)
    return t


def percent_of(m: Metric, model: Metric, end: int | None = None) -> float:
    """The figure's median (`end` 0 or 1: that end of its CI) as % of its model's median."""
    s = m.summary
    return 100.0 * (s.median if end is None else s.ci95[end]) / model.summary.median


def _best_peaks(run: Run) -> list[tuple[str, int, Metric, Metric | None]]:
    """Per precision measured: the best kernel on the most threads and its model (if any)."""
    peaks = run.select("compute", "peak")
    if not peaks:
        return []
    models = {(_kernel_key(m.params), m.params["threads"]): m
              for m in run.select("compute", "peak_model")}
    top = max(m.params["threads"] for m in peaks)
    out = []
    for precision in ("dp", "sp"):
        got = best([m for m in peaks if m.params["precision"] == precision
                    and m.params["threads"] == top])
        if got is not None:
            out.append((precision, top, got, models.get((_kernel_key(got.params), top))))
    return out


def _peak_lines(run: Run) -> list[str]:
    """The headline: the best all-core peak per precision against its model."""
    out = []
    for precision, top, got, model in _best_peaks(run):
        p = got.params
        line = (f"Peak {precision.upper()}: {got.summary.median:.1f} GFLOP/s on {top} core(s), "
                f"{p['isa']} {p['op']}")
        if model is not None:
            mp = model.params
            ghz = model.summary.median / (mp["flops_per_cycle"] * top)
            pct = percent_of(got, model)
            line += (f" = {pct:.1f} % of the model {model.summary.median:.1f}"
                     if not above_model(pct, percent_of(got, model, 0)) else
                     f", ABOVE its model {model.summary.median:.1f} ({pct:.1f} %: the model's "
                     "clock read low; see the warnings, not an efficiency)")
            line += (f" ({mp['flops_per_cycle']:g} FLOP/cycle x {top} core(s) x {ghz:.2f} GHz "
                     f"measured under {mp['clock_load']} load; {mp['model_source']} model, "
                     f"{mp['microarch']})")
        out.append(line)
    return out


def _scaling_table(run: Run) -> Table | None:
    scaling = {m.params["threads"]: m for m in run.select("compute", "peak")
               if m.params.get("scaling")}
    if len(scaling) < 2:
        return None
    triad = {m.params["threads"]: m for m in run.select("memory", "bandwidth")
             if m.params["kernel"] == "triad" and m.params["stores"] == "regular"
             and m.params["level"] == "DRAM" and m.params["placement"] == "one-per-core"}
    first = scaling[min(scaling)]
    label = " ".join(_kernel_key(first.params))
    t = Table(title=f"Core scaling: peak {label} and DRAM triad (regular stores, one per core) "
                    "by threads, median ±95% CI" + ("" if triad else
                                                    "; run `memory` too for the triad curve"))
    for col in ("threads", "GFLOP/s", "per core", "speedup", "triad GB/s"):
        t.add_column(col, justify="right")
    base = first.summary.median / min(scaling)
    for n in sorted(scaling):
        med = scaling[n].summary.median
        t.add_row(str(n), cell(scaling[n]), f"{med / n:.1f}", f"{med / base:.2f}",
                  cell(triad.get(n)))
    return t


def headlines(run: Run) -> list[Headline]:
    """The best all-core peak per precision (its FLOP model bounds it: `ceiling`), and that
    peak per watt where the node's energy counters were read."""
    out = []
    for precision, top, got, _ in _best_peaks(run):
        out.append(Headline(f"compute.peak_{precision}", f"peak {precision.upper()}, {top} "
                            f"cores, {got.params['isa']} {got.params['op']}", got))
        watt = next((m for m in run.select("compute", "peak_per_watt")
                     if got.params.items() <= m.params.items()), None)
        if watt is not None:
            out.append(Headline(f"compute.peak_per_watt_{precision}",
                                f"peak {precision.upper()} per watt, {top} cores", watt))
    return out


def ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """A peak figure's ceiling: its FLOP model where the model is a table's (a model that is
    the measured one-core rate is no ceiling, and says so); None without a model."""
    threads = metric.params["threads"]
    want = _kernel_key(metric.params)
    model = next((m for m in run.select("compute", "peak_model")
                  if m.params["threads"] == threads and _kernel_key(m.params) == want), None)
    if model is None:
        return None
    if model.params["model_source"] == "measured":
        return Ceiling(None, "the FLOP model here is the measured one-core rate, no ceiling")
    return Ceiling(model.summary.median, f"FLOP model ({model.params['microarch']}, "
                   f"{model.params['flops_per_cycle']:g} FLOP/cycle x the measured clock)")


def tables(run: Run) -> list[Block]:
    lines = _peak_lines(run)
    return shown(_compute_table(run), _scaling_table(run), Lines(lines) if lines else None)
