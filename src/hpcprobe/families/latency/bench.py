"""The latency benchmark: a pointer-chase sweep from L1 to DRAM with the default page size and
with huge pages, each level checked against the topology, each page size verified."""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass, replace
from functools import partial

from hpcprobe.analysis.levels import CACHE_LEVEL, check_levels
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import flopmodel
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import (
    cache_shares,
    elems_for,
    free_memory,
    in_cache,
    level_of,
    llc_bytes,
)
from hpcprobe.machine.sysinfo import (
    THP_SYSFS,
    huge_page_bytes,
    huge_page_shortfall,
    sysfs_choice,
)
from hpcprobe.machine.topology import Topology, numa_of, relation
from hpcprobe.measure import options, sampling
from hpcprobe.measure.family import Flag, RunContext, option
from hpcprobe.native import CHASE_ORDERS, Team
from hpcprobe.native.kernels import KERNELS, bandwidth_gbs
from hpcprobe.probes.chase import (
    CHECK_STEPS,
    LOAD_QUANTUM,
    MIN_DRAM,
    RESIDENT_SHARE,
    SEED,
    STRIDE,
    chase_samples,
    dram_size,
    granted_pages,
)
from hpcprobe.results.findings import Finding
from hpcprobe.results.model import Metric

#: Pages per group of the walk for cache-resident rings: within the first-level TLB's reach
#: (64 or more entries on current cores), so cache latency is not page-walk latency.
TLB_GROUP_PAGES = 64
#: Smallest working set of the sweep.
MIN_SIZE = 8 << 10
#: Huge pages only matter once a walk leaves the TLB's reach: smaller sizes run once, and the
#: huge-page sweep takes every HUGE_STEP-th octave from there (and always the DRAM point).
HUGE_FROM = 4 << 20
HUGE_STEP = 2
#: Share of the latency budget for the core-to-core matrix.
C2C_BUDGET_SHARE = 0.2
#: A loaded-latency sample lasts at least this long, so streaming threads make several passes.
LOADED_SAMPLE_S = 0.2
#: Core-to-core pairs beyond this many are sampled more coarsely (see c2c_pairs).
MAX_PAIRS = 64


@dataclass(frozen=True)
class Settings:
    """What a profile gives the latency family."""

    budget_s: float  # the whole family
    loaded: bool  # latency under streaming load (needs DRAM-sized arrays)
    huge_page_sweep: bool  # the sweep again with transparent huge pages
    #: the octaves past the last-level cache walked before the DRAM point (None: all): each
    #: ring is written and shuffled before it is walked, and past the caches that costs more
    #: than the walk
    past_llc: int | None = None
    #: the DRAM ring's least size (twice the last-level cache if more): the quick profile's
    #: is a quarter of the others', whose 1 GiB ring takes 2.3 s to write on a Zen 3 guest,
    #: most of it the first touch of its pages (docs/methods.md)
    dram_floor: int = MIN_DRAM


