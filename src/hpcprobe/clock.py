"""The core clock without privileges: timed chains of dependent one-cycle adds at two lengths,
alone or with vector FMAs in flight, and the estimator that turns timings into GHz samples."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ._native import Team
from .errors import MeasurementError
from .stats import outliers

ADDS_PER_ITER = 64
#: Warm-up before timing, so the core has left its idle clock (field practice: >= 0.5 s).
WARMUP_S = 0.5
#: The short chain: about 2 ms at 4 GHz; the long one is twice as long.
SHORT_ITERS = 125_000
#: A sample further than this many robust standard deviations from the median is disturbed
#: (an interrupt in one chain of the pair), but never one within OUTLIER_FLOOR of it.
OUTLIER_Z = 3.5
OUTLIER_FLOOR = 0.02


@dataclass(frozen=True)
class Timing:
    """One thread's timings of the short and the long chain of one sample pair (seconds; -1 when
    the chain's result was wrong) and whether it was found off its CPU in either."""

    short_s: float
    long_s: float
    migrated: bool = False


@dataclass(frozen=True)
class ClockEstimate:
    """Accepted clock samples in GHz, and how many pairs were rejected for each reason."""

    ghz: list[float]
    wrong: int = 0
    migrated: int = 0
    disturbed: int = 0
    outliers: int = 0

    @property
    def rejected(self) -> int:
        return self.wrong + self.migrated + self.disturbed + self.outliers

    @property
    def median(self) -> float:
        return statistics.median(self.ghz)


def estimate(timings: Sequence[Timing], short_adds: int, long_adds: int) -> ClockEstimate:
    """GHz samples from paired timings of two chain lengths: the extra adds over the extra time,
    which cancels the fixed overhead of a timing. Pairs with a wrong result or a migrated thread
    are rejected, so are pairs whose difference is not positive, and then outliers."""
    wrong = sum(1 for t in timings if t.short_s < 0 or t.long_s < 0)
    ok = [t for t in timings if t.short_s >= 0 and t.long_s >= 0]
    migrated = sum(1 for t in ok if t.migrated)
    ok = [t for t in ok if not t.migrated]
    ghz = [(long_adds - short_adds) / (t.long_s - t.short_s) / 1e9 for t in ok
           if t.long_s > t.short_s > 0]
    disturbed = len(ok) - len(ghz)
    out = outliers(ghz, OUTLIER_Z, OUTLIER_FLOOR)
    kept = [g for i, g in enumerate(ghz) if i not in out]
    return ClockEstimate(kept, wrong, migrated, disturbed, len(out))


def warm_up(team: Team, load: str, seconds: float = WARMUP_S) -> None:
    """Run the chain on the selected threads for `seconds`, so the cores leave their idle clock
    and settle at the one for this load."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        team.clock_chain(load, SHORT_ITERS, 1)


def sample_pairs(team: Team, load: str, pairs: int, iters: int = SHORT_ITERS) -> list[Timing]:
    """`pairs` short/long chain timings on every selected thread, all threads at once."""
    out = []
    for _ in range(pairs):
        (short,), (m_short,) = team.clock_chain(load, iters, 1)
        (long,), (m_long,) = team.clock_chain(load, 2 * iters, 1)
        out += [Timing(a, b, ma or mb) for a, b, ma, mb in zip(short, long, m_short, m_long,
                                                                 strict=True)]
    return out


def measure(team: Team, load: str = "scalar", pairs: int = 11, iters: int = SHORT_ITERS,
            warmup_s: float = WARMUP_S) -> ClockEstimate:
    """The clock of the selected threads with `load` in flight, after a warm-up."""
    warm_up(team, load, warmup_s)
    est = estimate(sample_pairs(team, load, pairs, iters), iters * ADDS_PER_ITER,
                   2 * iters * ADDS_PER_ITER)
    if not est.ghz:
        raise MeasurementError(f"clock ({load} load): every sample was rejected ({est.wrong} "
                               f"wrong, {est.migrated} migrated, {est.disturbed} disturbed)")
    return est
