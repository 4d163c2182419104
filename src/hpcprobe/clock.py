"""The core clock without privileges, from timed chains of dependent one-cycle adds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from ._native import Team
from .errors import MeasurementError

ADDS_PER_ITER = 64
#: Warm-up before timing, so the core has left its idle clock (field practice: >= 0.5 s).
WARMUP_S = 0.5


def ghz_from_pairs(short_s: Sequence[float], long_s: Sequence[float], short_adds: int,
                   long_adds: int) -> list[float]:
    """Clock samples in GHz from paired timings of two chain lengths: the extra adds over the
    extra time, which cancels the fixed overhead of a timing. Pairs whose difference is not
    positive (a disturbed sample) are dropped."""
    extra = long_adds - short_adds
    return [extra / (b - a) / 1e9 for a, b in zip(short_s, long_s, strict=True) if b > a > 0]


def measure_ghz(team: Team, samples: int = 11, iters: int = 200_000) -> list[float]:
    """Clock samples (GHz) of the first selected thread, after a warm-up."""
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        team.clock_chain(iters, 1)
    short, long = [], []
    for _ in range(samples):
        short.append(team.clock_chain(iters, 1)[0][0])
        long.append(team.clock_chain(2 * iters, 1)[0][0])
    if min(short + long) < 0:
        raise MeasurementError("the add chain computed a wrong result; clock not measured")
    out = ghz_from_pairs(short, long, iters * ADDS_PER_ITER, 2 * iters * ADDS_PER_ITER)
    if not out:
        raise MeasurementError("every clock sample was disturbed; clock not measured")
    return out


def median_ghz(samples: Sequence[float]) -> float:
    return statistics.median(samples)
