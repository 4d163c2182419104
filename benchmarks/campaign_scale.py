#!/usr/bin/env python3
"""The campaign driver at fleet scale, against a simulated scheduler (issue 64, item 5):
`Campaign.execute` on NODES nodes, each node job answered as a scheduler answers. Each job
waits a few polls to start and a few more to end; some jobs are delayed, some fail (the job
ends FAILED without a document), and some are lost (NODE_FAIL, no document). The node
documents are the recorded default node probe (tests/data/cluster/probe-quick.json), scaled
per node with 1 % noise and a few slow nodes. The links job writes the MPI program's lines
for every pair of the schedule (ring and random matchings), with a few slow links. The driver
re-measures what it flagged, as a real campaign does; then the report (`verdict`) is timed
apart.

It prints the driver's own CPU time (the process's, less what the simulated scheduler and nodes
spent writing the documents, which real nodes do elsewhere) and its parts (reading the
documents, storing their runs, the verdicts), its peak memory (the process's, the simulation
included) and the report's time, and checks that the failed and lost nodes, and nothing
healthy, are the campaign's failures. Goals of issue 64: the driver under 1 GiB and under 10 s
of its own CPU for 1,000 nodes; the report at most 5 s.

Usage: benchmarks/campaign_scale.py [--nodes 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import clusterdata  # noqa: E402
from hpcprobe import registry  # noqa: E402
from hpcprobe.cluster.campaign import Campaign, Plan  # noqa: E402
from hpcprobe.cluster.verdict import FleetVerdict  # noqa: E402
from hpcprobe.common import jsondoc  # noqa: E402
from hpcprobe.results.model import Run, read_json  # noqa: E402
from hpcprobe.results.store import Store  # noqa: E402
from hpcprobe.schedulers import Job, JobSpec  # noqa: E402


class Quiet:
    def start(self, *_: object) -> None: ...

    def advance(self, *_: object) -> None: ...


class Simulated(clusterdata.RunsNothing):
    """A scheduler that runs nothing: each job starts after 1-3 polls (10-20 for a delayed
    one) and ends 1-4 polls later, writing its document; a failing node's job ends FAILED
    and a lost node's NODE_FAIL, neither with a document."""

    name = "simulated"
    description = "answers as a scheduler, runs nothing"

    def __init__(self, rng: random.Random, failing: set[str], lost: set[str],
                 delayed: set[str], slow: dict[str, float],
                 slow_links: dict[tuple[str, str], float]) -> None:
        super().__init__()
        self.rng, self.failing, self.lost, self.delayed = rng, failing, lost, delayed
        self.slow, self.slow_links = slow, slow_links
        self.template = read_json(clusterdata.TEMPLATE)
        self.plan: dict[str, tuple[int, int]] = {}  # job id -> (polls to start, to end)
        self.polls: dict[str, int] = {}
        self.submitted = 0
        self.cpu = 0.0  # CPU time spent being the scheduler and the nodes (not the driver's)

    def submit(self, spec: JobSpec) -> Job:
        self.submitted += 1
        job = Job(spec, str(self.submitted))
        wait = self.rng.randint(10, 20) if spec.nodes[0] in self.delayed else \
            self.rng.randint(1, 3)
        self.plan[job.id] = (wait, wait + self.rng.randint(1, 4))
        self.polls[job.id] = 0
        return job

    def poll(self, jobs: Sequence[Job]) -> None:
        t0 = time.process_time()
        try:
            self._poll(jobs)
        finally:
            self.cpu += time.process_time() - t0

    def _poll(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if job.finished:
                continue
            self.polls[job.id] += 1
            start, end = self.plan[job.id]
            if self.polls[job.id] >= start and job.started is None:
                job.state, job.started = "RUNNING", time.monotonic()
            if self.polls[job.id] >= end:
                self._end(job)

    def _end(self, job: Job) -> None:
        spec = job.spec
        if len(spec.nodes) > 1:  # the links job
            self._links(spec)
            job.state = "COMPLETED"
            return
        node = spec.nodes[0]
        if node in self.lost:
            job.state = "NODE_FAIL"
            return
        if node in self.failing:
            job.state = "FAILED"
            return
        doc = spec.argv[spec.argv.index("--json") + 1]
        run = clusterdata.node_run(self.template, node, self.slow.get(node, 1.0), self.rng,
                                   0.01, 0, spec.argv[spec.argv.index("--tag") + 1])
        # as a node writes it: checked there, in its own process, so not found checked
        # already by the driver's (whose own check of it counts)
        Path(doc).write_text(jsondoc.dumps(replace(run, host=node).to_dict(), indent=1) + "\n")
        job.state = "COMPLETED"

    def _links(self, spec: JobSpec) -> None:
        """The MPI program's lines: the nodes, then latency and bandwidth samples of every
        pair of the schedule, then done."""
        pairs_file = spec.argv[spec.argv.index("--pairs") + 1]
        index = {h: i for i, h in enumerate(spec.nodes)}
        lines = [json.dumps({"type": "node", "index": i, "host": h})
                 for h, i in index.items()]
        for r in Path(pairs_file).read_text().splitlines():
            names = r.split()
            lines.append('{"type":"begin"}')
            for a, b in zip(names[::2], names[1::2], strict=True):
                f = self.slow_links.get((a, b), self.slow_links.get((b, a), 1.0))
                for test, value in (("latency", 1.8 / f), ("bandwidth", 12000.0 * f)):
                    for _ in range(3):
                        lines.append(json.dumps({
                            "type": "sample", "test": test, "a": index[a], "b": index[b],
                            "size": 8, "value": value * (1 + self.rng.gauss(0, 0.01))}))
        lines.append('{"type":"done"}')
        spec.output.write_text("\n".join(lines) + "\n")



class Timed(Campaign):
    """The campaign, its own CPU time taken apart: reading the node documents (parse, check,
    runs), storing them, and the verdicts (the collector's passes count where they fall)."""

    parts: dict[str, float] = {}

    def _timed(self, part: str, call: Any, *args: Any) -> Any:
        t0 = time.process_time()
        try:
            return call(*args)
        finally:
            self.parts[part] = self.parts.get(part, 0.0) + time.process_time() - t0

    def _read(self, output: Path, host: str | None = None) -> Run | str:
        return self._timed("reading the documents", super()._read, output, host)

    def _save(self, runs: list[Run], checked: bool = False) -> None:
        self._timed("storing their runs", super()._save, runs, checked)

    def verdict(self) -> FleetVerdict:
        return self._timed("the verdicts", super().verdict)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    nodes = [f"n{i:04d}" for i in range(1, a.nodes + 1)]
    picked = rng.sample(nodes, 12)
    failing, lost, delayed = set(picked[:3]), set(picked[3:5]), set(picked[5:9])
    slow = {n: 0.7 for n in picked[9:11]}
    healthy = [n for n in nodes if n not in failing | lost]
    slow_links = {(healthy[0], healthy[1]): 0.5}
    sched = Simulated(rng, failing, lost, delayed, slow, slow_links)
    with tempfile.TemporaryDirectory(prefix="hpb-campaign-scale-") as tmp:
        work = Path(tmp)
        plan = Plan("scale", nodes, work, ["memory", "compute"], [], timeout_s=3600,
                    start_timeout_s=3600, poll_s=0.0, not_joined=registry.not_joined(),
                    headlines=registry.declared())
        with Store.open(work / "r.sqlite") as store:
            camp = Timed(sched, store, plan, Quiet(), say=lambda *_: None)
            camp.exe = Path("/bin/true")  # the links program: the scheduler answers for it
            cpu0, wall0 = time.process_time(), time.perf_counter()
            v = camp.execute()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            t0 = time.perf_counter()
            again = Campaign(sched, store, plan, Quiet()).verdict()  # read from the store
            report = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{a.nodes} nodes, {sched.submitted} jobs submitted (node jobs and links jobs, "
          "re-measures included)")
    print(f"driver: {cpu - sched.cpu:.1f} s of its own CPU ({cpu:.1f} s with the simulated "
          f"nodes writing their documents), {wall:.1f} s wall (the polls sleep "
          f"len(active)/200 s each, as for a real scheduler), peak memory {peak_mib:.0f} MiB")
    own = cpu - sched.cpu
    print("the driver's parts: " + ", ".join(f"{k} {v:.1f} s" for k, v in Timed.parts.items())
          + f", the rest {own - sum(Timed.parts.values()):.1f} s (polls, jobs, links, the "
          "collector's passes outside those)")
    print(f"report (the verdict from the store): {report:.2f} s")
    print(f"failed: {sorted(v.failed)}")
    print("findings: " + "; ".join(f"{f.kind} {f.item}" for f in v.findings))
    ok = set(v.failed) == failing | lost and again.failed.keys() == v.failed.keys()
    print("the failed and lost nodes, and no other, are the campaign's failures: "
          + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
