"""Rank layouts derived from the topology, shared by every family that launches ranks (HPL,
the application proxies): one rank per core, or one per NUMA domain or socket with a thread per
core inside it (Grid's recommendation is one per NUMA domain); and the launch layout of the
first n of them on one or several hosts (each host taken to look like this one)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.machine.topology import Topology
from hpcprobe.mpi.launchers import Layout


@dataclass(frozen=True)
class Ranks:
    """The ranks of one node: rank i runs its threads on the CPUs sets[i]."""

    layout: str  # "core", "numa" or "socket"
    sets: tuple[tuple[int, ...], ...]

    @property
    def threads(self) -> int:
        return max(len(s) for s in self.sets)

    @property
    def cores(self) -> tuple[int, ...]:
        return tuple(c for s in self.sets for c in s)

    def first(self, n: int, hosts: tuple[str, ...] = ()) -> Layout:
        """The launch layout of n ranks: the node's ranks in order, host after host (n ranks
        on each host when hosts are given)."""
        per_host = n // max(1, len(hosts))
        if per_host > len(self.sets) or per_host < 1 or (hosts and n % len(hosts)):
            where = f" on each of {len(hosts)} hosts" if hosts else ""
            most = len(self.sets) * max(1, len(hosts))
            raise OptionError(f"<ranks> {n}: the {self.layout} layout has {len(self.sets)} rank(s) "
                              f"a node here{where}; give at most {most}"
                              + (f", a multiple of {len(hosts)}" if hosts else ""))
        sets = self.sets[:per_host] * max(1, len(hosts))
        names = tuple(h for h in hosts for _ in range(per_host)) or None
        return Layout(tuple(s[0] for s in sets), names, sets if self.threads > 1 else None)


def ranks(topo: Topology, layout: str) -> Ranks:
    """One rank per core (its first allowed PU: no SMT sibling), or one per NUMA domain or
    socket with one thread per core of it."""
    allowed = set(topo.allowed_cpus)
    firsts = [next(c for c in core.cpus if c in allowed) for core in topo.cores
              if allowed & set(core.cpus)]
    sets: list[tuple[int, ...]]
    if layout == "core":
        sets = [(c,) for c in firsts]
    else:
        domains = topo.numa_nodes if layout == "numa" else topo.packages
        sets = [tuple(c for c in firsts if c in d.cpus) for d in domains]
        sets = [s for s in sets if s]
    if not sets:
        raise OptionError(f"<layout> {layout}: no allowed core here")
    return Ranks(layout, tuple(sets))


def grid(n: int, ndim: int) -> tuple[int, ...]:
    """n ranks over ndim directions: the prime factors of n, largest first, each onto the
    direction with the fewest ranks so far, the last direction first among equals (Grid's
    `--mpi 1.1.1.2` for two ranks on a 4-D lattice)."""
    factors, k, m = [], 2, n
    while m > 1:
        while m % k == 0:
            factors.append(k)
            m //= k
        k += 1
    dims = [1] * ndim
    for f in sorted(factors, reverse=True):
        at = min(range(ndim - 1, -1, -1), key=lambda d: dims[d])
        dims[at] *= f
    return tuple(dims)


def parse_grid(text: str, n: int, ndim: int, flag: str) -> tuple[int, ...]:
    """A rank grid a.b.c(.d) of ndim extents whose product is the rank count n."""
    try:
        dims = tuple(int(v) for v in text.split("."))
    except ValueError:
        dims = ()
    if len(dims) != ndim or min(dims) < 1:
        example = ".".join(["1"] * (ndim - 1) + ["2"])
        raise UserError(f"{flag} {text}: give {ndim} rank counts, e.g. {example}")
    if math.prod(dims) != n:
        raise UserError(f"{flag} {text}: {math.prod(dims)} ranks, but the layout has {n}")
    return dims


def split(total: tuple[int, ...], ranks: tuple[int, ...], what: str, least: int,
          even: bool) -> tuple[int, ...]:
    """A global extent per direction divided over the rank grid: each rank's local extent,
    which must be whole, at least `least` and (checkerboarding) even when asked."""
    local = []
    for t, r in zip(total, ranks, strict=True):
        if t % r or t // r < least or (even and t // r % 2):
            raise UserError(
                f"{what} {'x'.join(map(str, total))} does not divide over the rank grid "
                f"{'.'.join(map(str, ranks))}: each rank's extent must be a whole number, at "
                f"least {least}" + (" and even" if even else ""))
        local.append(t // r)
    return tuple(local)


@dataclass(frozen=True)
class Placement:
    """Ranks for a run: the node's rank layout, the launch layout and the rank grid."""

    ranks: Ranks
    layout: Layout
    grid: tuple[int, ...]

    @property
    def nodes(self) -> int:
        return len(set(self.layout.hosts)) if self.layout.hosts else 1

    @property
    def grid_text(self) -> str:
        return ".".join(map(str, self.grid))


def place(topo: Topology, layout: str | None, n: int | None, hosts: tuple[str, ...] | None,
          rank_grid: str | None, ndim: int) -> Placement | None:
    """The ranks of a proxy run: None when nothing asks for ranks (no layout, count, hosts or
    grid) and one NUMA domain here (Grid's layout is then one rank: the run stays in this
    process); else the layout (one rank per NUMA domain unless asked), its first n ranks
    and the rank grid over ndim directions. A layout the machine cannot give or a grid that
    does not match the ranks is a user error."""
    rk = ranks(topo, layout or "numa")
    if layout is None and n is None and not hosts and rank_grid is None and len(rk.sets) == 1:
        return None
    hosts = hosts or ()
    count = n or len(rk.sets) * max(1, len(hosts))
    g = parse_grid(rank_grid, count, ndim, "--rank-grid") if rank_grid else grid(count, ndim)
    return Placement(rk, rk.first(count, hosts), g)
