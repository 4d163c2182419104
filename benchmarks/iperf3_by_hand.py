#!/usr/bin/env python3
"""hpcprobe's iperf3 figures side by side with iperf3 run by hand over this host's loopback,
interleaved: TCP throughput, and UDP at a target rate (throughput, jitter, datagrams lost).

Per round in alternating order: `hpcprobe run iperf3 --iperf-time T --repeat 1 [--iperf-udp R]`
(hpcprobe starts its own server), and by hand what an iperf3 user types: `iperf3 -s` and
`iperf3 -c 127.0.0.1 -J -t T [-u -b R]`, the throughput received read from its document. The
median of the within-round throughput ratios hpcprobe / by hand should be 1.00: it is the same
program; a ratio away from 1 would mean hpcprobe's server, options or parsing distort it.

Usage: benchmarks/iperf3_by_hand.py [--rounds 5] [--time 2] [--rate 2G]
Needs Debian's iperf3 (make setup installs it as root).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

from sidebyside import hpcprobe_json, in_turn, missing, round_ratios

from hpcprobe import tools


def by_hand(seconds: int, rate: str | None) -> dict[str, float]:
    """One client run against a server of its own on loopback, as a user types them."""
    exe, port = tools.get("iperf3").find() or "iperf3", tools.free_port()
    server = subprocess.Popen([exe, "-s", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):  # the server may still be starting
            p = subprocess.run([exe, "-c", "127.0.0.1", "-p", str(port), "-J", "-t",
                                str(seconds), *(["-u", "-b", rate] if rate else [])],
                               capture_output=True, text=True, timeout=seconds + 60)
            if "unable to connect" not in p.stdout:
                break
            time.sleep(0.05)
    finally:
        server.terminate()
        server.wait(timeout=30)
    got = json.loads(p.stdout)["end"]["sum_received"]
    out = {"throughput": got["bits_per_second"] / 1e9}
    if rate:
        out.update(jitter=got["jitter_ms"], lost=100 * got["lost_packets"] / got["packets"])
    return out


def ours(seconds: int, rate: str | None) -> dict[str, float]:
    doc = hpcprobe_json(["run", "iperf3", "--iperf-time", str(seconds), "--repeat", "1",
                         *(["--iperf-udp", rate] if rate else [])])
    return {m["name"]: m["samples"][0] for m in doc["metrics"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time", type=int, default=2, help="seconds a run transmits")
    ap.add_argument("--rate", default="2G", help="the UDP target rate a stream")
    a = ap.parse_args()
    if missing("iperf3"):
        return 1
    for proto, rate in (("TCP", None), (f"UDP at {a.rate}", a.rate)):
        mine, theirs = [], []
        for k in range(a.rounds):
            got = {}
            for who in in_turn("hpcprobe", "by hand", k):
                got[who] = (ours if who == "hpcprobe" else by_hand)(a.time, rate)
            mine.append(got["hpcprobe"])
            theirs.append(got["by hand"])
        med, lo, hi = round_ratios([m["throughput"] for m in mine],
                                   [t["throughput"] for t in theirs])
        print(f"{proto}: throughput hpcprobe / by hand {med:.3f} (rounds {lo:.3f}-{hi:.3f}); "
              f"hpcprobe {[round(m['throughput'], 2) for m in mine]} Gbit/s, by hand "
              f"{[round(t['throughput'], 2) for t in theirs]}")
        if rate:
            for name, unit in (("jitter", "ms"), ("lost", "%")):
                print(f"  {name}: hpcprobe {[round(m[name], 3) for m in mine]} {unit}, by hand "
                      f"{[round(t[name], 3) for t in theirs]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
