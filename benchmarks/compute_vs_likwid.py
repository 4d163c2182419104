#!/usr/bin/env python3
"""hpcprobe's peak FLOP/s side by side with likwid-bench's peakflops tests, interleaved in one run.

For each likwid-bench test (peakflops_avx512_fma, peakflops_avx_fma, peakflops: double precision,
AVX-512 FMA, AVX2 FMA and scalar SSE multiply + add) and thread count (1, 2), both tools run on
the same CPUs, alternating which goes first, for several rounds. hpcprobe runs its compute
benchmark (the clock under the same ISA load, then the peak and its model) through the same code
path as `hpcprobe run compute --isa ... --threads ... --precision dp`.
Printed: each tool's median MFLOP/s, the median over rounds of the ratio within a round, and
hpcprobe's % of its measured-clock model.

Usage: benchmarks/compute_vs_likwid.py [--rounds 5] [--threads 1,2] [--profile thorough]
Needs Debian's likwid (likwid-bench); tests whose ISA this CPU lacks are left out.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

from sidebyside import in_turn, missing, round_ratios

from hpcprobe import native, registry
from hpcprobe.families.compute.bench import ComputeOptions
from hpcprobe.machine import topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress

#: likwid-bench test -> hpcprobe (isa, op), double precision
SHAPES = {
    "peakflops_avx512_fma": ("avx512", "fma"),
    "peakflops_avx_fma": ("avx2", "fma"),
    "peakflops": ("scalar", "mul+add"),
}
#: likwid-bench's peakflops tests stream over an array; this keeps it in L1 (per thread).
L1_KB = 16


def likwid(test: str, threads: int, seconds: float) -> float:
    """MFLOP/s of one likwid-bench run."""
    out = subprocess.run(
        ["likwid-bench", "-t", test, "-s", str(seconds), "-W", f"S0:{L1_KB * threads}kB:{threads}"],
        capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^MFlops/s:\s+([\d.]+)", out, re.M).group(1))


def hpcprobe(topo: topology.Topology, isa: str, op: str, threads: int,
             profile: str) -> tuple[float, float, float]:
    """(median MFLOP/s, % of the model, clock GHz under the ISA's load) of one measurement."""
    opts = {"compute": ComputeOptions(isa=isa, precisions=("dp",), threads=(threads,))}
    run = registry.execute(topo, profiles.get(profile), ["compute"], isa, opts, NoProgress())
    if run.errors:
        raise SystemExit(f"hpcprobe failed: {run.errors}")
    found = {m.name: m for m in run.metrics if m.params.get("op") == op or m.name == "clock"}
    peak, model = found["peak"].summary.median, found["peak_model"].summary.median
    return peak * 1000.0, 100.0 * peak / model, found["clock"].summary.median


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--profile", default="thorough",
                    help="hpcprobe profile; thorough samples for about as long as likwid-bench "
                         "runs (up to 100 samples of 10 ms)")
    ap.add_argument("--likwid-seconds", type=float, default=1.0,
                    help="likwid-bench -s (its default, 1 s)")
    a = ap.parse_args()
    if missing("likwid-bench"):
        return 2
    topo = topology.discover()
    have = native.supported_isas()
    tests = [t for t, (isa, _) in SHAPES.items() if isa in have]
    threads = [int(t) for t in a.threads.split(",") if int(t) <= len(topo.allowed_cpus)]
    configs = [(test, t) for t in threads for test in tests]
    ours: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    pct: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    ghz: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    theirs: dict[tuple[str, int], list[float]] = {c: [] for c in configs}
    for r in range(a.rounds):
        for i, (test, t) in enumerate(configs):
            isa, op = SHAPES[test]
            for step in in_turn("likwid", "hpcprobe", r + i):
                if step == "likwid":
                    theirs[(test, t)].append(likwid(test, t, a.likwid_seconds))
                else:
                    mflops, p, g = hpcprobe(topo, isa, op, t, a.profile)
                    ours[(test, t)].append(mflops)
                    pct[(test, t)].append(p)
                    ghz[(test, t)].append(g)
            print(f"round {r + 1}/{a.rounds}: {test:21s} {t}T done", file=sys.stderr)
    print(f"{'likwid-bench test':21s} {'thr':>3s} {'likwid MFLOP/s':>15s} "
          f"{'hpcprobe MFLOP/s':>17s} {'ratio':>6s} {'ratio range':>13s} {'% model':>8s} "
          f"{'clock GHz':>9s}")
    worst, worst_pct = float("inf"), float("inf")
    for c in configs:
        ratio, lo, hi = round_ratios(ours[c], theirs[c])
        p = statistics.median(pct[c])
        worst, worst_pct = min(worst, ratio), min(worst_pct, p)
        print(f"{c[0]:21s} {c[1]:3d} {statistics.median(theirs[c]):15.0f} "
              f"{statistics.median(ours[c]):17.0f} {ratio:6.3f} {lo:6.3f}-"
              f"{hi:.3f} {p:8.1f} {statistics.median(ghz[c]):9.3f}")
    print(f"lowest ratio hpcprobe/likwid-bench: {worst:.3f} (target >= 0.99); lowest % of the "
          f"measured-clock model: {worst_pct:.1f} (target >= 97); medians of {a.rounds} "
          f"interleaved rounds; hpcprobe profile {a.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
