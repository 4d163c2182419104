#!/usr/bin/env python3
"""The result store at fleet scale: RUNS runs x METRICS metrics x SAMPLES samples loaded into each
backend (SQLite file; PostgreSQL: --pg URL, or a throwaway server like the tests' when Debian's
binaries are here), then the queries a fleet needs, each timed (best of 3):

- list: every run (hpcprobe list, no limit);
- one figure across all runs (hpcprobe export --metric memory.bandwidth --param kernel=triad
  --param copy=0: one per run, the fleet view of the cluster issue);
- compare two runs (load both, join and test every metric).

The runs are one recorded run document (tests/data/compare/nps1.json) under new ids, hosts and
tags, its metrics repeated with a `copy` param up to METRICS; the figures are its figures.
Goal of issue 12: each query <= 1 s. Usage: benchmarks/store_scale.py [--runs 1000]
[--metrics 500] [--samples 10] [--pg URL]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from hpcprobe import registry
from hpcprobe.analysis import compare
from hpcprobe.results import model as results
from hpcprobe.results.store import Selection, Store

HERE = Path(__file__).resolve().parent
BASE = results.read_json(HERE.parent / "tests" / "data" / "compare" / "nps1.json")


def run_of(i: int, metrics: int, samples: int) -> results.Run:
    ms = [replace(m, params={**m.params, "copy": k},
                  samples=(m.samples * (samples // len(m.samples) + 1))[:samples])
          for k in range(-(-metrics // len(BASE.metrics))) for m in BASE.metrics][:metrics]
    return replace(BASE, run_id=f"{i:012x}", host=f"n{i % 64:03d}", tag=f"c{i // 100}",
                   created=f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}+00:00", metrics=ms)


def best_of(f: Callable[[], object], n: int = 3) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


@contextmanager
def postgres(url: str | None) -> Iterator[str | None]:
    if url:
        yield url
        return
    from hpcprobe.tools import pgserver

    if pgserver.bin_dir() is None:
        print("PostgreSQL: no server binaries and no --pg URL; skipped")
        yield None
        return
    with pgserver.throwaway() as server:
        yield server.new_database()


def measure(name: str, db: str, a: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    with Store.open(db) as st:
        for i in range(a.runs):
            st.save(run_of(i, a.metrics, a.samples))
            if (i + 1) % 100 == 0:
                print(f"{name}: {i + 1}/{a.runs} runs loaded", file=sys.stderr)
    load = time.perf_counter() - t0
    with Store.open(db, create=False) as st:
        first, last = f"{0:012x}", f"{a.runs - 1:012x}"
        t_list = best_of(lambda: st.runs())
        one = {"kernel": "triad", "copy": "0"}
        t_metric = best_of(lambda: st.metric_across("memory", "bandwidth", Selection(), one))
        t_compare = best_of(lambda: compare.compare([st.load(first), st.load(last)],
                                                    registry.not_joined()))
        n_metric = len(st.metric_across("memory", "bandwidth", Selection(), one))
    print(f"{name:11s} load {load:6.1f} s ({a.runs / load:4.1f} runs/s)   list {t_list:6.3f} s"
          f"   one figure x {n_metric} runs {t_metric:6.3f} s   compare two runs "
          f"{t_compare:6.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--metrics", type=int, default=500)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--pg", metavar="URL", help="an empty PostgreSQL database to fill")
    a = ap.parse_args()
    print(f"{a.runs} runs x {a.metrics} metrics x {a.samples} samples "
          f"({a.runs * a.metrics * a.samples:,} samples) per backend; queries: best of 3")
    with tempfile.TemporaryDirectory() as tmp:
        measure("SQLite", str(Path(tmp) / "scale.sqlite"), a)
    with postgres(a.pg) as url:
        if url:
            measure("PostgreSQL", url, a)
    print("goal: each query <= 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
