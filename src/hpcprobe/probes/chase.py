"""Pointer-chase samples on a pinned team: ns per dependent load in the steady state (shared by
the families that chase: latency, numa)."""

from __future__ import annotations

import math
import os

from hpcprobe.machine.sizing import llc_bytes
from hpcprobe.machine.smaps import mapping_pages, page_label, read_self
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import sampling
from hpcprobe.measure.family import RunContext
from hpcprobe.native import Team
from hpcprobe.results.findings import Finding, kind

#: Lines at least this far apart: one per cache line, so every load misses to the next level.
STRIDE = 64


#: The DRAM point: at least this, and at least twice the last-level cache.
MIN_DRAM = 1 << 30


#: Loads per sample are a multiple of this (the chase loop is unrolled 16 times).
LOAD_QUANTUM = 16


SEED = 0x5EED


#: Settling a cache-resident ring before a batch of samples may take this many samples' time,
#: and at least REWARM_MIN_S.
REWARM_SAMPLES = 10


REWARM_MIN_S = 0.05
#: More than this share of a figure's timed samples rejected as disturbed is a finding that
#: names the host's load (a few disturbed samples are said in one warning line).
MOSTLY = 0.5
MOSTLY_REJECTED = kind(
    "mostly_rejected", "most of a figure's timed samples were disturbed by the host's other "
    "load: the figure stands on what was left (or on the settled passes of the ring)",
        code="HP105", action="re-measure")


#: A cache-resident sample this much slower than the settled ring is disturbed (rejected).
DISTURBED = 0.3


#: A ring over this share of its cache level does not stay whole in it: its 4 KiB pages land on
#: the cache's sets by physical address and some sets overflow, so its passes vary by
#: themselves (its latency lies between the levels) and no sample is judged against its
#: settled pass. A Xeon guest's (AVX-512, 2 MiB L2) ring of its whole L2 had all 12 rejected.
RESIDENT_SHARE = 0.5


#: Rings up to this many lines are walked once round in validation; larger ones this far.
CHECK_STEPS = 1 << 20


def dram_size(topo: Topology, cpu: int, floor: int = MIN_DRAM) -> int:
    """Twice the last-level cache serving `cpu`, at least `floor`, rounded up to a power of
    two."""
    need = max(floor, 2 * llc_bytes(topo, [cpu]))
    return 1 << math.ceil(math.log2(need))


def chase_samples(ctx: RunContext, team: Team, budget_s: float, label: str,
                  rewarm_bytes: int = 0, *, benchmark: str, judged: bool = True) -> list[float]:
    """ns per dependent load in the steady state: samples of at least sample_s, after a warm-up
    that walks the ring until successive samples agree. A cache-resident ring (rewarm_bytes > 0)
    is also settled before every batch of samples: the host evicts it from a shared L3 while
    the thread waits between batches, and an AMD L3 (a victim cache) takes several passes to
    refill, so whole passes are walked, untimed, until two successive ones agree. Where
    `judged` (the ring fits its cache with room: RESIDENT_SHARE), a sample far slower than the
    settled ring is rejected."""
    loads = 1024
    for _ in range(6):
        took = team.chase_measure(loads, 1)[0][0]
        if took >= ctx.profile.sample_s:
            break
        loads = max(loads * 2, math.ceil(loads * 1.2 * ctx.profile.sample_s / max(took, 1e-9)))
        loads = -(-loads // LOAD_QUANTUM) * LOAD_QUANTUM
    ring = -(-(rewarm_bytes // STRIDE) // LOAD_QUANTUM) * LOAD_QUANTUM

    best = math.inf  # ns per load of the fastest settled pass so far
    settled: list[float] = []  # ns per load of each settled pass: whole passes that agreed

    def disturbed(ns: float) -> bool:
        # a sample far slower than the settled ring lost it to the host's other tenants during
        # the sample (it comes back 5-15x slower): not this cache level's latency
        return judged and ns > best * (1 + DISTURBED)

    def take(n: int) -> list[float | None]:
        nonlocal best
        if not ring:
            return [t[0] / loads * 1e9 for t in team.chase_measure(loads, n)]
        settled.append(settle(team, ring, max(REWARM_MIN_S,
                                              ctx.profile.sample_s * REWARM_SAMPLES)))
        best = min(best, settled[-1])
        return [None if disturbed(ns) else ns
                for ns in (t[0] / loads * 1e9 for t in team.chase_measure(loads, n))]

    got = sampling.sample(take, ctx.profile.repetition, budget_s)
    # a batch kept before a later settle found the ring faster was disturbed all along
    kept = [x for x in got.samples if not disturbed(x)]
    got.rejected += len(got.samples) - len(kept)
    got.samples = kept
    _said(ctx, benchmark, label, got, settled)
    return ctx.record(benchmark, label, got)


def _said(ctx: RunContext, benchmark: str, label: str, got: sampling.Sampled,
          settled: list[float]) -> None:
    """Rejected samples said: a few in a warning line; most of them in a finding that names
    the host's load. Where every timed sample was disturbed, the settled passes of the ring
    (each a whole pass that agreed with the one before it) are the figure: the host's noise
    costs a figure its precision, not the figure."""
    if not got.rejected:
        return
    timed = got.rejected + len(got.samples)
    if got.rejected <= MOSTLY * timed:
        ctx.warnings.append(f"{benchmark} {label}: {got.rejected} sample(s) rejected, more than "
                            f"{100 * DISTURBED:.0f} % slower than the settled ring (evicted by "
                            "other tenants of the host's cache?)")
        return
    source = "its remaining samples"
    if not got.samples and settled:
        got.samples, source = list(settled), f"the {len(settled)} settled pass(es) of the ring"
    if not got.samples:
        return  # nothing measured at all: the family says there is no figure
    load = os.getloadavg()[0]
    ctx.find(Finding(benchmark, MOSTLY_REJECTED,
                     f"{label}: {got.rejected} of {timed} timed samples rejected, more than "
                     f"{100 * DISTURBED:.0f} % slower than the settled ring: the host was busy "
                     f"(1-minute load average {load:.1f} on {os.cpu_count()} CPU(s), or "
                     "another guest on its cache); the figure is from "
                     f"{source}: run it again on a quiet node for a tighter one",
                     {"figure": label, "rejected": got.rejected, "timed": timed,
                      "from": "settled passes" if source.startswith("the ") else "samples",
                      "load_average": round(load, 2)}))


def settle(team: Team, ring_loads: int, limit_s: float) -> float:
    """Walk the ring once round at a time until two successive passes agree (or limit_s); ns
    per load of the last pass."""
    prev, spent = 0.0, 0.0
    while True:
        took = team.chase_measure(ring_loads, 1)[0][0]
        spent += took
        if sampling.agree(took, prev, sampling.WARMUP_AGREE) or spent >= limit_s:
            return took / ring_loads * 1e9
        prev = took


def granted_pages(team: Team, cpu: int, base_page: int, huge_page: int) -> tuple[str, float]:
    """The page size the ring really got, from /proc/self/smaps."""
    addr, _ = team.chase_mapping(cpu)
    pages = mapping_pages(read_self(), addr)
    if pages is None:
        return f"{base_page // 1024}KiB", 0.0
    return page_label(pages[0], pages[1], base_page, huge_page)
