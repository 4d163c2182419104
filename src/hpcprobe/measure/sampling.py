"""The one sampling driver: warm up until successive samples agree, then repeat until the 95 % CI
of the median meets the target or the budget is spent; rejected samples counted, never kept."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hpcprobe.common.stats import Repetition, summarize
from hpcprobe.results.findings import Finding, kind

#: A figure got without its warm-up settling, or short of its CI target (one warning a
#: benchmark sums them up)
SAMPLING = kind("sampling", "a figure measured before its warm-up settled, or stopped at the "
                "time budget before its CI target", "note", "the run's JSON document",
                    code="HP101", action="re-measure")

#: Successive warm-up samples agree when they differ by at most this (relative): a cache level
#: filling up, a clock leaving idle or a page-table warming moves samples by far more.
WARMUP_AGREE = 0.03
#: This many successive agreeing pairs end the warm-up (three samples in a row within the band),
#: so that one lucky pair on a ramp does not.
WARMUP_STREAK = 2
#: Share of a measurement's budget the warm-up may use before it is cut short (a warning).
WARMUP_SHARE = 0.5
#: The warm-up takes at least this many samples and never more than this many.
WARMUP_MIN, WARMUP_MAX = 3, 200

#: take(k) runs k timed samples and returns each one's figure, or None for a rejected sample
#: (a migrated thread, a disturbed pair); it may return more than k where a call yields more.
Take = Callable[[int], Sequence[float | None]]


@dataclass
class Sampled:
    """The kept samples of one measurement and how they were got."""

    samples: list[float] = field(default_factory=list)
    warmup: int = 0  # samples discarded while warming up
    steady: bool = False  # successive warm-up samples agreed before its budget ran out
    rejected: int = 0  # samples rejected by take (None)
    target: float = 0.0

    @property
    def target_met(self) -> bool:
        """The CI of the median is within the target (two samples at least)."""
        return len(self.samples) >= 2 and \
            summarize(self.samples).rel_ci_halfwidth <= self.target

    @property
    def ci_percent(self) -> float:
        return 100 * summarize(self.samples).rel_ci_halfwidth if self.samples else float("inf")


def agree(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


def sample(take: Take, rule: Repetition, budget_s: float, warmup: bool = True,
           tolerance: float = WARMUP_AGREE) -> Sampled:
    """Samples of one measurement. The warm-up (every sample it takes is discarded) ends when
    WARMUP_STREAK successive pairs of samples agree within `tolerance`, or when it has used
    WARMUP_SHARE of the budget (then `steady` is False); with warmup=False only the first sample
    is dropped. Then `rule` says how many more to take, until its CI target, its sample limits
    or the budget. Rejected samples do not count, but a measurement that rejects more than
    rule.max_samples stops."""
    out = Sampled(target=rule.target)
    start = time.perf_counter()
    prev: float | None = None
    streak = 0
    while out.rejected <= rule.max_samples:
        got = take(1)
        out.rejected += sum(1 for x in got if x is None)
        for x in got:
            if x is None:
                continue
            out.warmup += 1
            streak = streak + 1 if prev is not None and agree(x, prev, tolerance) else 0
            prev = x
        elapsed = time.perf_counter() - start
        if not warmup and out.warmup >= 1:
            out.steady = True
            break
        if out.warmup >= WARMUP_MIN and streak >= WARMUP_STREAK:
            out.steady = True
            break
        if out.warmup >= WARMUP_MAX or (out.warmup >= WARMUP_MIN and
                                        elapsed >= WARMUP_SHARE * budget_s):
            break
    while out.rejected <= rule.max_samples and \
            (more := rule.more(out.samples, time.perf_counter() - start, budget_s)) > 0:
        got = take(more)
        out.rejected += sum(1 for x in got if x is None)
        out.samples.extend(x for x in got if x is not None)
    return out


@dataclass
class Ledger:
    """What a benchmark's measurements did against the rules, said once at its end: those whose
    warm-up never settled and those whose budget ran out before the CI target."""

    benchmark: str
    unsteady: list[str] = field(default_factory=list)
    short: list[tuple[str, float, float]] = field(default_factory=list)  # label, CI %, target %

    def add(self, label: str, s: Sampled) -> None:
        if s.samples and not s.steady:
            self.unsteady.append(label)
        if s.samples and not s.target_met:
            self.short.append((label, s.ci_percent, 100 * s.target))

    def warnings(self) -> list[str]:
        out = []
        if self.unsteady:
            out.append(f"{self.benchmark}: {len(self.unsteady)} figure(s) measured before "
                       "successive warm-up samples agreed (the warm-up budget ran out): "
                       + ", ".join(self.unsteady[:4]) + (" ..." if len(self.unsteady) > 4 else "")
                       + "; a longer profile (--profile thorough) gives them more time")
        if self.short:
            worst = max(self.short, key=lambda t: t[1])
            out.append(f"{self.benchmark}: {len(self.short)} figure(s) stopped at the time budget "
                       f"before the CI target of ±{worst[2]:g} % (widest: {worst[0]} "
                       f"±{worst[1]:.1f} %); --profile thorough allows more samples")
        return out

    def findings(self) -> list[Finding]:
        return [Finding(self.benchmark, SAMPLING,
                        f"budget spent before the CI target: ±{ci:.1f} % > ±{target:g} %",
                        {"figure": label, "ci_percent": round(ci, 3),
                         "target_percent": target})
                for label, ci, target in self.short] + \
               [Finding(self.benchmark, SAMPLING,
                        "warm-up budget spent before successive samples agreed",
                        {"figure": label})
                for label in self.unsteady]
