"""Repeating an external program (a user's application, fio, iperf3, pgbench): how many times,
with progress, each repetition one sample; a failed repetition stops the series with its last
lines of output and is never counted."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hpcprobe.measure.family import RunContext

T = TypeVar("T")

#: Seconds one repetition may take unless the user says otherwise.
DEFAULT_TIMEOUT_S = 3600.0


def repetitions(ctx: RunContext, asked: int | None) -> int:
    """The repetitions asked for, else the profile's fewest samples (quick 3, default 5,
    thorough 10): each family's settings say so for every profile."""
    return asked if asked is not None else ctx.profile.repetition.min_samples


#: A family that only repeats a program: the same settings for every profile (the repetitions
#: come from the profile).
def same_for_every_profile(value: object) -> dict[str, object]:
    from hpcprobe.measure import profiles

    return dict.fromkeys(profiles.PROFILES, value)


def repeat(ctx: RunContext, label: str, n: int, once: Callable[[int], T]) -> list[T]:
    """`once(i)` for i in 0..n-1, with the progress bar; what it raises stops the series.
    Interrupted (Ctrl-C) after a repetition, it returns those that ended and marks the run
    interrupted (a later series of the family does not start)."""
    if ctx.interrupted:
        raise KeyboardInterrupt
    ctx.progress.start(label, n)
    out: list[T] = []
    for i in range(n):
        try:
            out.append(once(i))
        except KeyboardInterrupt:
            if not out:
                raise
            ctx.interrupted = True
            ctx.warnings.append(f"{label}: interrupted after {len(out)} of {n} repetition(s); "
                                "those are kept")
            break
        ctx.progress.advance(f"{label} {i + 1}/{n}")
    return out
