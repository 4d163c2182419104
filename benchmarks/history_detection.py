#!/usr/bin/env python3
"""How honest `hpcprobe history`'s change points are, on series whose noise is real figures':
false change points per 1,000 runs of stationary series, and how often a step of 2-10 % is
found (at its place, +-1 run) with 3 to 20 runs after it.

The noise: each synthetic run's median is the median of a bootstrap draw of a real figure's
samples (every headline figure of a recorded run: tests/data/cluster/probe-quick.json, or
--run FILE), so a run varies as that figure's samples did; with --db DB --host H, each run's
value is instead a draw of the host's stored run medians of the figure (their relative
deviations from their median), the run-to-run spread of a real node. Goal (issue 47): <= 1
false change point per 1,000 runs; a 5 % step found in >= 90 % of series once 10 runs follow.
Usage: benchmarks/history_detection.py [--series 100] [--length 30] [--run FILE] [--db DB
--host H]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from hpcprobe import registry
from hpcprobe.history import changes as history
from hpcprobe.results import model as results
from hpcprobe.results.store import Selection, Store

HERE = Path(__file__).resolve().parent
RECORDED = HERE.parent / "tests" / "data" / "cluster" / "probe-quick.json"
STEPS = (0.02, 0.03, 0.05, 0.10)
AFTER = (3, 5, 10, 20)
#: Figures whose run-to-run spread is at most this are the quiet ones of the detection table
QUIET = 0.025

Draw = Callable[[random.Random], tuple[float, float]]  # a run's (relative value, rel CI)


def from_samples(m: results.Metric) -> Draw:
    """A run as a bootstrap of the figure's samples: its median relative to theirs."""
    mid = statistics.median(m.samples)

    def draw(rng: random.Random) -> tuple[float, float]:
        got = results.Metric(m.benchmark, m.name, m.unit, m.params,
                             [rng.choice(m.samples) for _ in m.samples], m.better)
        return got.summary.median / mid, got.summary.rel_ci_halfwidth
    return draw


def from_runs(medians: list[float], ci: float) -> Draw:
    mid = statistics.median(medians)
    return lambda rng: (rng.choice(medians) / mid, ci)


def series(draw: Draw, rng: random.Random, n: int, at: int | None = None, step: float = 0.0
           ) -> list[history.Point]:
    out = []
    for i in range(n):
        value, ci = draw(rng)
        factor = 1 - step if at is not None and i >= at else 1.0
        out.append(history.Point(f"r{i}", f"2026-01-01T00:00:{i % 60:02d}+00:00", "n", None,
                                 100 * value * factor, ci))
    return out


def draws(a: argparse.Namespace) -> dict[str, Draw]:
    run = results.read_json(Path(a.run))
    heads = [h for p in registry.pickers() for h in p(run)]
    if not a.db:
        return {h.label: from_samples(h.metric) for h in heads if len(h.metric.samples) > 1}
    out = {}
    with Store.open(a.db, create=False) as st:
        for h in heads:
            m = h.metric
            got = st.metric_across(m.benchmark, m.name, Selection(host=a.host),
                                   {k: str(v) for k, v in m.params.items()
                                    if isinstance(v, (str, int)) and not isinstance(v, bool)
                                    and k != "cpus"})
            meds = [f.summary.median for _, f in got]
            if len(meds) >= 5:
                out[h.label] = from_runs(meds, statistics.median(
                    f.summary.rel_ci_halfwidth for _, f in got))
    return out


def _detection(title: str, chosen: list[Draw], rng: random.Random, n_series: int) -> None:
    """The share of series a step is found in at its place (+-1 run), by step and runs after."""
    print(f"figures with {title} ({len(chosen)}): found at its place (+-1 run), % of series")
    print("step   " + "".join(f"{n:>8}" for n in AFTER))
    before = 12
    for step in STEPS:
        cells = []
        for n in AFTER:
            hit = total = 0
            for draw in chosen:
                for _ in range(n_series // 2):
                    found = history.change_points(series(draw, rng, before + n, before, step))
                    hit += any(abs(int(c.after.run_id[1:]) - before) <= 1 for c in found)
                    total += 1
            cells.append(f"{100 * hit / total:7.0f}%")
        print(f"-{100 * step:3.0f}%  " + "".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=100, help="series per case and figure")
    ap.add_argument("--length", type=int, default=30, help="runs of a stationary series")
    ap.add_argument("--run", default=str(RECORDED), help="the run whose figures give the noise")
    ap.add_argument("--db", help="a store whose runs of --host give the noise instead")
    ap.add_argument("--host")
    a = ap.parse_args()
    rng = random.Random(47)
    figures = draws(a)
    t0 = time.perf_counter()
    false = runs = 0
    print(f"{len(figures)} figure(s), noise from {a.db or a.run}")
    spread = {}
    for label, draw in figures.items():
        mine = sum(len(history.change_points(series(draw, rng, a.length)))
                   for _ in range(a.series))
        spread[label] = statistics.stdev(draw(rng)[0] for _ in range(200))
        print(f"  {label}: run-to-run spread {100 * spread[label]:.1f} %, {mine} false change "
              f"point(s) in {a.series * a.length} runs")
        false += mine
        runs += a.series * a.length
    print(f"stationary: {false} change point(s) in {runs} runs = "
          f"{1000 * false / runs:.2f} per 1,000 runs (goal <= 1)")
    for title, chosen in ((f"spread <= {100 * QUIET:g} %", [k for k in figures
                                                            if spread[k] <= QUIET]),
                          (f"spread > {100 * QUIET:g} %", [k for k in figures
                                                           if spread[k] > QUIET])):
        if chosen:
            _detection(title, [figures[k] for k in chosen], rng, a.series)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
