"""The core clock without privileges: timed chains of dependent one-cycle adds at two lengths,
alone or with vector FMAs in flight, and the estimator that turns timings into GHz samples."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from hpcprobe.common.errors import MeasurementError
from hpcprobe.native import Team

ADDS_PER_ITER = 64
#: Warm-up before timing, so the core has left its idle clock (field practice: >= 0.5 s).
WARMUP_S = 0.5
#: The short chain: about 2 ms at 4 GHz; the long one is twice as long.
SHORT_ITERS = 125_000
#: Pairs per clock sample. A sample is taken from the fastest short and the fastest long chain
#: among them: an interrupt or a stolen time slice only ever adds time, so the minima are the
#: undisturbed timings, where a median of per-pair figures still carries the host's noise (it
#: read a busy host's clock 6 % low, and put kernels above their model).
BLOCK = 3


@dataclass(frozen=True)
class Timing:
    """One thread's timings of the short and the long chain of one sample pair (seconds; -1 when
    the chain's result was wrong) and whether it was found off its CPU in either."""

    short_s: float
    long_s: float
    migrated: bool = False


def block_ghz(timings: Sequence[Timing], short_adds: int, long_adds: int) -> float | None:
    """One clock sample in GHz from one thread's pairs: the extra adds of the long chain over
    the difference of the fastest long and the fastest short timing, which cancels the fixed
    overhead of a timing. None (rejected) when fewer than two pairs had a right result on their
    CPU, or the difference is not positive."""
    ok = [t for t in timings if t.short_s >= 0 and t.long_s >= 0 and not t.migrated]
    if len(ok) < 2:
        return None
    dt = min(t.long_s for t in ok) - min(t.short_s for t in ok)
    return (long_adds - short_adds) / dt / 1e9 if dt > 0 else None


def warm_up(team: Team, load: str, seconds: float = WARMUP_S) -> None:
    """Run the chain on the selected threads for `seconds`, so the cores leave their idle clock
    and settle at the one for this load."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        team.clock_chain(load, SHORT_ITERS, 1)


def sample_pairs(team: Team, load: str, pairs: int, iters: int = SHORT_ITERS) -> list[Timing]:
    """`pairs` short/long chain timings on every selected thread, all threads at once; thread
    t's timings are every len(team.active)-th from t."""
    out = []
    for _ in range(pairs):
        (short,), (m_short,) = team.clock_chain(load, iters, 1)
        (long,), (m_long,) = team.clock_chain(load, 2 * iters, 1)
        out += [Timing(a, b, ma or mb) for a, b, ma, mb in zip(short, long, m_short, m_long,
                                                                 strict=True)]
    return out


def samples(team: Team, load: str, n: int, iters: int = SHORT_ITERS) -> list[float | None]:
    """n clock samples of every selected thread (GHz; None where rejected), all threads at once,
    each from BLOCK short/long pairs."""
    threads = len(team.active)
    out: list[float | None] = []
    for _ in range(n):
        pairs = sample_pairs(team, load, BLOCK, iters)
        out += [block_ghz(pairs[t::threads], iters * ADDS_PER_ITER, 2 * iters * ADDS_PER_ITER)
                for t in range(threads)]
    return out


def measure(team: Team, load: str = "scalar", n: int = 11, iters: int = SHORT_ITERS,
            warmup_s: float = WARMUP_S) -> list[float]:
    """n clock samples of the selected threads with `load` in flight, after a warm-up."""
    warm_up(team, load, warmup_s)
    ghz = [g for g in samples(team, load, n, iters) if g is not None]
    if not ghz:
        raise MeasurementError(f"clock ({load} load): every sample was rejected (wrong results, "
                               "migrated threads or disturbed timings)")
    return ghz
