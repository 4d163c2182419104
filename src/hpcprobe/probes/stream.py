"""Timed STREAM-kernel samples on a pinned team, validated by the core (shared by the families
that stream: memory, numa)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hpcprobe.common.errors import MeasurementError
from hpcprobe.common.units import format_bytes
from hpcprobe.measure import sampling
from hpcprobe.measure.family import RunContext
from hpcprobe.native import Team, kernels
from hpcprobe.native.kernels import KERNELS, MAX_REL_ERROR, bandwidth_gbs


class Invalid(MeasurementError):
    """The arrays after a measurement differ from their closed-form values: no figure."""


#: Tries to size a sample's inner repetitions before giving up on reaching sample_s.
CALIBRATION_STEPS = 5


@dataclass(frozen=True)
class Measurement:
    """One metric to measure: a kernel, store type and working set on a pinned team."""

    phase: str  # "sweep", "stream" or "single"
    kernel: str
    stores: str
    placement: str
    cpus: tuple[int, ...]
    elems: int  # per thread and array
    level: str
    in_sweep: bool = False  # a STREAM measurement that is also a sweep's DRAM point

    @property
    def threads(self) -> int:
        return len(self.cpus)

    @property
    def size_bytes(self) -> int:
        """The working set of all threads: arrays the kernel touches x elements x 8 B."""
        return KERNELS[self.kernel].arrays * kernels.ELEMENT_BYTES * self.elems * self.threads

    @property
    def label(self) -> str:
        return (f"{self.kernel} {self.stores} {self.threads}T {self.placement} "
                f"{format_bytes(self.size_bytes)}")


def measure(ctx: RunContext, team: Team, m: Measurement, budget_s: float,
            benchmark: str) -> list[float]:
    """Timed samples of one measurement as GB/s (STREAM counting), taken in the steady state
    (the calibration and warm-up samples are dropped), then the arrays checked against their
    closed-form values: `Invalid` where they differ, and the samples count for nothing."""
    k = KERNELS[m.kernel]
    kid = k.kernel_id
    team.stream_begin(kid, m.elems)
    # Grow the inner repetitions until a sample lasts at least sample_s (a first, cold pass
    # underestimates how many fit).
    inner = 1
    for _ in range(CALIBRATION_STEPS):
        times, _ = team.stream_measure(kid, ctx.isa, m.stores, m.elems, inner, 1)
        took = max(max(times[0]), 1e-9)
        if took >= ctx.profile.sample_s:
            break
        inner = max(inner + 1, math.ceil(inner * 1.2 * ctx.profile.sample_s / took))
    migrated = 0

    def take(n: int) -> list[float | None]:
        nonlocal migrated
        times, mig = team.stream_measure(kid, ctx.isa, m.stores, m.elems, inner, n)
        migrated += mig
        return [bandwidth_gbs(k, m.stores, m.elems, m.threads, inner, max(t)) for t in times]

    got = sampling.sample(take, ctx.profile.repetition, budget_s)
    if migrated:
        ctx.warnings.append(f"{benchmark} {m.label}: threads left their CPU in {migrated} "
                            "thread-sample(s); is something else changing affinities?")
    err = team.stream_check(kid, m.elems)
    if not err <= MAX_REL_ERROR:
        raise Invalid(f"{benchmark} {m.label}: validation failed (max relative error {err:.3g} "
                      f"> {MAX_REL_ERROR:g}); figure discarded")
    return ctx.record(benchmark, m.label, got)
