"""Identify the cache-level plateaus of a bandwidth sweep and check them against the topology."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .units import format_bytes

#: Two plateaus closer than this ratio are the same level as far as the sweep can tell.
DISTINCT_RATIO = 1.10
#: An observed edge within this factor of the nominal capacity agrees with it (the sweep moves in
#: octaves, and caches lose capacity to code, page colouring and associativity).
EDGE_TOLERANCE = 2.5


@dataclass(frozen=True)
class LevelCheck:
    """The verdict on one cache level: its plateau, where it ends, and whether that matches."""

    level: str
    nominal_bytes: int  # capacity per thread according to the topology
    plateau_gbs: float | None
    edge_bytes: float | None
    agrees: bool | None  # None when the sweep has too few points to judge
    note: str

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "nominal_bytes": self.nominal_bytes,
                "plateau_gbs": self.plateau_gbs, "edge_bytes": self.edge_bytes,
                "agrees": self.agrees, "note": self.note}


def _median(points: Sequence[tuple[int, float]]) -> float | None:
    return statistics.median(bw for _, bw in points) if points else None


def check_levels(points: Sequence[tuple[int, float]],
                 shares: Sequence[tuple[str, int]]) -> list[LevelCheck]:
    """Check each cache level of `shares` ((name, capacity per thread) from small to large)
    against `points` ((working set per thread, GB/s) of one sweep)."""
    pts = sorted(points)
    if not shares or not pts:
        return []
    bounds = []
    prev = 0
    for name, cap in shares:
        inner = [p for p in pts if 2 * prev <= p[0] <= cap / 2]
        bounds.append((name, cap, prev, inner or [p for p in pts if prev < p[0] <= cap]))
        prev = cap
    dram = [p for p in pts if p[0] > 2 * prev]
    out = []
    for i, (name, cap, lower, inner) in enumerate(bounds):
        plateau = _median(inner)
        nxt = _median(bounds[i + 1][3]) if i + 1 < len(bounds) else _median(dram)
        next_name = bounds[i + 1][0] if i + 1 < len(bounds) else "DRAM"
        if plateau is None or nxt is None:
            out.append(LevelCheck(name, cap, plateau, None, None,
                                  f"{name}: too few sweep points to judge"))
            continue
        if plateau < DISTINCT_RATIO * nxt:
            span = [p[0] for p in inner]
            out.append(LevelCheck(
                name, cap, plateau, None, False,
                f"{name}: no plateau above {next_name}: {plateau:.1f} GB/s at "
                f"{format_bytes(min(span))}-{format_bytes(max(span))} per thread vs "
                f"{nxt:.1f} GB/s; "
                f"the {format_bytes(cap)} per thread the topology reports is not seen"))
            continue
        threshold = math.sqrt(plateau * nxt)
        edge = None
        before = None
        for p in pts:
            if p[0] <= lower:
                continue
            if p[1] < threshold:
                edge = math.sqrt(p[0] * before[0]) if before else float(p[0])
                break
            before = p
        if edge is None:
            out.append(LevelCheck(name, cap, plateau, None, None,
                                  f"{name}: bandwidth never fell to {next_name}'s level"))
            continue
        agrees = cap / EDGE_TOLERANCE <= edge <= cap * EDGE_TOLERANCE
        verdict = "agrees with" if agrees else "disagrees with"
        out.append(LevelCheck(
            name, cap, plateau, edge, agrees,
            f"{name}: {plateau:.1f} GB/s plateau ends near {format_bytes(edge)} per thread, "
            f"{verdict} the {format_bytes(cap)} per thread the topology reports"))
    return out
