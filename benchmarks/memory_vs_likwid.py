#!/usr/bin/env python3
"""hpcprobe's memory kernels side by side with likwid-bench, interleaved in one run.

For each level (L1, L2, L3, DRAM working sets), thread count (1, 2) and kernel shape
(stream_avx512 = triad with ordinary stores, stream_mem_avx512 = triad with non-temporal stores,
load_avx512 = read-only; on a CPU without AVX-512 their AVX2 forms, stream_avx, stream_mem_avx,
load_avx), both tools measure the same working set on the same CPUs, alternating
which goes first, for several rounds. Printed: each tool's median, and the median over rounds of
the ratio within a round (the two runs of a round are adjacent in time, so a slow phase of the
host affects both).
Both count bytes the STREAM way (no write-allocate) and MB as 10^6 B.

In L1 a tool's rate is bounded by the core's load/store ports, not by memory: the script measures
the core clock under the same ISA's load in every round and prints each tool's bytes per cycle
per core there, so a ratio above 1 in L1 reads as "likwid-bench's loop leaves cycles unused" (or
not) against the port limit (a 512-bit triad iteration moves 192 B at STREAM counting: 2 loads
and 1 store of 64 B; a 256-bit one 96 B).

Usage: benchmarks/memory_vs_likwid.py [--rounds 3] [--threads 1,2] [--levels L1,L2,L3,DRAM]
Needs Debian's likwid (likwid-bench) and an AVX2 or AVX-512 CPU.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

from sidebyside import in_turn, missing, round_ratios

from hpcprobe import native, registry
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.machine import clock, topology
from hpcprobe.machine.sizing import dram_working_set
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.native import Team

KiB, MiB = 1 << 10, 1 << 20

#: likwid-bench test (without its ISA suffix) -> (hpcprobe kernel, store type)
SHAPES = {
    "stream": ("triad", "regular"),
    "stream_mem": ("triad", "nt"),
    "load": ("load", "regular"),
}
#: hpcprobe's ISA variant -> likwid-bench's suffix for it, widest first
SUFFIX = {"avx512": "_avx512", "avx2": "_avx"}


def level_sizes(topo: topology.Topology, threads: int) -> dict[str, int]:
    """Working set in bytes for all threads: half of L1 and L2 per thread, a few MiB per thread
    for L3 (well inside it even where a VM's L3 is smaller than claimed), 4x LLC for DRAM."""
    cpus = tuple(sorted(topo.allowed_cpus))[:threads]
    l1 = topo.cache_for(1, cpus[0])
    l2 = topo.cache_for(2, cpus[0])
    return {
        "L1": threads * (l1.size_bytes // 2 if l1 else 16 * KiB),
        "L2": threads * (l2.size_bytes // 2 if l2 else 512 * KiB),
        "L3": threads * 8 * MiB,
        "DRAM": dram_working_set(topo, cpus),
    }


def likwid(test: str, size: int, threads: int, seconds: float) -> tuple[float, int]:
    """(MB/s, bytes actually used) of one likwid-bench run."""
    out = subprocess.run(
        ["likwid-bench", "-t", test, "-s", str(seconds), "-W", f"S0:{size // 1000}kB:{threads}"],
        capture_output=True, text=True, check=True).stdout
    mbs = float(re.search(r"^MByte/s:\s+([\d.]+)", out, re.M).group(1))
    used = int(re.search(r"^Size \(Byte\):\s+(\d+)", out, re.M).group(1))
    return mbs, used


def hpcprobe(topo: topology.Topology, kernel: str, stores: str, size: int, threads: int,
             profile: str, isa: str) -> float:
    """Median MB/s of one hpcprobe measurement, through the same code path as
    `hpcprobe run memory --kernel ... --size ... --profile ...`."""
    opts = MemoryOptions(kernels=(kernel,), stores=(stores,), threads=(threads,), size_bytes=size)
    run = registry.execute(topo, profiles.get(profile), ["memory"], isa, {"memory": opts},
                           NoProgress())
    if run.errors:
        raise SystemExit(f"hpcprobe failed: {run.errors}")
    [m] = [m for m in run.metrics if m.name == "bandwidth"]
    return m.summary.median * 1000.0


def core_ghz(cpus: tuple[int, ...], isa: str) -> float:
    """Median clock (GHz) of `cpus` under that ISA's load, all at once, as the memory kernels
    run."""
    with Team(list(cpus)) as team:
        return statistics.median(clock.measure(team, isa, n=5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--levels", default="L1,L2,L3,DRAM")
    ap.add_argument("--profile", default="thorough",
                    help="hpcprobe profile; thorough samples for about as long as likwid-bench "
                         "runs (up to 100 samples of 10 ms), so both see the same host noise")
    ap.add_argument("--likwid-seconds", type=float, default=1.0,
                    help="likwid-bench -s (its default, 1 s; shorter runs read low here)")
    a = ap.parse_args()
    if missing("likwid-bench"):
        return 2
    isa = next((i for i in SUFFIX if i in native.supported_isas()), None)
    if isa is None:
        print("this CPU has neither AVX2 nor AVX-512: no likwid-bench shape to compare")
        return 2
    topo = topology.discover()
    threads = [int(t) for t in a.threads.split(",") if int(t) <= len(topo.allowed_cpus)]
    configs = [(lvl, t, test + SUFFIX[isa]) for t in threads for lvl in a.levels.split(",")
               for test in SHAPES]
    ours: dict[tuple[str, int, str], list[float]] = {c: [] for c in configs}
    theirs: dict[tuple[str, int, str], list[float]] = {c: [] for c in configs}
    ghz: dict[int, list[float]] = {t: [] for t in threads}
    cpus = tuple(sorted(topo.allowed_cpus))
    for r in range(a.rounds):
        if "L1" in a.levels.split(","):
            for t in threads:
                ghz[t].append(core_ghz(cpus[:t], isa))
        for i, (lvl, t, test) in enumerate(configs):
            size = level_sizes(topo, t)[lvl]
            kernel, stores = SHAPES[test.removesuffix(SUFFIX[isa])]
            # interleaved, alternating which tool goes first
            used = size
            for step in in_turn("likwid", "hpcprobe", r + i):
                if step == "likwid":
                    mbs, used = likwid(test, size, t, a.likwid_seconds)
                    theirs[(lvl, t, test)].append(mbs)
                else:
                    ours[(lvl, t, test)].append(hpcprobe(topo, kernel, stores, used, t,
                                                         a.profile, isa))
            print(f"round {r + 1}/{a.rounds}: {lvl:4s} {t}T {test:18s} done", file=sys.stderr)
    print(f"{'level':5s} {'thr':>3s} {'likwid-bench test':18s} {'likwid MB/s':>12s} "
          f"{'hpcprobe MB/s':>14s} {'ratio':>6s} {'ratio range':>13s} {'B/cycle/core':>14s}")
    worst = float("inf")
    for c in configs:
        lk, hp = statistics.median(theirs[c]), statistics.median(ours[c])
        ratio, lo, hi = round_ratios(ours[c], theirs[c])
        worst = min(worst, ratio)
        per_cycle = ""
        if c[0] == "L1" and ghz[c[1]]:  # MB/s / (MHz x cores) = B/cycle/core
            mhz = statistics.median(ghz[c[1]]) * 1000.0 * c[1]
            per_cycle = f"{lk / mhz:6.1f} {hp / mhz:6.1f}"
        print(f"{c[0]:5s} {c[1]:3d} {c[2]:18s} {lk:12.0f} {hp:14.0f} {ratio:6.3f} "
              f"{lo:6.3f}-{hi:.3f} {per_cycle:>14s}")
    print(f"lowest ratio hpcprobe/likwid-bench: {worst:.3f} (target >= 0.99); median of "
          f"{a.rounds} interleaved rounds' ratios; hpcprobe profile {a.profile}")
    for t in threads:
        if ghz[t]:
            print(f"core clock under {isa} load, {t} core(s): "
                  f"{statistics.median(ghz[t]):.2f} GHz "
                  f"(median of {len(ghz[t])} rounds); B/cycle/core columns: likwid, hpcprobe")
    return 0


if __name__ == "__main__":
    sys.exit(main())
