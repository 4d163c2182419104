"""What the side-by-side benchmark scripts share: the tool check, the alternating order within a
round, and the within-round ratio statistics (imported by the scripts next to this file)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from hpcprobe import tools


def missing(tool: str) -> bool:
    """Say so and return True when the registered tool is not installed."""
    if tools.get(tool).find():
        return False
    print(f"{tool} not found: install Debian's {tools.get(tool).package} (make setup does, "
          "as root)")
    return True


def in_turn(first: str, second: str, k: int) -> tuple[str, str]:
    """The two tools of round/configuration k in alternating order, so neither always runs on a
    warmer (or cooler) machine."""
    return (first, second) if k % 2 == 0 else (second, first)


def round_ratios(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """Median, lowest and highest of the within-round ratios ours / theirs (the two runs of a
    round are adjacent in time, so a slow phase of the host affects both)."""
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)
