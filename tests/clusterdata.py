"""Synthetic campaigns for the verdict's tests and the scale benchmark: node runs made from one
recorded node probe (tests/data/cluster/probe-quick.json, measured on a 2-core KVM guest), each
figure scaled per node (a slow node's figures worse by a factor) with a little noise, and a
campaign run with link figures (slow links or endpoints worse by a factor)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from hpcprobe.cluster import pairs as pairing
from hpcprobe.cluster.verdict import CAMPAIGN
from hpcprobe.results.model import Metric, Run, read_json
from hpcprobe.schedulers import Job, Scheduler

TEMPLATE = Path(__file__).parent / "data" / "cluster" / "probe-quick.json"
#: Link figures of a healthy pair: (benchmark, name, unit, better, value).
LINKS = (("latency", "us", "lower", 1.8), ("bandwidth", "MB/s", "higher", 12000.0),
         ("message_rate", "messages/s", "higher", 9e7))


def _worse(value: float, better: str, factor: float) -> float:
    """A figure `factor` as good (0.7: 30 % worse), whichever way is better."""
    return value * factor if better == "higher" else value / factor


def node_run(template: Run, host: str, factor: float, rng: random.Random, noise: float,
             minute: int, tag: str) -> Run:
    metrics = [replace(m, samples=[_worse(x, m.better, factor) * (1 + rng.gauss(0, noise))
                                   for x in m.samples]) for m in template.metrics]
    return replace(template, run_id=f"{rng.getrandbits(48):012x}", host=host, tag=tag,
                   created=f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00+00:00",
                   metrics=metrics)


def campaign_run(nodes: list[str], rng: random.Random, noise: float, tag: str, minute: int,
                 slow_links: dict[tuple[str, str], float], slow_endpoints: dict[str, float],
                 failed: dict[str, str], samples: int = 5, role: str = "campaign",
                 rounds: list[list[tuple[str, str]]] | None = None) -> Run:
    """The driver's run: node list, failures, link figures of the schedule's pairs."""
    if rounds is None:
        up = [n for n in nodes if n not in failed]
        rounds = [[(up[a], up[b]) for a, b in r] for r in pairing.schedule(len(up))]
    metrics = []
    for a, b in (pr for r in rounds for pr in r):
        factor = slow_links.get((a, b), 1.0) * slow_endpoints.get(a, 1.0) * \
            slow_endpoints.get(b, 1.0)
        for name, unit, better, value in LINKS:
            ends = [{"from": a, "to": b}, {"from": b, "to": a}] if name == "bandwidth" \
                else [{"a": a, "b": b}]
            for where in ends:
                metrics.append(Metric("links", name, unit, {**where, "size": 8}, [
                    _worse(value, better, factor) * (1 + rng.gauss(0, noise))
                    for _ in range(samples)], better))
    for n in (2, 4, 8):
        if n <= len(nodes):
            metrics.append(Metric("scaling", "allreduce", "us", {"nodes": n, "size": 8},
                                  [3.0 * n.bit_length()] * samples, "lower"))
    prov = {"host": "login", "cpu_model": None, "kernel": "Linux", "hpcprobe_version": "0",
            "compiler": "", "isa_supported": [], "environment": {},
            CAMPAIGN.key: {"role": role, "nodes": nodes, "done": [n for n in nodes
                                                             if n not in failed],
                       "failed": failed}}
    return Run(f"{rng.getrandbits(48):012x}", f"2026-01-01T{minute // 60:02d}:"
               f"{minute % 60:02d}:30+00:00", "login", "quick", ["links"], prov, {}, metrics,
               tag=tag, kind="campaign")


def campaign(n: int, slow_nodes: dict[str, float] | None = None,
             slow_links: dict[tuple[str, str], float] | None = None,
             slow_endpoints: dict[str, float] | None = None, failed: dict[str, str] | None = None,
             noise: float = 0.01, seed: int = 0, tag: str = "c1", template: Run | None = None
             ) -> tuple[list[str], list[Run]]:
    """n nodes (n1..), their node runs and the campaign run, one pass, no re-measure."""
    rng = random.Random(seed)
    template = template or read_json(TEMPLATE)
    nodes = [f"n{i + 1}" for i in range(n)]
    failed = failed or {}
    runs = [node_run(template, h, (slow_nodes or {}).get(h, 1.0), rng, noise, 0, tag)
            for h in nodes if h not in failed]
    runs.append(campaign_run(nodes, rng, noise, tag, 1, slow_links or {}, slow_endpoints or {},
                             failed))
    return nodes, runs


class RunsNothing(Scheduler):
    """The part of a stand-in scheduler that every stand-in shares: it is always there, knows
    no partition, gives each node one CPU, drains nothing, and cancels a job by marking it;
    a stand-in says how jobs are submitted and how they end (`submit`, `poll`)."""

    def cancel(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if not job.finished:
                job.state = "CANCELLED"

    def stacks(self, jobs: Sequence[Job]) -> None: ...

    def available(self) -> str | None:
        return None

    def nodes(self, partition: str | None = None, nodelist: str | None = None) -> list[str]:
        return []

    def cpus(self, nodes: Sequence[str]) -> dict[str, int]:
        return dict.fromkeys(nodes, 1)

    def drain_argv(self, node: str, reason: str) -> list[str]:
        return []

    def drain(self, node: str, reason: str) -> None: ...
