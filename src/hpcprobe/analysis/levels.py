"""Identify the cache-level plateaus of a sweep (bandwidth or latency) and check them against
the topology's cache sizes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpcprobe.common.units import format_bytes
from hpcprobe.results.findings import kind, of_kind
from hpcprobe.results.model import Run
from hpcprobe.viewkit.table import Table

#: A sweep's cache plateaus against the topology's cache sizes (a warning where they disagree)
CACHE_LEVEL = kind("cache_level", "a cache level a sweep saw, against the topology's size",
                   "note", "the cache-levels table", code="HP201", action="watch")

#: A level ends where the figure is this much worse than at the level's smallest working set:
#: the step from one level to the next is at least 2x on current machines (L1->L2 latency ~3x,
#: L3->DRAM bandwidth per core ~2x), while noise and partial misses stay well below it.
EDGE_RATIO = 1.5
#: An observed edge within this factor of the nominal capacity agrees with it (the sweep moves in
#: octaves, and caches lose capacity to code, page colouring and associativity).
EDGE_TOLERANCE = 2.5
#: Sweep points further apart than this bracket an edge too loosely to place it (the memory
#: sweep's last cache point and its DRAM working set, when a guest's cache outlasts the octave
#: past its nominal capacity): the edge is said as the bracket, and judged only where the
#: bracket settles it.
LOOSE_BRACKET = 4.0
#: Said of a level that ends well before its stated size on a virtual CPU.
GUEST_NOTE = ("; a virtual machine is often told of a larger cache than it gets (the host's "
              "is shared with other guests, or the stated topology is not the host's)")


@dataclass(frozen=True)
class LevelCheck:
    """The verdict on one cache level: its plateau, where it ends, and whether that matches."""

    level: str
    nominal_bytes: int  # capacity per thread according to the topology
    plateau: float | None  # in the sweep's unit
    edge_bytes: float | None  # the geometric middle of the two sweep points around the step
    #                           (None where they are too far apart for it to place the edge)
    agrees: bool | None  # None: too few sweep points, or none to place the edge between
    note: str
    edge_between: tuple[int, int] | None = None  # those two points

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "nominal_bytes": self.nominal_bytes,
                "plateau": self.plateau, "edge_bytes": self.edge_bytes,
                "edge_between": None if self.edge_between is None else list(self.edge_between),
                "agrees": self.agrees, "note": self.note}


def check_levels(points: Sequence[tuple[int, float]], shares: Sequence[tuple[str, int]],
                 unit: str = "GB/s", lower_is_better: bool = False, virtual: bool = False
                 ) -> list[LevelCheck]:
    """Check each cache level of `shares` ((name, capacity per thread) from small to large)
    against `points` ((working set per thread, figure) of one sweep).

    A level's reference is the figure at the smallest working set surely inside it (twice the
    previous level's capacity); the level ends between the last working set within EDGE_RATIO of
    it and the next one. Two points an octave apart place the edge near their geometric middle,
    which agrees with the topology within EDGE_TOLERANCE of the capacity; two far apart only
    bound it: it agrees when both bounds lie in that window, disagrees when the two lie wholly
    outside it, and is not judged (None) otherwise. Bandwidth falls from level to level;
    a latency (lower_is_better) rises and is judged through its rate 1/latency. On a
    `virtual` CPU a level that ends short of its stated size says why that may be."""
    to_rate: Callable[[float], float] = (lambda v: 1.0 / v) if lower_is_better else (lambda v: v)
    pts = sorted((s, to_rate(v)) for s, v in points if v > 0)
    out: list[LevelCheck] = []
    prev = 0
    for name, cap in shares:
        lower, prev = prev, cap
        above = [p for p in pts if p[0] >= 2 * lower]
        if not above:
            out.append(LevelCheck(name, cap, None, None, None,
                                  f"{name}: too few sweep points to judge"))
            continue
        ref = above[0][1]
        step = next(((before[0], p[0]) for before, p in zip(above, above[1:], strict=False)
                     if p[1] < ref / EDGE_RATIO), None)
        # the plateau: the level's figures up to its half, and not past a step that comes
        # earlier (a level smaller than claimed has no plateau of the slower level's points);
        # at least the reference
        end = max(above[0][0], min(cap / 2, step[0] if step else cap))
        plateau = statistics.median(v for s, v in above if s <= end)
        shown = to_rate(plateau)
        level_span = f"{shown:.1f} {unit}"
        if step is None:
            beyond = [p for p in pts if p[0] >= 2 * cap]
            if not beyond:
                out.append(LevelCheck(name, cap, shown, None, None,
                                      f"{name}: the sweep does not reach past it"))
                continue
            out.append(LevelCheck(
                name, cap, shown, None, False,
                f"{name}: {level_span} and no step to a slower level up to "
                f"{format_bytes(beyond[-1][0])} per thread; the {format_bytes(cap)} per thread "
                "the topology reports is not seen as a distinct level"))
            continue
        lo, hi = step
        window = (cap / EDGE_TOLERANCE, cap * EDGE_TOLERANCE)
        agrees: bool | None
        edge: float | None = None
        if hi > LOOSE_BRACKET * lo:  # only bounded: judged where the bounds settle it
            agrees = (True if window[0] <= lo and hi <= window[1] else
                      False if hi < window[0] or lo > window[1] else None)
            where = f"ends between {format_bytes(lo)} and {format_bytes(hi)} per thread"
        else:
            edge = math.sqrt(lo * hi)
            agrees = window[0] <= edge <= window[1]
            where = f"ends near {format_bytes(edge)} per thread"
        verdict = {True: ", agrees with", False: ", disagrees with",
                   None: " (no sweep point between): it cannot be placed against"}[agrees]
        short = agrees is False and (hi if edge is None else edge) < window[0]
        out.append(LevelCheck(
            name, cap, shown, edge, agrees,
            f"{name}: {level_span} plateau {where}{verdict} the {format_bytes(cap)} per thread "
            "the topology reports" + (GUEST_NOTE if virtual and short else ""), step))
    return out


def edge_seen(finding: Mapping[str, Any]) -> str:
    """A cache_level finding's edge as the table shows it: near a size, or between two sweep
    points too far apart to place it."""
    if finding["edge_bytes"] is not None:
        return format_bytes(finding["edge_bytes"])
    between = finding.get("edge_between")
    return f"{format_bytes(between[0])}-{format_bytes(between[1])}" if between else "-"


def levels_table(run: Run, benchmark: str) -> Table | None:
    """The cache levels a family's sweeps saw, against the topology (its `cache_level` findings)."""
    rows = of_kind(run.findings, CACHE_LEVEL, benchmark)
    if not rows:
        return None
    t = Table(title="Cache levels seen by the sweeps, against the topology")
    for col in ("benchmark", "kernel", "threads", "level", "capacity/thread", "plateau",
                "edge seen", "verdict"):
        t.add_column(col)
    for f in rows:
        verdict = {True: "agrees", False: "DISAGREES", None: "n/a"}[f["agrees"]]
        t.add_row(f["benchmark"], f["kernel"], str(f["threads"]), f["level"],
                  format_bytes(f["nominal_bytes"]),
                  "-" if f["plateau"] is None else f"{f['plateau']:.1f} {f['unit']}",
                  edge_seen(f), verdict)
    return t
