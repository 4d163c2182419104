"""Placements: turn the topology into the explicit, ordered CPU list of a thread team."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from hpcprobe.common.cpulist import format_cpulist, parse_cpulist
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.machine.topology import PU, Topology

# Hierarchy levels used to spread threads, outermost first.
_LEVELS: tuple[Callable[[PU], int | None], ...] = (
    lambda p: p.package, lambda p: p.numa, lambda p: p.l3, lambda p: p.core)


def _spread_order(pus: list[PU], depth: int = 0) -> list[PU]:
    """Round-robin over the children at each level of the hierarchy: the first k PUs of the
    result are as far apart as the machine allows (one per package, then per NUMA domain, ...)."""
    if depth == len(_LEVELS) or len(pus) <= 1:
        return list(pus)
    key = _LEVELS[depth]
    groups: dict[int | None, list[PU]] = {}
    for p in pus:
        groups.setdefault(key(p), []).append(p)
    orders = [_spread_order(g, depth + 1) for g in groups.values()]
    out: list[PU] = []
    for i in range(max(len(o) for o in orders)):
        out.extend(o[i] for o in orders if i < len(o))
    return out


def _one_per(key: Callable[[PU], int | None]) -> Callable[[list[PU]], list[PU]]:
    def place(pus: list[PU]) -> list[PU]:
        first: dict[int | None, PU] = {}
        for p in pus:
            first.setdefault(key(p), p)
        return _spread_order(list(first.values()))
    return place


#: Named placements: each maps the allowed PUs (topology order) to an ordered CPU list.
PLACEMENTS: dict[str, Callable[[list[PU]], list[PU]]] = {
    "compact": lambda pus: list(pus),
    "spread": _spread_order,
    "one-per-core": _one_per(lambda p: p.core),
    "one-per-l3": _one_per(lambda p: p.l3),
    "one-per-numa": _one_per(lambda p: p.numa),
    "one-per-socket": _one_per(lambda p: p.package),
}

PLACEMENT_HELP = ("compact (consecutive PUs, SMT siblings together), spread (as far apart as "
                  "possible), one-per-core, one-per-l3, one-per-numa, one-per-socket, or an "
                  "explicit OS CPU list such as 0-3,8")


@dataclass(frozen=True)
class Plan:
    """A thread team's CPUs in thread order, and how they were chosen."""

    placement: str
    cpus: tuple[int, ...]
    available: int  # CPUs the placement yields before --threads narrows it
    oversubscribed: bool

    def to_dict(self) -> dict[str, object]:
        return {"placement": self.placement, "threads": len(self.cpus), "cpus": list(self.cpus),
                "cpulist": format_cpulist(self.cpus), "available": self.available,
                "oversubscribed": self.oversubscribed}


def placement_cpus(topo: Topology, placement: str) -> list[int]:
    """Every CPU a placement yields, in thread order."""
    allowed = [p for p in topo.pus if p.allowed]
    if not allowed:
        raise UserError("no CPU of this topology is allowed to this process")
    if placement in PLACEMENTS:
        return [p.os_index for p in PLACEMENTS[placement](allowed)]
    if placement and (placement[0].isdigit()):
        try:
            cpus = parse_cpulist(placement)
        except ValueError as exc:
            raise OptionError(f"<placement> {placement}: {exc}") from exc
        known = {p.os_index for p in topo.pus}
        allowed_set = {p.os_index for p in allowed}
        bad = [c for c in cpus if c not in known]
        if bad:
            raise OptionError(f"<placement> {placement}: CPU(s) {format_cpulist(bad)} do not "
                              f"exist on this machine (it has {format_cpulist(known)})")
        denied = [c for c in cpus if c not in allowed_set]
        if denied:
            raise OptionError(f"<placement> {placement}: CPU(s) {format_cpulist(denied)} are "
                              f"outside the allowed cpuset {format_cpulist(allowed_set)}")
        if len(set(cpus)) != len(cpus):
            raise OptionError(f"<placement> {placement}: a CPU is listed twice")
        return cpus
    raise OptionError(f"<placement> {placement!r} is unknown; use {PLACEMENT_HELP}")


def plan(topo: Topology, placement: str, threads: int | None = None,
         oversubscribe: bool = False) -> Plan:
    """The CPUs of `threads` threads under `placement` (all it yields when threads is None)."""
    cpus = placement_cpus(topo, placement)
    if threads is None:
        return Plan(placement, tuple(cpus), len(cpus), False)
    if threads <= 0:
        raise OptionError(f"<threads> {threads}: the thread count must be at least 1")
    if threads > len(cpus) and not oversubscribe:
        raise OptionError(f"<threads> {threads}: placement {placement} yields {len(cpus)} "
                          f"CPU(s) on this machine; use <threads> <= {len(cpus)} or "
                          "<oversubscribe>")
    chosen = [cpus[i % len(cpus)] for i in range(threads)]
    return Plan(placement, tuple(chosen), len(cpus), threads > len(cpus))


#: Counts up to this are all in a curve over active cores; beyond, the curve thins out.
DENSE_COUNTS = 8


def active_counts(n: int, max_points: int | None = None) -> list[int]:
    """Thread counts for a curve over 1..n active cores: all of them when there are at most
    max_points (or max_points is None); otherwise 1..8, every power of two (the memory
    benchmark's ladder) and evenly spaced counts up to n."""
    if max_points is None or n <= max_points:
        return list(range(1, n + 1))
    out = set(range(1, DENSE_COUNTS + 1)) | {2 ** i for i in range(int(math.log2(n)) + 1)}
    spaced = max(1, max_points - len(out))
    out |= {DENSE_COUNTS + round((n - DENSE_COUNTS) * i / spaced) for i in range(1, spaced + 1)}
    return sorted(c for c in out if c <= n)


def curve(topo: Topology, placement: str | None, threads: tuple[int, ...] | None,
          max_points: int | None, what: str = "the clock") -> tuple[str, tuple[int, ...],
                                                                    list[int]]:
    """(placement, its CPUs in order, active-core counts) of a curve over active cores. The
    clock of a core is only its own with one thread per core: no oversubscription."""
    name = placement or "one-per-core"
    cores = plan(topo, name).cpus
    counts = sorted(set(threads)) if threads else active_counts(len(cores), max_points)
    for k in counts:
        if k < 1:
            raise OptionError(f"<threads> {k}: the thread count must be at least 1")
        if k > len(cores):
            raise OptionError(f"<threads> {k}: {what} needs one thread per CPU and placement "
                              f"{name} yields {len(cores)} CPU(s) here; use <threads> "
                              f"1..{len(cores)}")
    return name, cores, counts
