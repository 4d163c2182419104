#!/usr/bin/env python3
"""Per-level memory latency with the measured core clock's cycles beside it, over repeated runs.

Runs hpcprobe's latency sweep (default pages) `--runs` times on one core, measures the core clock
(dependent add chains) before and after, and prints for each level the median latency over the
runs, its spread (min-max of the runs' figures) and cycles at the measured clock. A level's figure
in one run is the latency at the working set nearest half its capacity per thread (L1, L2, L3)
and at the largest working set (DRAM), so a VM whose L3 is smaller than it claims shows it.
No Debian package ships a latency tool to compare with (lmbench is not in Debian's archive);
L1 at 4-5 cycles is the field's reference point on current x86 cores.

Usage: benchmarks/latency_levels.py [--runs 5] [--cpu N]
"""

from __future__ import annotations

import argparse
import statistics
import sys

from hpcprobe import native, registry
from hpcprobe.common.units import format_bytes
from hpcprobe.families.latency.bench import LatencyOptions
from hpcprobe.machine import clock, topology
from hpcprobe.machine.sizing import cache_shares
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress


def level_figures(metrics: list, shares: list[tuple[str, int]]) -> dict[str, tuple[int, float]]:
    """(working set, ns) per level from one run's latency sweep."""
    pts = {m.params["size_bytes"]: m.summary.median for m in metrics
           if m.name == "latency" and not m.params["huge_pages_requested"]}
    out = {}
    for name, cap in shares:
        size = min(pts, key=lambda s: abs(s - cap / 2))
        out[name] = (size, pts[size])
    out["DRAM"] = (max(pts), pts[max(pts)])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None)
    a = ap.parse_args()
    topo = topology.discover()
    cpu = a.cpu if a.cpu is not None else topo.allowed_cpus[0]
    with native.Team([cpu]) as team:
        ghz_before = statistics.median(clock.measure(team))
    shares = cache_shares(topo, (cpu,))
    per_level: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    for r in range(a.runs):
        run = registry.execute(topo, profiles.get("default"), ["latency"], native.best_isa(),
                             {"latency": LatencyOptions(cpu=cpu, pages="default")}, NoProgress())
        if run.errors:
            print(f"run {r + 1}: {run.errors}", file=sys.stderr)
            return 1
        for level, (size, ns) in level_figures(run.metrics, shares).items():
            per_level.setdefault(level, []).append(ns)
            sizes[level] = size
        print(f"run {r + 1}/{a.runs} done", file=sys.stderr)
    with native.Team([cpu]) as team:
        ghz_after = statistics.median(clock.measure(team))
    ghz = (ghz_before + ghz_after) / 2
    print(f"CPU {cpu}: clock {ghz_before:.3f} GHz before, {ghz_after:.3f} GHz after the runs "
          "(dependent add chains)")
    print(f"{'level':5s} {'working set':>12s} {'ns (median)':>12s} {'spread ns':>16s} "
          f"{'cycles':>8s}")
    for level, values in per_level.items():
        med = statistics.median(values)
        print(f"{level:5s} {format_bytes(sizes[level]):>12s} {med:12.2f} "
              f"{min(values):7.2f}-{max(values):<8.2f} {med * ghz:8.1f}")
    print(f"{a.runs} runs of hpcprobe's latency sweep (4 KiB pages) on CPU {cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
