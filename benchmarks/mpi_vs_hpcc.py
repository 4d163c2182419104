#!/usr/bin/env python3
"""hpcprobe's MPI point-to-point figures side by side with Debian hpcc's PingPong, interleaved.

Both run on the same MPI (the one hpcprobe finds), the same launcher and the same binding (two
ranks on the first two CPUs of one-per-core; hpcc's argv is built by hpcprobe's launcher code).
hpcc runs with a small HPL (N = 1000) so that it ends quickly; its PingPong latency uses 8-byte
messages, its bandwidth 2,000,000-byte messages with one message in flight (a ping-pong), where
OSU's bandwidth keeps a window of 64 in flight. Printed: hpcprobe's latency at 0 B, 8 B, 1 KiB,
64 KiB and bandwidth / bidirectional bandwidth at 4 MiB (and 2 MiB), hpcc's figures, and the
median over rounds of the within-round ratio hpcprobe / hpcc, for hpcprobe's median sample and
its best (lowest latency, highest bandwidth) sample of each round.

Usage: benchmarks/mpi_vs_hpcc.py [--rounds 3]
Needs an MPI (make setup installs Debian's Open MPI as root) and Debian's hpcc.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from sidebyside import in_turn, missing, round_ratios

from hpcprobe import native, registry
from hpcprobe.families.hpl import inputs
from hpcprobe.families.mpi.bench import MpiOptions
from hpcprobe.machine import topology
from hpcprobe.machine.placement import plan
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.mpi import find, launchers
from hpcprobe.mpi.launchers import Layout

MiB = 1 << 20
#: a small HPL (N 1000) so that hpcc ends quickly
HPCC_INPUT = inputs.hpccinf(inputs.Problem((1000,), (80,), 1, 2))
#: (label, hpcprobe metric, size) -> the hpcc figure it is compared with (or None)
FIGURES = [
    ("latency 0 B (us)", "latency", 0, None),
    ("latency 8 B (us)", "latency", 8, "AvgPingPongLatency_usec"),
    ("latency 1 KiB (us)", "latency", 1024, None),
    ("latency 64 KiB (us)", "latency", 64 * 1024, None),
    ("bandwidth 2 MiB (MB/s)", "bandwidth", 2 * MiB, "AvgPingPongBandwidth_MBs"),
    ("bandwidth 4 MiB (MB/s)", "bandwidth", 4 * MiB, "AvgPingPongBandwidth_MBs"),
    ("bibw 4 MiB (MB/s)", "bibw", 4 * MiB, "AvgPingPongBandwidth_MBs"),
]


def hpcc(mpi: find.Mpi, layout: Layout) -> dict[str, float]:
    """hpcc's PingPong figures (latency in us, bandwidth in MB/s = 10^6 B/s)."""
    launcher, path = launchers.choose(mpi, None)
    with tempfile.TemporaryDirectory(prefix="hpcc-") as tmp:
        (Path(tmp) / "hpccinf.txt").write_text(HPCC_INPUT)
        spec = launcher.build(path, mpi, layout, [shutil.which("hpcc") or "hpcc"], Path(tmp),
                              {})
        subprocess.run(spec.argv, cwd=tmp, env={**__import__("os").environ, **spec.env},
                       check=True, capture_output=True, timeout=600)
        text = (Path(tmp) / "hpccoutf.txt").read_text()
    vals = {k: float(v) for k, v in re.findall(r"^(\w+PingPong\w+)=([\d.eE+-]+)$", text, re.M)}
    vals["AvgPingPongBandwidth_MBs"] = vals["AvgPingPongBandwidth_GBytes"] * 1000.0
    return vals


def hpcprobe(topo: topology.Topology) -> dict[tuple[str, int, str], float]:
    """Median and best sample of hpcprobe's OSU-convention tests on 2 ranks, full iteration
    counts: (name, size, "median" or "best") -> figure."""
    opts = MpiOptions(np=2, tests=("latency", "bandwidth", "bibw"), max_size=4 * MiB,
                      full=True)
    run = registry.execute(topo, profiles.get("default"), ["mpi"], native.best_isa(),
                         {"mpi": opts}, NoProgress())
    if run.errors:
        raise SystemExit(f"hpcprobe failed: {run.errors}")
    out = {}
    for m in run.metrics:
        best = min(m.samples) if m.better == "lower" else max(m.samples)
        out[(m.name, m.params["size_bytes"], "median")] = m.summary.median
        out[(m.name, m.params["size_bytes"], "best")] = best
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if missing("hpcc"):
        return 2
    mpi = find.find()
    topo = topology.discover()
    cpus = plan(topo, "one-per-core", 2, oversubscribe=True).cpus
    ours: list[dict[tuple[str, int, str], float]] = []
    theirs: list[dict[str, float]] = []
    for r in range(a.rounds):
        for step in in_turn("hpcc", "hpcprobe", r):
            if step == "hpcc":
                theirs.append(hpcc(mpi, Layout(cpus)))
            else:
                ours.append(hpcprobe(topo))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"{mpi.implementation} {mpi.version}, 2 ranks on CPUs {cpus[0]},{cpus[1]}; medians of "
          f"{a.rounds} interleaved rounds")
    print(f"{'figure':24s} {'hpcprobe median':>15s} {'best':>10s} {'hpcc':>10s} "
          f"{'ratio median':>12s} {'ratio best':>10s}  note")
    for label, name, size, key in FIGURES:
        med = statistics.median(o[(name, size, "median")] for o in ours)
        best = (min if name == "latency" else max)(o[(name, size, "best")] for o in ours)
        if key is None:
            print(f"{label:24s} {med:15.2f} {best:10.2f} {'-':>10s} {'-':>12s} {'-':>10s}")
            continue
        other = statistics.median(t[key] for t in theirs)
        ratios = {kind: round_ratios([o[(name, size, kind)] for o in ours],
                                     [t[key] for t in theirs])[0] for kind in ("median", "best")}
        note = ("hpcc: 8 B ping-pong; lower is better" if name == "latency" else
                "hpcc: 2,000,000 B ping-pong (1 in flight); hpcprobe: window of 64" +
                ("; both directions counted" if name == "bibw" else ""))
        print(f"{label:24s} {med:15.2f} {best:10.2f} {other:10.2f} {ratios['median']:12.3f} "
              f"{ratios['best']:10.3f}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
