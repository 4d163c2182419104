#!/usr/bin/env python3
"""`hpcprobe history` at fleet scale: NODES nodes x RUNS nightly runs of the headline figures
(the recorded node probe's headline metrics, tests/data/cluster/probe-quick.json, each run's
samples scaled by a little noise, a 9 % step on 80 % of the nodes two thirds of the way, with a
kernel change), stored through the store's own save in SQLite (a temporary file); then, each
timed once:

- one figure's history for the whole fleet (`history --metric ... --param ...`, JSON out);
- every headline figure of every node with its change points (`history`, JSON out).

Goal (issue 47): the first <= 2 s and the second <= 60 s at 1,000 nodes x 365 runs.
Usage: benchmarks/history_scale.py [--nodes 1000] [--runs 365] [--db FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hpcprobe import registry
from hpcprobe.cli import main as cli
from hpcprobe.results import model as results
from hpcprobe.results.store import Store

HERE = Path(__file__).resolve().parent
BASE = results.read_json(HERE.parent / "tests" / "data" / "cluster" / "probe-quick.json")


def headline_run() -> results.Run:
    keep = {id(h.metric) for p in registry.pickers() for h in p(BASE)}
    return replace(BASE, metrics=[m for m in BASE.metrics if id(m) in keep], warnings=[],
                   findings=[])


def fill(db: str, nodes: int, runs: int) -> float:
    base, rng = headline_run(), random.Random(47)
    start = datetime(2025, 1, 1, 2, tzinfo=UTC)
    t0 = time.perf_counter()
    with Store.open(db) as st:
        for night in range(runs):
            for n in range(nodes):
                changed = n % 5 != 0 and night >= 2 * runs // 3
                factor = 0.91 if changed else 1.0
                ms = [replace(m, samples=[(x * factor if m.better == "higher" else x / factor)
                                          * (1 + rng.gauss(0, 0.01)) for x in m.samples])
                      for m in base.metrics]
                st.save(replace(base, run_id=f"{night:04d}{n:08x}", host=f"n{n:04d}",
                                tag=f"nightly-{night:03d}", metrics=ms,
                                created=(start + timedelta(days=night)).isoformat(),
                                provenance={**base.provenance, "kernel": "Linux 6.9" if changed
                                            else "Linux 6.1"}))
    return time.perf_counter() - t0


def timed(*args: str) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli(["history", *args])
    if code != 0:
        sys.exit(f"history {' '.join(args)}: exit {code}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=365)
    ap.add_argument("--db", help="an SQLite file to fill (default: a temporary one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = a.db or str(Path(tmp) / "history.sqlite")
        took = fill(db, a.nodes, a.runs)
        print(f"stored {a.nodes} nodes x {a.runs} runs in {took:.0f} s ({db})")
        one = timed("--db", db, "--metric", "memory.bandwidth", "--param", "kernel=triad",
                    "--param", "level=DRAM", "--param", "threads=2", "--param", "phase=stream",
                    "--param", "stores=regular", "--json", "-")
        print(f"one figure, the whole fleet: {one:.2f} s (goal <= 2 s)")
        every = timed("--db", db, "--json", "-")
        print(f"every headline figure of every node, change points: {every:.1f} s (goal <= 60 s)")


if __name__ == "__main__":
    main()
