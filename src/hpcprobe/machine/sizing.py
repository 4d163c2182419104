"""Sizing rules of the machine layer: cache shares per thread, the level a working set fits in, the
last-level cache serving a team, DRAM working sets, thread ladders."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hpcprobe.machine.sysinfo import usable_available_bytes
from hpcprobe.machine.topology import Topology
from hpcprobe.native import kernels
from hpcprobe.native.kernels import KERNELS

#: Elements per thread are a multiple of this: whole cache lines and whole unrolled SIMD steps.
ELEM_QUANTUM = 64


#: Working sets per thread are multiples of this, so one-, two- and three-array kernels get the
#: same one: 64 elements x 8 B x lcm(1, 2, 3).
SWEEP_QUANTUM = ELEM_QUANTUM * kernels.ELEMENT_BYTES * 6


#: What level_of says, as a JSON Schema (the result schema's, for every figure with a level)
LEVEL_VALUES = {"type": "string", "pattern": "^(L[1-5]|past-(L[1-5]|LLC)|DRAM)$"}
#: A working set's size in bytes, as a JSON Schema
SIZE_VALUES = {"type": "integer", "minimum": 1}


#: DRAM working set as a multiple of the last-level cache serving the team (STREAM's rule).
DRAM_FACTOR = 4


#: The least DRAM working set of a team, whatever cache the topology reports (at most an eighth
#: of the memory): a KVM guest may be shown a last-level cache smaller than the host's that
#: serves it (a Zen 5 guest reporting 32 MiB ran the 4x-L3 triad of 128 MiB at 87-114 GB/s,
#: interleaved with 79 GB/s at 2 GiB), and a "DRAM" figure must not be a cache's.
DRAM_FLOOR = 2 << 30

#: Assumed last-level cache when the topology knows none.
FALLBACK_LLC = 256 << 20


def thread_ladder(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    out = []
    k = 1
    while k < n:
        out.append(k)
        k *= 2
    out.append(n)
    return out


def cache_shares(topo: Topology, cpus: tuple[int, ...]) -> list[tuple[str, int]]:
    """(level, bytes of that cache per thread) for each cache level, the smallest share over the
    team: a shared cache is divided among the team's threads that use it (each instance's
    share worked out once: a team of 256 threads asked it 256 times)."""
    team = set(cpus)
    out = []
    for level in topo.cache_levels():
        shares: dict[int, int] = {}
        for cpu in cpus:
            c = topo.cache_for(level, cpu)
            if c is not None and id(c) not in shares:
                shares[id(c)] = c.size_bytes // max(1, len(team.intersection(c.cpus)))
        if shares:
            out.append((f"L{level}", min(shares.values())))
    return out


def level_of(topo: Topology, cpus: tuple[int, ...], ws_per_thread: int,
             dram_per_thread: int) -> str:
    """The level a working set per thread nominally fits in. Past the last cache it is 'DRAM'
    only from `dram_per_thread` up (the family's DRAM working set per thread) and 'past-L3'
    (say; 'past-LLC' without caches) below it: a guest can be served by a larger cache than
    its topology reports, so a working set just past the reported one is no DRAM figure.
    Sizes within two SWEEP_QUANTUMs of it count as it: both are rounded to whole quanta."""
    shares = cache_shares(topo, cpus)
    for name, share in shares:
        if ws_per_thread <= share:
            return name
    if ws_per_thread > dram_per_thread - 2 * SWEEP_QUANTUM:
        return "DRAM"
    return f"past-{shares[-1][0] if shares else 'LLC'}"


def in_cache(level: str) -> bool:
    """Whether a level_of label is a cache's (neither past the last one nor DRAM)."""
    return not level.startswith(("past-", "DRAM"))


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


def free_memory(topo: Topology) -> int | None:
    """The memory a plan may take where it runs: this machine's free memory now, or what the
    process's cgroup limit (a Slurm job's `--mem`, a container's) leaves where less, for a run
    and its dry run alike; None for a recorded machine (--input), whose free memory is not known
    (hwloc's synthetic topologies state 1 GiB a NUMA domain): its own run checks."""
    return None if topo.recorded else usable_available_bytes()


def dram_working_set(topo: Topology, cpus: tuple[int, ...]) -> int:
    """4x the last-level cache serving the team and at least DRAM_FLOOR (at most an eighth of
    the topology's memory, where it states it), rounded up so that one-, two- and three-array
    kernels get the same working set per thread."""
    step = SWEEP_QUANTUM * len(cpus)
    memory = topo.memory_bytes
    floor = min(DRAM_FLOOR, memory // 8) if memory else DRAM_FLOOR
    return math.ceil(max(DRAM_FACTOR * llc_bytes(topo, cpus), floor) / step) * step


def _quantize(elems: float) -> int:
    return int(elems) // ELEM_QUANTUM * ELEM_QUANTUM


def elems_for(kernel: str, total_bytes: float, threads: int) -> int:
    """Elements per array and thread that give `kernel` a working set of total_bytes over all
    threads (likwid-bench's convention: the size is split among the kernel's arrays)."""
    return _quantize(total_bytes / (KERNELS[kernel].arrays * kernels.ELEMENT_BYTES * threads))