SETTINGS = {
    "quick": Settings(3.0, loaded=False, huge_page_sweep=False, past_llc=1,
                      dram_floor=MIN_DRAM // 4),
    "default": Settings(3.0, loaded=True, huge_page_sweep=True),
    "thorough": Settings(60.0, loaded=True, huge_page_sweep=True),
}


@dataclass(frozen=True)
class LatencyOptions:
    """Options that narrow `hpcprobe run latency`."""

    size_bytes: int | None = option(options.SIZE, note="the ring size (default: a sweep)")
    cpu: int | None = option(Flag("--cpu", "the CPU that chases pointers (default: the first "
                                  "core)", parse=options.at_least(0, "an OS CPU number")))
    pages: str | None = option(Flag(  # "default", "huge" or None for both
        "--pages", "page size of the rings: the default one, transparent huge pages, or both "
        "(default: both)", choices=("default", "huge", "both"), convert=options.both_is_none))
    all_pairs: bool = option(Flag("--all-pairs", "core-to-core latency for every pair of cores, "
                                  "not a sample", switch=True), False)
    pair: tuple[int, int] | None = option(Flag(
        "--pair", "core-to-core latency of these two CPUs only", parse=options.cpu_pair,
        metavar="A,B"))
    loaded: bool | None = option(Flag(  # None: as the profile says
        "--loaded", "also measure latency while the other cores stream (the default and "
        "thorough profiles do)", switch=True))
    order: str = option(Flag(
        "--order", "the rings' order: ring keeps each line's 128-byte buddy (which the "
        "adjacent-line prefetcher fetches with it) half a ring away; random is the plain "
        "random order within TLB-sized groups that multichase and lmbench walk, where some "
        "loads hit those buddies (default: ring; see docs/methods.md)",
        choices=CHASE_ORDERS), "ring")


@dataclass(frozen=True)
class Point:
    """One working set of the sweep, with or without huge pages."""

    size_bytes: int
    huge: bool
    level: str


def plan(topo: Topology, cpu: int, opts: LatencyOptions, settings: Settings = SETTINGS["default"]
         ) -> list[Point]:
    """The sweep, largest first so each page kind's ring memory is touched once; the profile's
    `settings` say how many octaves past the last-level cache it walks before the DRAM point
    and the DRAM ring's least size."""
    pages = {"default": (False,), "huge": (True,), None: (False, True)}[opts.pages]
    top = dram_size(topo, cpu, settings.dram_floor)
    past_llc = settings.past_llc
    if opts.size_bytes is not None:
        sizes = [opts.size_bytes]
    else:
        sizes = [1 << k for k in range(int(math.log2(MIN_SIZE)), int(math.log2(top)) + 1)]
        if past_llc is not None:
            llc = llc_bytes(topo, [cpu])
            sizes = [s for s in sizes if s == top or s < llc << (past_llc + 1)]
    out = []
    for huge in pages:
        for size in sorted(sizes, reverse=True):
            if huge and opts.size_bytes is None and (
                    size < HUGE_FROM or (size != sizes[-1] and
                                         int(math.log2(size // HUGE_FROM)) % HUGE_STEP)):
                continue
            out.append(Point(size, huge, level_of(topo, (cpu,), size, top)))
    return out


def group_bytes(point: Point, base_page: int, huge_page: int) -> int:
    """Cache levels walk within TLB-sized groups; past them the walk spans the whole ring at
    random."""
    if not in_cache(point.level):
        return 0
    return TLB_GROUP_PAGES * (huge_page if point.huge else base_page)


def c2c_pairs(topo: Topology, all_pairs: bool = False) -> list[tuple[int, int]]:
    """CPU pairs for the core-to-core matrix: every pair of cores when asked; otherwise one core
    per L3 domain paired with each other (on big machines: one per NUMA domain, plus the L3
    domains of the first NUMA domain), plus one pair inside an L3 domain and one pair of SMT
    siblings where there are such."""
    order = [p.os_index for p in topo.pus]
    cores = sorted(place(topo, "one-per-core").cpus, key=order.index)
    if all_pairs:
        return [(a, b) for i, a in enumerate(cores) for b in cores[i + 1:]]
    reps = sorted(place(topo, "one-per-l3").cpus, key=order.index)
    if len(reps) * (len(reps) - 1) // 2 > MAX_PAIRS:
        first_numa = topo.pu(reps[0]).numa
        reps = sorted(set(place(topo, "one-per-numa").cpus) |
                      {c for c in reps if topo.pu(c).numa == first_numa}, key=order.index)
    pairs = {(a, b) for i, a in enumerate(reps) for b in reps[i + 1:]}
    for c in cores:  # one pair inside an L3 domain
        mates = [d for d in cores if d != c and relation(topo, c, d) == "same-l3"]
        if mates:
            pairs.add((c, mates[0]))
            break
    allowed = set(topo.allowed_cpus)
    for core in topo.cores:  # one pair of SMT siblings
        sib = [c for c in core.cpus if c in allowed]
        if len(sib) >= 2:
            pairs.add((sib[0], sib[1]))
            break
    return sorted(pairs, key=lambda ab: (order.index(ab[0]), order.index(ab[1])))


def _loaded(ctx: RunContext, team: Team, cpu: int, loaders: list[int], ring_bytes: int,
            unloaded_ns: float, deadline: float) -> None:
    """Loaded latency: the chaser on `cpu` walks its DRAM ring while k = 0, 1, ... other cores
    read their own arrays, together twice the last-level cache serving them (the load kernel);
    latency against their total bandwidth."""
    load = KERNELS["load"]
    readers = max(1, len(loaders))
    elems = max(64, elems_for("load", 2 * llc_bytes(ctx.topo, loaders or [cpu]), readers))
    if loaders:
        team.select(loaders)
        team.stream_prepare(elems)
        team.stream_begin(load.kernel_id, elems)
    ctx.progress.start("loaded latency", len(loaders) + 1)
    node = numa_of(ctx.topo, cpu)
    for k in range(len(loaders) + 1):
        team.select([cpu] + loaders[:k])
        # a sample lasts LOADED_SAMPLE_S at the unloaded latency, so the readers make several
        # passes; the driver's warm-up covers the readers' first passes
        loads = max(1, math.ceil(LOADED_SAMPLE_S / (unloaded_ns * 1e-9) / LOAD_QUANTUM))
        loads *= LOAD_QUANTUM
        budget = max(0.0, deadline - time.perf_counter()) / (len(loaders) + 1 - k)
        readers_gbs: list[float] = []  # the readers' bandwidth during each latency sample

        def take(n: int, loads: int = loads, readers_gbs: list[float] = readers_gbs
                 ) -> list[float | None]:
            chase_s, others = team.loaded_latency(loads, load.kernel_id, ctx.isa, elems)
            readers_gbs.append(sum(bandwidth_gbs(load, "regular", elems, 1, passes, secs)
                                   for secs, passes in others if secs > 0))
            return [chase_s / loads * 1e9]

        got = sampling.sample(take, ctx.profile.repetition, budget)
        # nothing is rejected here and the warm-up's samples come first: the kept ones are the
        # last len(samples) taken
        bw = readers_gbs[len(readers_gbs) - len(got.samples):]
        lat = ctx.record("latency", f"loaded latency, {k} streaming", got)
        if loaders:
            team.select(loaders)
            if not team.stream_check(load.kernel_id, elems) <= 0.0:
                ctx.errors.append(f"loaded latency {k} loaders: the streamed arrays did not "
                                  "validate; figures discarded")
                continue
        team.select([cpu])
        if not team.chase_check(CHECK_STEPS):
            ctx.errors.append(f"loaded latency {k} loaders: the ring did not validate")
            continue
        params = {"size_bytes": ring_bytes, "level": "DRAM", "cpu": cpu, "cpu_domain": node,
                  "memory_domain": node, "load_threads": k, "load_kernel": "load",
                  "load_cpus": format_cpulist(loaders[:k]),
                  "load_size_per_thread_bytes": elems * 8}
        ctx.metrics.append(Metric("latency", "loaded_latency", "ns", dict(params), lat, "lower"))
        ctx.metrics.append(Metric("latency", "loaded_bandwidth", "GB/s", dict(params), bw))
        ctx.progress.advance(f"loaded latency, {k} streaming")


def _handoff_ns(team: Team, rounds: int, n: int) -> list[float | None]:
    """n core-to-core samples: ns one way (a round trip of the line is two handoffs)."""
    return [t / (2 * rounds) * 1e9 for t in team.c2c_measure(rounds, n)]


def _c2c(ctx: RunContext, opts: LatencyOptions, deadline: float) -> None:
    """The core-to-core matrix: one-way handoff latency for each planned pair."""
    pairs = [opts.pair] if opts.pair else c2c_pairs(ctx.topo, opts.all_pairs)
    if not pairs:
        ctx.warnings.append("latency: core-to-core needs two allowed cores; skipped")
        return
    cpus = sorted({c for p in pairs for c in p})
    ctx.progress.start("core-to-core", len(pairs))
    with Team(cpus) as team:
        for i, (a, b) in enumerate(pairs):
            team.select([a, b])
            budget = max(0.0, deadline - time.perf_counter()) / (len(pairs) - i)
            rounds, start = 256, time.perf_counter()
            for _ in range(8):  # size a sample to at least sample_s
                took = team.c2c_measure(rounds, 1)[0]
                if took >= ctx.profile.sample_s:
                    break
                rounds = max(2 * rounds, math.ceil(rounds * 1.2 * ctx.profile.sample_s / took))
            out = ctx.record("latency", f"core-to-core {a}<->{b}", sampling.sample(
                partial(_handoff_ns, team, rounds), ctx.profile.repetition,
                max(0.0, budget - (time.perf_counter() - start))))
            ctx.progress.advance(f"core-to-core {a}<->{b}")
            if not out:
                ctx.errors.append(f"latency core-to-core {a}<->{b}: every sample was rejected "
                                  "(a handoff did not complete); no figure")
                continue
            params = {"cpu_a": a, "cpu_b": b, "relation": relation(ctx.topo, a, b),
                      "cpu_domain": numa_of(ctx.topo, a), "memory_domain": numa_of(ctx.topo, b),
                      "load_threads": 0}
            ctx.metrics.append(Metric("latency", "core_to_core", "ns", params, out, "lower"))


@dataclass(frozen=True)
class Sweep:
    """What a run measures: the chasing CPU, its sweep, the cores that load it, the core-to-core
    pairs (only those with --pair)."""

    cpu: int
    points: list[Point]
    loaded: bool  # latency under load too, with the loaders streaming
    loaders: list[int]
    pairs: list[tuple[int, int]]


def sweep(ctx: RunContext, opts: LatencyOptions) -> tuple[Sweep, LatencyOptions]:
    """The run's plan from the options (checked) and the profile; the options as the profile
    completes them."""
    settings = SETTINGS[ctx.profile.name]
    topo = ctx.topo
    if opts.pair is not None:
        a, b = opts.pair
        bad = [c for c in opts.pair if c not in topo.allowed_cpus]
        if bad or a == b:
            raise OptionError(f"<pair> {a},{b}: give two different CPUs of the allowed cpuset "
                              f"({format_cpulist(topo.allowed_cpus)})")
        return Sweep(a, [], False, [], [opts.pair]), opts
    cpu = opts.cpu if opts.cpu is not None else place(topo, "one-per-core").cpus[0]
    if cpu not in topo.allowed_cpus:
        raise OptionError(f"<cpu> {cpu}: not an allowed CPU of this machine "
                          f"({', '.join(map(str, topo.allowed_cpus))}); see `hpcprobe topology`")
    if opts.size_bytes is not None and opts.size_bytes < 16 * STRIDE:
        raise OptionError(f"<size_bytes> {format_bytes(opts.size_bytes)}: a pointer-chase ring "
                          f"needs at least {16 * STRIDE} B (16 lines of {STRIDE} B)")
    if opts.pages is None and not settings.huge_page_sweep:
        opts = replace(opts, pages="default")
    loaded = opts.loaded if opts.loaded is not None else settings.loaded
    loaders = [c for c in place(topo, "one-per-core").cpus if c != cpu] if loaded else []
    if loaded and not loaders:  # one core: the loaded curve would be the unloaded point again
        if opts.loaded:
            raise OptionError(f"<loaded>: no core here but CPU {cpu}'s to stream while it "
                              "chases")
        loaded = False
    pairs = [] if opts.size_bytes is not None else c2c_pairs(topo, opts.all_pairs)
    points = plan(topo, cpu, opts, settings)
    if opts.loaded and points[0].level != "DRAM":
        raise OptionError(f"<loaded> chases a DRAM ring, and a {format_bytes(points[0].size_bytes)}"
                          f" ring on CPU {cpu} is {points[0].level}: drop <size_bytes> or give "
                          f"at least {format_bytes(dram_size(topo, cpu, settings.dram_floor))}")
    available = free_memory(topo)
    biggest = max(p.size_bytes for p in points)
    if available is not None and biggest > 0.8 * available:
        raise OptionError(f"<size_bytes> {format_bytes(biggest)}: more than the "
                          f"{format_bytes(available)} of memory available; use a smaller "
                          "<size_bytes>")
    return Sweep(cpu, points, loaded, loaders, pairs), opts


def labels(ctx: RunContext, opts: LatencyOptions | None) -> list[str]:
    s, _ = sweep(ctx, opts or LatencyOptions())
    order = "" if opts is None or opts.order == "ring" else f", {opts.order} order"
    out = [f"chase {format_bytes(p.size_bytes)} ({p.level}), {'huge' if p.huge else 'default'} "
           f"pages, CPU {s.cpu}{order}" for p in s.points]
    if s.loaded and s.points and s.points[0].level == "DRAM":
        out.append(f"loaded latency: CPU {s.cpu} while 0..{len(s.loaders)} cores stream")
    return out + [f"core-to-core {a},{b}" for a, b in s.pairs]


def run(ctx: RunContext, opts: LatencyOptions | None) -> None:
    settings = SETTINGS[ctx.profile.name]
    topo = ctx.topo
    s, opts = sweep(ctx, opts or LatencyOptions())
    if opts.pair is not None:
        _c2c(ctx, opts, time.perf_counter() + settings.budget_s)
        return
    cpu, points, loaded, loaders = s.cpu, s.points, s.loaded, s.loaders
    base_page, huge_page = resource.getpagesize(), huge_page_bytes()
    node = numa_of(topo, cpu)
    ctx.progress.start("latency", len(points))
    deadline = time.perf_counter() + settings.budget_s * (1 - C2C_BUDGET_SHARE)
    curve: list[tuple[int, float]] = []
    capacity = dict(cache_shares(topo, (cpu,)))
    with Team([cpu] + loaders) as team:
        team.select([cpu])
        for i, p in enumerate(points):
            team.chase_prepare(p.size_bytes, STRIDE, group_bytes(p, base_page, huge_page), p.huge,
                               SEED, order=opts.order)
            label, fraction = granted_pages(team, cpu, base_page, huge_page)
            if p.huge and fraction < 1.0:
                why = huge_page_shortfall(p.size_bytes, huge_page, sysfs_choice(
                    f"{THP_SYSFS}/enabled"), sysfs_choice(f"{THP_SYSFS}/defrag"))
                ctx.warnings.append(f"latency {format_bytes(p.size_bytes)}: huge pages asked for "
                                    f"but {100 * fraction:.0f} % granted: {why}; labelled {label}")
            budget = max(0.0, deadline - time.perf_counter()) / (len(points) - i)
            pages = "huge" if p.huge else "default"
            samples = chase_samples(ctx, team, budget, f"{format_bytes(p.size_bytes)} {pages} "
                                    "pages", p.size_bytes if in_cache(p.level) else 0,
                                    benchmark="latency", judged=p.size_bytes <= RESIDENT_SHARE
                                    * capacity.get(p.level, 0))
            if not samples:
                ctx.errors.append(f"latency {format_bytes(p.size_bytes)} {pages} pages: every "
                                  "sample was rejected (disturbed); no figure")
                continue
            if not team.chase_check(CHECK_STEPS):
                ctx.errors.append(f"latency {format_bytes(p.size_bytes)}: the pointer-chase "
                                  "ring did not validate; figure discarded")
                continue
            params = {"size_bytes": p.size_bytes, "level": p.level, "page_size": label,
                      "huge_page_fraction": fraction, "huge_pages_requested": p.huge,
                      "cpu": cpu, "cpu_domain": node, "memory_domain": node,
                      "memory_policy": "first-touch", "load_threads": 0, "stride_bytes": STRIDE,
                      "group_bytes": group_bytes(p, base_page, huge_page),
                      **({} if opts.order == "ring" else {"order": opts.order})}
            ctx.metrics.append(Metric("latency", "latency", "ns", params, samples, "lower"))
            ctx.progress.advance(f"latency {format_bytes(p.size_bytes)} {label}")
            if not p.huge:
                curve.append((p.size_bytes, ctx.metrics[-1].summary.median))
            if loaded and i == 0 and p.level == "DRAM":
                # the DRAM ring is there now: measure it under load before it is rebuilt
                _loaded(ctx, team, cpu, loaders, p.size_bytes, ctx.metrics[-1].summary.median,
                        time.perf_counter() + settings.budget_s * C2C_BUDGET_SHARE)
                team.select([cpu])
    if opts.size_bytes is None:  # levels are read off a sweep; one size (--size) has none
        for chk in check_levels(curve, list(capacity.items()), "ns", lower_is_better=True,
                                virtual=flopmodel.virtual_cpu()):
            ctx.find(Finding("latency", CACHE_LEVEL, chk.note, {
                "kernel": "chase", "threads": 1, "unit": "ns", **chk.to_dict()},
                severity="warning" if chk.agrees is False else "note"))
        _c2c(ctx, opts, time.perf_counter() + settings.budget_s * C2C_BUDGET_SHARE)
