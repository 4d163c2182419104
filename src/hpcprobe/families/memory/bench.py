"""The memory benchmark: a working-set sweep from L1 to DRAM and DRAM STREAM over thread
counts and placements, every figure validated before it counts."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from hpcprobe.analysis.levels import CACHE_LEVEL, check_levels
from hpcprobe.common.errors import OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import energy, flopmodel
from hpcprobe.machine.placement import active_counts
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import (
    ELEM_QUANTUM,
    FALLBACK_LLC,
    SWEEP_QUANTUM,
    cache_shares,
    dram_working_set,
    elems_for,
    free_memory,
    in_cache,
    level_of,
    thread_ladder,
)
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, bound_cpus, option, per_watt
from hpcprobe.native import Team, kernels
from hpcprobe.native.kernels import KERNELS, STREAM_KERNELS
from hpcprobe.probes.stream import Invalid, Measurement, measure, measure_rounds
from hpcprobe.results.findings import Finding
from hpcprobe.results.model import Metric

#: Share of the time budget for cache-resident measurements; DRAM ones (and the sweep's points
#: past the last cache) get the rest.
CACHE_BUDGET_SHARE = 0.15


@dataclass(frozen=True)
class Settings:
    """What a profile gives the memory family."""

    budget_s: float  # the whole family, allocation included
    sweep_points_per_octave: int
    sweep_kernels: tuple[str, ...]
    stream_stores: tuple[str, ...]
    #: STREAM's kernels on the thread ladder (quick: the triad alone, the verdict's figure)
    stream_kernels: tuple[str, ...] = STREAM_KERNELS


SETTINGS = {
    "quick": Settings(3.0, 1, ("triad",), ("regular",), ("triad",)),
    "default": Settings(15.0, 1, ("triad", "load"), ("regular", "nt")),
    "thorough": Settings(220.0, 2, ("triad", "load", "copy", "store"), ("regular", "nt")),
    # the health tier: its one measurement, the DRAM triad on every core (check_options)
    "check": Settings(1.0, 1, ("triad",), ("regular",), ("triad",)),
}


@dataclass(frozen=True)
class MemoryOptions:
    """Options that narrow `hpcprobe run memory` to chosen measurements."""

    kernels: tuple[str, ...] | None = option(Flag(
        "--kernel", "copy, scale, add, triad, load, store, sum (comma-separated)",
        parse=options.names))
    stores: tuple[str, ...] | None = option(Flag(
        "--stores", "ordinary or non-temporal stores (default: both)",
        choices=("regular", "nt", "both"), convert=options.all_or_one))
    threads: tuple[int, ...] | None = option(options.THREADS)
    size_bytes: int | None = option(options.SIZE, note="the total working set of all threads "
                                    "(default: 4x the LLC)")
    placement: str | None = option(options.PLACEMENT, note="the team's CPUs")

    @property
    def narrowed(self) -> bool:
        return any(v is not None for v in (self.kernels, self.stores, self.threads,
                                           self.size_bytes, self.placement))


# ---------------------------------------------------------------- planning (pure)


def sweep_points(topo: Topology, cpus: tuple[int, ...], per_octave: int) -> list[tuple[int, str]]:
    """(working set per thread, level) from a quarter of L1 up to one octave past the thread's
    share of the last-level cache, per_octave points per doubling (the DRAM point is added
    apart). The octave past the last level places its edge: without it the sweep jumps from
    the capacity to the DRAM working set, too far apart to say where the level ends.

    Each point is rounded to whole SWEEP_QUANTUMs and labelled by its unrounded size, so the
    point at a power-of-two capacity (rounded a quantum past it, or not) is that level's;
    past the last cache it is 'past-L3' (say), never 'DRAM' (level_of)."""
    shares = cache_shares(topo, cpus)
    lo = shares[0][1] // 4 if shares else 8 << 10
    hi = 2 * (shares[-1][1] if shares else FALLBACK_LLC // len(cpus))
    dram = dram_working_set(topo, cpus) // len(cpus)
    points: dict[int, str] = {}
    k = math.floor(math.log2(max(lo, 4096)) * per_octave)
    while (s := 2 ** (k / per_octave)) <= hi:
        points.setdefault(max(1, round(s / SWEEP_QUANTUM)) * SWEEP_QUANTUM,
                          level_of(topo, cpus, math.floor(s), dram))
        k += 1
    return sorted(points.items())


def _store_types(kernel: str, stores: Iterable[str]) -> list[str]:
    """Store types that apply to a kernel: read-only kernels (load, sum) only 'regular'."""
    k = KERNELS[kernel]
    return [s for s in stores if s == "regular" or k.stores > 0]


def default_plan(topo: Topology, sweep_kernels: Iterable[str], stream_stores: Iterable[str],
                 per_octave: int, scaling_counts: Iterable[int] = (),
                 stream_kernels: Iterable[str] = STREAM_KERNELS) -> list[Measurement]:
    """The full characterisation: sweeps from L1 to DRAM on 1 thread and on all cores, and DRAM
    STREAM at a ladder of thread counts on all cores, one thread per L3 and per NUMA domain,
    and the DRAM triad (ordinary stores, one thread per core) at the other `scaling_counts` (the
    bandwidth side of the core-scaling curve). Every DRAM measurement has a working set of 4x
    the last-level cache serving its team; a sweep's DRAM point that STREAM measures anyway is
    measured once."""
    # The most specific name labels a thread set that several placements yield (spreading 32
    # threads over all cores of a 32-CCX node is one per L3 domain); one thread is one-per-core.
    placements = ["one-per-numa"] if len(topo.numa_nodes) > 1 else []
    placements += ["one-per-l3"] if len(topo.l3_domains) > 1 else []
    placements += ["one-per-core"]
    ladder = [("one-per-core", 1)] + [(p, k) for p in placements
                                      for k in thread_ladder(len(place(topo, p).cpus))]
    stream: dict[tuple[str, str, tuple[int, ...]], Measurement] = {}
    for placement, k in ladder:
        cpus = place(topo, placement, k).cpus
        dram = dram_working_set(topo, cpus)
        for name in stream_kernels:
            for stores in _store_types(name, stream_stores):
                stream.setdefault((name, stores, cpus), Measurement(
                    "stream", name, stores, placement, cpus, elems_for(name, dram, k), "DRAM"))
    for k in scaling_counts:
        cpus = place(topo, "one-per-core", k).cpus
        stream.setdefault(("triad", "regular", cpus), Measurement(
            "stream", "triad", "regular", "one-per-core", cpus,
            elems_for("triad", dram_working_set(topo, cpus), k), "DRAM"))
    sweep: list[Measurement] = []
    all_cores = place(topo, "one-per-core").cpus
    for cpus in [all_cores[:1]] + ([all_cores] if len(all_cores) > 1 else []):
        for name in sweep_kernels:
            for ws, level in sweep_points(topo, cpus, per_octave):
                elems = elems_for(name, ws * len(cpus), len(cpus))
                if elems >= ELEM_QUANTUM:
                    sweep.append(Measurement("sweep", name, "regular", "one-per-core", cpus,
                                             elems, level))
            key = (name, "regular", cpus)
            if key in stream:
                stream[key] = replace(stream[key], in_sweep=True)
            else:
                elems = elems_for(name, dram_working_set(topo, cpus), len(cpus))
                sweep.append(Measurement("sweep", name, "regular", "one-per-core", cpus, elems,
                                         "DRAM"))
    return sweep + list(stream.values())


def narrowed_plan(topo: Topology, opts: MemoryOptions, oversubscribe: bool) -> list[Measurement]:
    """The measurements the user named: kernels x stores x thread counts at one size."""
    names = opts.kernels or STREAM_KERNELS
    for name in names:
        kernels.get(name)
    stores = opts.stores or kernels.STORE_TYPES
    for s in stores:
        if s not in kernels.STORE_TYPES:
            raise OptionError(f"<stores> {s!r} is unknown; use regular, nt or both")
    placement = opts.placement or "one-per-core"
    counts = opts.threads or (len(place(topo, placement).cpus),)
    out = []
    for k in counts:
        cpus = place(topo, placement, k, oversubscribe).cpus
        dram = dram_working_set(topo, cpus)
        for name in names:
            types = _store_types(name, stores)
            if not types:
                raise OptionError(f"<stores> {','.join(stores)}: kernel {name} stores nothing; "
                                "drop <stores> or use <stores> regular")
            bytes_per_elem = KERNELS[name].arrays * kernels.ELEMENT_BYTES
            size = opts.size_bytes or dram
            elems = elems_for(name, size, len(cpus))
            if elems < ELEM_QUANTUM:
                least = ELEM_QUANTUM * bytes_per_elem * len(cpus)
                raise OptionError(f"<size_bytes> {format_bytes(size)}: too small for kernel "
                                  f"{name} on {len(cpus)} thread(s); use <size_bytes> >= "
                                  f"{format_bytes(least)}")
            level = level_of(topo, cpus, elems * bytes_per_elem, dram // len(cpus))
            for s in types:
                out.append(Measurement("single", name, s, placement, cpus, elems, level))
    return out


def teams(measurements: list[Measurement]) -> list[tuple[tuple[int, ...], list[Measurement]]]:
    """Measurements grouped by thread team, in first-use order, so arrays are allocated once."""
    groups: dict[tuple[int, ...], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault(m.cpus, []).append(m)
    return list(groups.items())


def _team_plan(measurements: list[Measurement]) -> list[
        tuple[tuple[int, ...], list[tuple[tuple[int, ...], list[Measurement]]]]]:
    """One persistent team over every CPU the measurements use, with each thread set as a group
    of it; an oversubscribed group (a CPU twice) gets a team of its own."""
    groups = teams(measurements)
    shared = [g for g in groups if len(set(g[0])) == len(g[0])]
    union = tuple(dict.fromkeys(c for cpus, _ in shared for c in cpus))
    out = [(union, shared)] if shared else []
    out += [(cpus, [(cpus, ms)]) for cpus, ms in groups if len(set(cpus)) != len(cpus)]
    return out


def check_memory(measurements: list[Measurement], available: int | None) -> None:
    """Refuse a plan whose arrays do not fit in the memory available now. Each CPU's thread
    keeps one buffer across kernels and thread counts, as large as its largest working set."""
    if available is None:
        return
    per_cpu: dict[int, int] = {}
    for m in measurements:
        for cpu in m.cpus:
            per_cpu[cpu] = max(per_cpu.get(cpu, 0), m.size_bytes // m.threads)
    need = sum(per_cpu.values())
    if need > 0.9 * available:
        biggest = max(measurements, key=lambda m: m.size_bytes)
        raise OptionError(
            f"<size_bytes> {format_bytes(biggest.size_bytes)}: the stream arrays need up to "
            f"{format_bytes(need)} but only {format_bytes(available)} of memory is available; "
            "use a smaller <size_bytes> or fewer threads")


# ---------------------------------------------------------------- measuring


def _metrics(m: Measurement, samples: list[float], isa: str, binding: str) -> list[Metric]:
    k = KERNELS[m.kernel]
    params = {"kernel": m.kernel, "stores": m.stores, "threads": m.threads,
              "placement": m.placement, "cpus": binding, "size_bytes": m.size_bytes,
              "size_per_thread_bytes": m.size_bytes // m.threads, "level": m.level, "isa": isa,
              "phase": m.phase, "in_sweep": m.phase == "sweep" or m.in_sweep}
    wa = k.bytes_per_element(m.stores, True) / k.stream_bytes
    return [Metric("memory", "bandwidth", "GB/s", dict(params), samples),
            Metric("memory", "bandwidth_write_allocate", "GB/s", dict(params),
                   [s * wa for s in samples])]


def measurements(ctx: RunContext, opts: MemoryOptions) -> list[Measurement]:
    """What the run measures: the narrowed plan, or the profile's sweep and STREAM ladder;
    refused (a dry run's too) when its arrays do not fit in the free memory."""
    if opts.narrowed:
        plan_ = narrowed_plan(ctx.topo, opts, ctx.oversubscribe)
    else:
        prof = SETTINGS[ctx.profile.name]
        cores = len(place(ctx.topo, "one-per-core").cpus)
        plan_ = default_plan(ctx.topo, prof.sweep_kernels, prof.stream_stores,
                             prof.sweep_points_per_octave,
                             active_counts(cores, ctx.profile.curve_points), prof.stream_kernels)
    check_memory(plan_, free_memory(ctx.topo))
    return plan_


def check_options(ctx: RunContext) -> MemoryOptions:
    """The health tier's measurement: the DRAM triad, ordinary stores, one thread per core."""
    return MemoryOptions(kernels=("triad",), stores=("regular",))


def labels(ctx: RunContext, opts: MemoryOptions | None) -> list[str]:
    """What a run measures, one line each."""
    return [m.label for m in measurements(ctx, opts or MemoryOptions())]


def run(ctx: RunContext, opts: MemoryOptions | None) -> None:
    opts = opts or MemoryOptions()
    prof = SETTINGS[ctx.profile.name]
    plan_ = measurements(ctx, opts)
    ctx.progress.start("memory", len(plan_))
    # Cache-resident measurements are many and cheap, DRAM ones (and a sweep's points past the
    # last cache, which touch DRAM too) few and dear: each pool gets its share of the budget,
    # spread evenly over what is left in it.
    pool = {True: prof.budget_s * CACHE_BUDGET_SHARE,
            False: prof.budget_s * (1 - CACHE_BUDGET_SHARE)}
    left = {cached: sum(in_cache(m.level) == cached for m in plan_) for cached in (True, False)}
    curves: dict[tuple[tuple[int, ...], str], list[tuple[int, float]]] = {}
    for team_cpus, groups in _team_plan(plan_):
        with Team(team_cpus) as team:
            team.stream_prepare(max(m.elems for _, ms in groups for m in ms))
            for cpus, ms in groups:
                if team.active != cpus:
                    team.select(cpus)
                binding = bound_cpus(ctx, team, "memory")
                for m, samples, drew in _measure_group(ctx, team, ms, pool, left):
                    if isinstance(samples, Invalid):
                        ctx.errors.append(str(samples))
                        continue
                    found = _metrics(m, samples, ctx.isa, binding)
                    ctx.metrics.extend(found)
                    if m.phase != "sweep":  # a STREAM point sampled alone: its power, per watt
                        ctx.metrics += per_watt(found[0], drew)
                    if m.phase == "sweep" or m.in_sweep:
                        curves.setdefault((cpus, m.kernel), []).append(
                            (m.size_bytes // m.threads, found[0].summary.median))
    _check_sweeps(ctx, curves)


def _measure_group(ctx: RunContext, team: Team, ms: list[Measurement],
                   pool: dict[bool, float], left: dict[bool, int]) -> Iterable[
                       tuple[Measurement, list[float] | Invalid, energy.Window | None]]:
    """One thread set's measurements, each with its samples or why it has none, and the
    energy its sampling drew where it was sampled alone: the cache-resident ones first, in
    rounds over their share of the cache pool (measure_rounds: interleaved, no energy of their
    own), then the others one by one; each pool's time spent is taken from it."""
    cached = [m for m in ms if in_cache(m.level)]
    if cached:
        t0 = time.perf_counter()
        share = max(0.0, pool[True]) * len(cached) / left[True]
        got = measure_rounds(ctx, team, cached, share, "memory")
        pool[True] -= time.perf_counter() - t0
        left[True] -= len(cached)
        for m, samples in zip(cached, got, strict=True):
            ctx.progress.advance(m.label)
            yield m, samples, None
    for m in ms:
        if in_cache(m.level):
            continue
        t0 = time.perf_counter()
        try:
            with ctx.metered() as drew:
                samples = measure(ctx, team, m, max(0.0, pool[False]) / left[False], "memory")
            yield m, samples, drew.window
        except Invalid as exc:
            yield m, exc, None
        finally:
            pool[False] -= time.perf_counter() - t0
            left[False] -= 1
            ctx.progress.advance(m.label)


def _check_sweeps(ctx: RunContext, curves: dict[tuple[tuple[int, ...], str],
                                           list[tuple[int, float]]]) -> None:
    """Find each sweep's cache plateaus and compare them with the topology's cache sizes."""
    virtual = flopmodel.virtual_cpu()
    for (cpus, kernel), points in curves.items():
        for chk in check_levels(points, cache_shares(ctx.topo, cpus), virtual=virtual):
            ctx.find(Finding("memory", CACHE_LEVEL, chk.note, {
                "kernel": kernel, "threads": len(cpus), "unit": "GB/s", **chk.to_dict()},
                severity="warning" if chk.agrees is False else "note",
                where=f"memory {kernel} {len(cpus)}T"))
