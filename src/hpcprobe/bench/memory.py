"""The memory benchmark: a working-set sweep from L1 to DRAM and DRAM STREAM over thread
counts and placements, every figure validated before it counts."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .. import kernels, sampling
from .._native import Team
from ..errors import UserError
from ..kernels import KERNELS, STREAM_KERNELS, bandwidth_gbs
from ..levels import check_levels
from ..placement import active_counts
from ..placement import plan as place
from ..results import Metric
from ..sysinfo import mem_available_bytes
from ..topology import Topology
from ..units import format_bytes
from .base import Benchmark, RunContext, bound_cpus

#: STREAM's validation bound for double precision; our patterns are exact, so anything above
#: zero already means a broken kernel, but the field's bound is the one we state.
MAX_REL_ERROR = 1e-13
#: Elements per thread are a multiple of this: whole cache lines and whole unrolled SIMD steps.
ELEM_QUANTUM = 64
#: Working sets per thread are multiples of this, so one-, two- and three-array kernels get the
#: same one: 64 elements x 8 B x lcm(1, 2, 3).
SWEEP_QUANTUM = ELEM_QUANTUM * kernels.ELEMENT_BYTES * 6
#: DRAM working set as a multiple of the last-level cache serving the team (STREAM's rule).
DRAM_FACTOR = 4
#: Share of the time budget for cache-resident measurements; DRAM ones get the rest.
CACHE_BUDGET_SHARE = 0.15
#: Tries to size a sample's inner repetitions before giving up on reaching sample_s.
CALIBRATION_STEPS = 5
#: Assumed last-level cache when the topology knows none.
FALLBACK_LLC = 256 << 20


@dataclass(frozen=True)
class MemoryOptions:
    """Options that narrow `hpcprobe run memory` to chosen measurements."""

    kernels: tuple[str, ...] | None = None
    stores: tuple[str, ...] | None = None
    threads: tuple[int, ...] | None = None
    size_bytes: int | None = None
    placement: str | None = None

    @property
    def narrowed(self) -> bool:
        return any(v is not None for v in (self.kernels, self.stores, self.threads,
                                           self.size_bytes, self.placement))


@dataclass(frozen=True)
class Measurement:
    """One metric to measure: a kernel, store type and working set on a pinned team."""

    phase: str  # "sweep", "stream" or "single"
    kernel: str
    stores: str
    placement: str
    cpus: tuple[int, ...]
    elems: int  # per thread and array
    level: str
    in_sweep: bool = False  # a STREAM measurement that is also a sweep's DRAM point

    @property
    def threads(self) -> int:
        return len(self.cpus)

    @property
    def size_bytes(self) -> int:
        """The working set of all threads: arrays the kernel touches x elements x 8 B."""
        return KERNELS[self.kernel].arrays * kernels.ELEMENT_BYTES * self.elems * self.threads

    @property
    def label(self) -> str:
        return (f"{self.kernel} {self.stores} {self.threads}T {self.placement} "
                f"{format_bytes(self.size_bytes)}")


# ---------------------------------------------------------------- planning (pure)

def thread_ladder(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    out = []
    k = 1
    while k < n:
        out.append(k)
        k *= 2
    out.append(n)
    return out


def _sharers(cpus: tuple[int, ...], members: tuple[int, ...]) -> int:
    return sum(1 for c in cpus if c in members)


def cache_shares(topo: Topology, cpus: tuple[int, ...]) -> list[tuple[str, int]]:
    """(level, bytes of that cache per thread) for each cache level, the smallest share over the
    team: a shared cache is divided among the team's threads that use it."""
    out = []
    for level in topo.cache_levels():
        shares = []
        for cpu in cpus:
            c = topo.cache_for(level, cpu)
            if c is not None:
                shares.append(c.size_bytes // max(1, _sharers(cpus, c.cpus)))
        if shares:
            out.append((f"L{level}", min(shares)))
    return out


def level_of(topo: Topology, cpus: tuple[int, ...], ws_per_thread: int) -> str:
    """The level a working set per thread nominally fits in."""
    for name, share in cache_shares(topo, cpus):
        if ws_per_thread <= share:
            return name
    return "DRAM"


def llc_bytes(topo: Topology, cpus: Iterable[int]) -> int:
    """Total size of the last-level cache instances serving these CPUs."""
    levels = topo.cache_levels()
    if not levels:
        return FALLBACK_LLC
    seen = {}
    for cpu in cpus:
        c = topo.cache_for(levels[-1], cpu)
        if c is not None:
            seen[c.cpus] = c.size_bytes
    return sum(seen.values()) or FALLBACK_LLC


def dram_working_set(topo: Topology, cpus: tuple[int, ...]) -> int:
    """4x the last-level cache serving the team, rounded up so that one-, two- and three-array
    kernels get the same working set per thread."""
    step = SWEEP_QUANTUM * len(cpus)
    return math.ceil(DRAM_FACTOR * llc_bytes(topo, cpus) / step) * step


def _quantize(elems: float) -> int:
    return int(elems) // ELEM_QUANTUM * ELEM_QUANTUM


def sweep_sizes(topo: Topology, cpus: tuple[int, ...], per_octave: int) -> list[int]:
    """Cache-resident working sets per thread, from a quarter of L1 up to the thread's share of
    the last-level cache, per_octave points per doubling (the DRAM point is added apart)."""
    shares = cache_shares(topo, cpus)
    lo = shares[0][1] // 4 if shares else 8 << 10
    hi = shares[-1][1] if shares else FALLBACK_LLC
    sizes = []
    k = math.floor(math.log2(max(lo, 4096)) * per_octave)
    while (s := 2 ** (k / per_octave)) <= hi:
        sizes.append(max(1, round(s / SWEEP_QUANTUM)) * SWEEP_QUANTUM)
        k += 1
    return sorted(set(sizes))


def elems_for(kernel: str, total_bytes: float, threads: int) -> int:
    """Elements per array and thread that give `kernel` a working set of total_bytes over all
    threads (likwid-bench's convention: the size is split among the kernel's arrays)."""
    return _quantize(total_bytes / (KERNELS[kernel].arrays * kernels.ELEMENT_BYTES * threads))


def _store_types(kernel: str, stores: Iterable[str]) -> list[str]:
    """Store types that apply to a kernel: read-only kernels (load, sum) only 'regular'."""
    k = KERNELS[kernel]
    return [s for s in stores if s == "regular" or k.stores > 0]


def default_plan(topo: Topology, sweep_kernels: Iterable[str], stream_stores: Iterable[str],
                 per_octave: int, scaling_counts: Iterable[int] = ()) -> list[Measurement]:
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
        for name in STREAM_KERNELS:
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
            for ws in sweep_sizes(topo, cpus, per_octave):
                elems = elems_for(name, ws * len(cpus), len(cpus))
                if elems >= ELEM_QUANTUM:
                    sweep.append(Measurement("sweep", name, "regular", "one-per-core", cpus,
                                             elems, level_of(topo, cpus, ws)))
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
            raise UserError(f"--stores {s!r} is unknown; use regular, nt or both")
    placement = opts.placement or "one-per-core"
    counts = opts.threads or (len(place(topo, placement).cpus),)
    out = []
    for k in counts:
        cpus = place(topo, placement, k, oversubscribe).cpus
        for name in names:
            types = _store_types(name, stores)
            if not types:
                raise UserError(f"--stores {','.join(stores)}: kernel {name} stores nothing; "
                                "drop --stores or use --stores regular")
            bytes_per_elem = KERNELS[name].arrays * kernels.ELEMENT_BYTES
            size = opts.size_bytes or dram_working_set(topo, cpus)
            elems = elems_for(name, size, len(cpus))
            if elems < ELEM_QUANTUM:
                least = ELEM_QUANTUM * bytes_per_elem * len(cpus)
                raise UserError(f"--size {format_bytes(size)}: too small for kernel {name} on "
                                f"{len(cpus)} thread(s); use --size >= {format_bytes(least)}")
            level = level_of(topo, cpus, elems * bytes_per_elem)
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
        raise UserError(
            f"--size {format_bytes(biggest.size_bytes)}: the stream arrays need up to "
            f"{format_bytes(need)} but only {format_bytes(available)} of memory is available; "
            "use a smaller --size or fewer threads")


# ---------------------------------------------------------------- measuring

def measure(ctx: RunContext, team: Team, m: Measurement, budget_s: float,
            benchmark: str = "memory") -> list[float]:
    """Timed samples of one measurement as GB/s (STREAM counting), taken in the steady state:
    the calibration and warm-up samples are dropped."""
    k = KERNELS[m.kernel]
    kid = k.kernel_id
    team.stream_begin(kid, m.elems)
    # Grow the inner repetitions until a sample lasts at least sample_s (a first, cold pass
    # underestimates how many fit).
    inner = 1
    for _ in range(CALIBRATION_STEPS):
        times, _ = team.stream_measure(kid, ctx.isa, m.stores, m.elems, inner, 1)
        took = max(max(times[0]), 1e-9)
        if took >= ctx.profile.sample_s:
            break
        inner = max(inner + 1, math.ceil(inner * 1.2 * ctx.profile.sample_s / took))
    migrated = 0

    def take(n: int) -> list[float | None]:
        nonlocal migrated
        times, mig = team.stream_measure(kid, ctx.isa, m.stores, m.elems, inner, n)
        migrated += mig
        return [bandwidth_gbs(k, m.stores, m.elems, m.threads, inner, max(t)) for t in times]

    got = sampling.sample(take, ctx.profile.repetition, budget_s)
    if migrated:
        ctx.warnings.append(f"memory {m.label}: threads left their CPU in {migrated} "
                            "thread-sample(s); is something else changing affinities?")
    return ctx.record(benchmark, m.label, got)


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


def run(ctx: RunContext, opts: MemoryOptions | None) -> None:
    opts = opts or MemoryOptions()
    topo = ctx.topo
    prof = ctx.profile
    if opts.narrowed:
        plan_ = narrowed_plan(topo, opts, ctx.oversubscribe)
    else:
        cores = len(place(topo, "one-per-core").cpus)
        plan_ = default_plan(topo, prof.sweep_kernels, prof.stream_stores,
                             prof.sweep_points_per_octave, active_counts(cores, prof.curve_points))
    check_memory(plan_, mem_available_bytes())
    ctx.progress.start("memory", len(plan_))
    # Cache-resident measurements are many and cheap, DRAM ones few and dear: each pool gets its
    # share of the budget, spread evenly over what is left in it.
    pool = {True: prof.memory_budget_s * CACHE_BUDGET_SHARE,
            False: prof.memory_budget_s * (1 - CACHE_BUDGET_SHARE)}
    left = {cached: sum((m.level != "DRAM") == cached for m in plan_) for cached in (True, False)}
    curves: dict[tuple[tuple[int, ...], str], list[tuple[int, float]]] = {}
    for team_cpus, groups in _team_plan(plan_):
        with Team(team_cpus) as team:
            team.stream_prepare(max(m.elems for _, ms in groups for m in ms))
            for cpus, ms in groups:
                if team.active != cpus:
                    team.select(cpus)
                binding = bound_cpus(ctx, team, "memory")
                for m in ms:
                    cached = m.level != "DRAM"
                    t0 = time.perf_counter()
                    samples = measure(ctx, team, m, max(0.0, pool[cached]) / left[cached])
                    pool[cached] -= time.perf_counter() - t0
                    left[cached] -= 1
                    err = team.stream_check(KERNELS[m.kernel].kernel_id, m.elems)
                    ctx.progress.advance(m.label)
                    if not err <= MAX_REL_ERROR:
                        ctx.errors.append(f"memory {m.label}: validation failed (max relative "
                                          f"error {err:.3g} > {MAX_REL_ERROR:g}); figure "
                                          "discarded")
                        continue
                    found = _metrics(m, samples, ctx.isa, binding)
                    ctx.metrics.extend(found)
                    if m.phase == "sweep" or m.in_sweep:
                        curves.setdefault((cpus, m.kernel), []).append(
                            (m.size_bytes // m.threads, found[0].summary.median))
    _check_sweeps(ctx, curves)


def _check_sweeps(ctx: RunContext, curves: dict[tuple[tuple[int, ...], str],
                                           list[tuple[int, float]]]) -> None:
    """Find each sweep's cache plateaus and compare them with the topology's cache sizes."""
    for (cpus, kernel), points in curves.items():
        for chk in check_levels(points, cache_shares(ctx.topo, cpus)):
            ctx.findings.append({"benchmark": "memory", "kind": "cache_level", "kernel": kernel,
                                 "threads": len(cpus), "unit": "GB/s", "message": chk.note,
                                 **chk.to_dict()})
            if chk.agrees is False:
                ctx.warnings.append(f"memory {kernel} {len(cpus)}T: {chk.note}")


BENCHMARK = Benchmark("memory", "memory bandwidth: cache sweep and DRAM STREAM", run)
