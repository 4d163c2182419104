#!/usr/bin/env python3
"""How stable the cluster verdict is on a noisy fabric (issue 48, item 6): a 5-node namespace
Slurm cluster on this machine's CPUs (tests/slurmcluster.py; root), one node's slurmd under a
40 % CPU quota and one node's port shaped to 200 Mbit/s towards it, the same campaign (quick
probe `compute,memory --threads 1`, `--concurrency 1`, default thresholds) run REPS times.
For each: whether the slow node was found, whether the shaped port was found (flagged as a slow
endpoint or its links, or listed as not judged with why), and the drain lines given to
untouched nodes (false drains); then the rates over the repetitions.

Usage (as root): benchmarks/verdict_stability.py [--reps 4] [--slow n2] [--shaped n4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import slurmcluster  # noqa: E402
from hpcprobe import native  # noqa: E402

PROBE = ["--probe", "compute,memory", "--probe-args", f"--threads 1 --isa {native.best_isa()}",
         "--concurrency", "1", "--ranks-per-node", "1", "--link-parallel", "1"]


def hpcprobe(c: slurmcluster.Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return c.client(sys.executable, "-m", "hpcprobe", *argv, timeout=900,
                    env={"OMPI_MCA_mpi_yield_when_idle": "1"})


def one(c: slurmcluster.Cluster, tmp: Path, tag: str, slow: str, shaped: str) -> dict:
    db = str(tmp / "r.sqlite")
    with c.slow(slow, 0.4), c.shaped(shaped, "200mbit"):
        t0 = time.perf_counter()
        run = hpcprobe(c, "cluster", "run", "-p", "test", "--tag", tag, "--db", db,
                       "--workdir", str(tmp / tag), *PROBE)
        took = time.perf_counter() - t0
    rep = hpcprobe(c, "cluster", "report", tag, "--db", db, "--json")
    if rep.returncode not in (0, 1):
        sys.exit(f"{tag}: cluster report failed: {rep.stderr or run.stderr}")
    doc = json.loads(rep.stdout)
    found = [(f["kind"], f["item"], f["confirmed"]) for f in doc["findings"]]
    reasons = {cmd.split("NodeName=")[1].split()[0]: cmd.split("Reason=", 1)[1]
               for cmd in doc.get("drain", [])}
    drained = sorted(reasons)
    return {"tag": tag, "seconds": round(took),
            "slow found": any(k == "slow node" and i == slow for k, i, _ in found),
            "shaped found": any(shaped in i.split(" - ") and k != "slow node"
                                for k, i, _ in found)
            or any(shaped in u for u in doc["unjudged"]),
            "false drains": [f"{n} ({reasons[n]})" for n in drained if n not in (slow, shaped)],
            "evidence": {f["item"]: "; ".join(f"{d['metric']} {-(d['worse'] or 0):+.1%} z "
                                             f"{d['z']}" for d in f["evidence"][:2])
                         for f in doc["findings"] if f["item"] not in (slow,)},
            "suspects": [s["item"] for s in doc.get("suspects", [])],
            "findings": found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--slow", default="n2")
    ap.add_argument("--shaped", default="n4")
    a = ap.parse_args()
    if (why := slurmcluster.missing()) is not None:
        sys.exit(why)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, slurmcluster.cluster(5) as c:
        for i in range(a.reps):
            rows.append(one(c, Path(tmp), f"stab{i}", a.slow, a.shaped))
            r = rows[-1]
            said = {k: "found" if r[f"{k} found"] else "MISSED" for k in ("slow", "shaped")}
            print(f"{r['tag']}: {r['seconds']} s; slow node {said['slow']}, shaped port "
                  f"{said['shaped']}, false drains {r['false drains'] or 'none'}, suspects "
                  f"{r['suspects'] or 'none'}; findings {r['findings']}; evidence "
                  f"{r['evidence']}", flush=True)
    n = len(rows)
    print(f"over {n} campaign(s): slow node missed {sum(not r['slow found'] for r in rows)}/{n}, "
          f"shaped port missed {sum(not r['shaped found'] for r in rows)}/{n}, campaigns with a "
          f"false drain {sum(bool(r['false drains']) for r in rows)}/{n}")


if __name__ == "__main__":
    main()
