"""Timed STREAM-kernel samples on a pinned team, validated by the core (shared by the families
that stream: memory, numa)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from hpcprobe.common.errors import MeasurementError
from hpcprobe.common.stats import Repetition
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


class _Kernel:
    """One measurement's kernel on a team, its inner repetitions calibrated so that a timed
    sample lasts at least `sample_s`: timed samples as GB/s (STREAM counting)."""

    def __init__(self, ctx: RunContext, team: Team, m: Measurement, sample_s: float) -> None:
        self.ctx, self.team, self.m = ctx, team, m
        self.kid = KERNELS[m.kernel].kernel_id
        self.migrated = 0
        team.stream_begin(self.kid, m.elems)
        # Grow the inner repetitions until a sample lasts at least sample_s (a first, cold pass
        # underestimates how many fit).
        self.inner = 1
        for _ in range(CALIBRATION_STEPS):
            times, _ = team.stream_measure(self.kid, ctx.isa, m.stores, m.elems, self.inner, 1)
            took = max(max(times[0]), 1e-9)
            if took >= sample_s:
                break
            self.inner = max(self.inner + 1, math.ceil(self.inner * 1.2 * sample_s / took))

    def take(self, n: int) -> list[float | None]:
        m = self.m
        times, mig = self.team.stream_measure(self.kid, self.ctx.isa, m.stores, m.elems,
                                              self.inner, n)
        self.migrated += mig
        return [bandwidth_gbs(KERNELS[m.kernel], m.stores, m.elems, m.threads, self.inner,
                              max(t)) for t in times]

    def refill(self) -> None:
        """One untimed pass over the arrays, their pattern restored first: they are back in the
        cache after other measurements ran on the team."""
        self.team.stream_begin(self.kid, self.m.elems)
        self.team.stream_measure(self.kid, self.ctx.isa, self.m.stores, self.m.elems, 1, 1)

    def check(self, benchmark: str) -> None:
        """`Invalid` where the arrays differ from their closed-form values."""
        err = self.team.stream_check(self.kid, self.m.elems)
        if not err <= MAX_REL_ERROR:
            raise Invalid(f"{benchmark} {self.m.label}: validation failed (max relative error "
                          f"{err:.3g} > {MAX_REL_ERROR:g}); figure discarded")

    def record(self, benchmark: str, got: sampling.Sampled) -> list[float]:
        if self.migrated:
            self.ctx.warnings.append(
                f"{benchmark} {self.m.label}: threads left their CPU in {self.migrated} "
                "thread-sample(s); is something else changing affinities?")
        return self.ctx.record(benchmark, self.m.label, got)


def measure(ctx: RunContext, team: Team, m: Measurement, budget_s: float,
            benchmark: str) -> list[float]:
    """Timed samples of one measurement as GB/s (STREAM counting), taken in the steady state
    (the calibration and warm-up samples are dropped), then the arrays checked against their
    closed-form values: `Invalid` where they differ, and the samples count for nothing."""
    kernel = _Kernel(ctx, team, m, ctx.profile.sample_s)
    got = sampling.sample(kernel.take, ctx.profile.repetition, budget_s)
    kernel.check(benchmark)
    return kernel.record(benchmark, got)


#: Share of a group's budget its rounds plan to fill (calibration, the pattern restored before
#: each round and the validation take the rest).
ROUNDS_FILL = 0.8


def measure_rounds(ctx: RunContext, team: Team, ms: list[Measurement], budget_s: float,
                   benchmark: str) -> list[list[float] | Invalid]:
    """Timed samples (GB/s) of cache-resident measurements on one thread set, each figure's
    spread over the group's whole budget: rounds of one sample of every measurement in turn
    (the first after the warm-up of `sampling.sample`, each later one after an untimed pass
    that brings its arrays back into the cache), with samples long enough that the profile's
    most samples of every figure fill the budget. A host whose level shifts every second or so
    (a hypervisor moving vCPUs) then shows it in each figure's samples and CI, where samples
    taken back to back would agree on whichever level they met. Per measurement: its samples,
    or `Invalid` where its arrays failed validation after a round."""
    rule = ctx.profile.repetition
    interleaved = len(ms) > 1
    per_sample = budget_s * ROUNDS_FILL / (len(ms) * rule.max_samples)
    start = time.perf_counter()
    kernels_ = [_Kernel(ctx, team, m, max(ctx.profile.sample_s, per_sample)) for m in ms]
    first = Repetition(rule.target, 1, 1)
    got: list[sampling.Sampled | Invalid] = []
    for k in kernels_:
        team.stream_begin(k.kid, k.m.elems)
        got.append(_checked(k, sampling.sample(k.take, first, budget_s / len(ms)), benchmark,
                            interleaved))
    while True:
        live = [i for i, g in enumerate(got) if isinstance(g, sampling.Sampled) and
                len(g.samples) < rule.max_samples and g.rejected <= rule.max_samples]
        if not live or (time.perf_counter() - start >= budget_s and
                        all(len(_sampled(got[i]).samples) >= rule.min_samples for i in live)):
            break
        for i in live:
            got[i] = _round(kernels_[i], _sampled(got[i]), benchmark, interleaved)
    out: list[list[float] | Invalid] = []
    for k, g in zip(kernels_, got, strict=True):
        if isinstance(g, sampling.Sampled) and not interleaved:
            g = _checked(k, g, benchmark, True)
        out.append(k.record(benchmark, g) if isinstance(g, sampling.Sampled) else g)
    return out


def _sampled(g: sampling.Sampled | Invalid) -> sampling.Sampled:
    assert isinstance(g, sampling.Sampled)
    return g


def _checked(k: _Kernel, g: sampling.Sampled, benchmark: str,
             check: bool) -> sampling.Sampled | Invalid:
    try:
        if check:
            k.check(benchmark)
    except Invalid as exc:
        return exc
    return g


def _round(k: _Kernel, g: sampling.Sampled, benchmark: str,
           interleaved: bool) -> sampling.Sampled | Invalid:
    """One more sample of a measurement, its arrays first brought back into the cache where
    other measurements ran on the team since its last."""
    if interleaved:
        k.refill()
    taken = k.take(1)
    g.rejected += sum(1 for x in taken if x is None)
    g.samples.extend(x for x in taken if x is not None)
    return _checked(k, g, benchmark, interleaved)
