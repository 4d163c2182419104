#!/usr/bin/env python3
"""`hpcprobe history` at fleet scale: NODES nodes x RUNS nightly runs of the headline figures
(the recorded node probe's headline metrics, tests/data/cluster/probe-quick.json, each run's
samples scaled by a little noise, a 9 % step with a kernel change on 80 % of the nodes two thirds
of the way), stored in SQLite (a temporary file) or, with --postgresql, a throwaway PostgreSQL
server; the runs' rows through the store's own `insert` in one transaction (the base document
validated once: JSON-schema validation, 12 ms a run, would take an hour at 365,000 runs). Then,
each timed once in this process:

- one figure's history for the whole fleet with each node's change points (`history --metric
  ... --param ...`, the terminal's answer);
- every headline figure of every node and group with their change points (`history`, the
  terminal's answer);
- the HTML page of every headline figure (`history -o FILE.html`);

on the first read, read again (what the store keeps: store version 6), after another night's
runs of every node, and read again.

Goals (issue 47) at 1,000 nodes x 365 runs: <= 2 s, <= 60 s, <= 10 s.
Usage: benchmarks/history_scale.py [--nodes 1000] [--runs 365] [--postgresql] [--db FILE|URL]
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
from hpcprobe.tools import pgserver

HERE = Path(__file__).resolve().parent
BASE = results.read_json(HERE.parent / "tests" / "data" / "cluster" / "probe-quick.json")


def headline_run() -> results.Run:
    keep = {id(h.metric) for p in registry.pickers() for h in p(BASE)}
    return replace(BASE, metrics=[m for m in BASE.metrics if id(m) in keep], warnings=[],
                   findings=[])


def fill(db: str, nodes: int, runs: int, first: int = 0) -> float:
    """Nights first .. runs-1 of every node (a 9 % step on 80 % of them from night 2/3 runs,
    with a kernel change)."""
    base, rng = headline_run(), random.Random(47 + first)
    results.validate(base.to_dict())
    start = datetime(2025, 1, 1, 2, tzinfo=UTC)
    t0 = time.perf_counter()
    with Store.open(db) as st, st.transaction():  # type: ignore[attr-defined]
        for night in range(first, runs):
            for n in range(nodes):
                changed = n % 5 != 0 and night >= 2 * runs // 3
                factor = 0.91 if changed else 1.0
                ms = [replace(m, samples=[(x * factor if m.better == "higher" else x / factor)
                                          * (1 + rng.gauss(0, 0.01)) for x in m.samples])
                      for m in base.metrics]
                st.insert(replace(base, run_id=f"{night:04d}{n:08x}", host=f"n{n:04d}",
                                tag=f"nightly-{night:03d}", metrics=ms,
                                created=(start + timedelta(days=night)).isoformat(),
                                provenance={**base.provenance, "kernel": "Linux 6.9" if changed
                                            else "Linux 6.1"}))
    with Store.open(db) as st:
        if st.scheme == "postgresql":  # what autovacuum does to a store filled night by night
            st._execute("VACUUM ANALYZE")  # type: ignore[attr-defined]
    return time.perf_counter() - t0


def timed(*args: str) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(["history", *args])
    if code != 0:
        sys.exit(f"history {' '.join(args)}: exit {code}")
    return time.perf_counter() - t0


def measure(db: str, nodes: int, runs: int, out: Path) -> None:
    with Store.open(db) as st:
        stored = len(st.runs(limit=1))
    if stored:
        print(f"{db} holds runs already: timing on them")
    else:
        took = fill(db, nodes, runs)
        print(f"stored {nodes} nodes x {runs} runs in {took:.0f} s")
    timed("--db", db, "--host", "n0000")  # SciPy and ruptures imported once, as in any process
    for when in ("first read", "read again", "after another night", "read again"):
        if when == "after another night":
            with Store.open(db) as st:  # the newest night's number, from its tag
                last = max(int(str(i.tag).split("-")[1]) for i in st.runs(limit=nodes))
            fill(db, nodes, last + 2, first=last + 1)
            print(f"stored night {last + 1} of {nodes} nodes")
        one = timed("--db", db, "--metric", "memory.bandwidth", "--param", "kernel=triad",
                    "--param", "level=DRAM", "--param", "threads=2", "--param",
                    "phase=stream", "--param", "stores=regular")
        every = timed("--db", db)
        page = timed("--db", db, "-o", str(out / "history.html"))
        print(f"{when}: one figure, the whole fleet {one:.2f} s (goal <= 2 s); every headline "
              f"figure of every node and group {every:.1f} s (<= 60 s); the HTML page "
              f"{page:.1f} s (<= 10 s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=365)
    ap.add_argument("--postgresql", action="store_true",
                    help="a throwaway PostgreSQL server (hpcprobe.tools.pgserver)")
    ap.add_argument("--db", help="a store to fill, or one filled before to time again "
                                 "(default: a temporary one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.db or not a.postgresql:
            measure(a.db or str(Path(tmp) / "history.sqlite"), a.nodes, a.runs, Path(tmp))
            return
        with pgserver.throwaway() as server:
            measure(server.new_database(), a.nodes, a.runs, Path(tmp))


if __name__ == "__main__":
    main()
