"""Configurations against a baseline, per workload figure, and the recommendation each figure
gets: the ratio of medians with its bootstrap 95 % CI and the Mann-Whitney p-value (compare's
statistics), Holm-adjusted over the configurations of one figure; a difference is decided when
it is significant, or when its whole CI lies within the resolution (no difference of a size
that matters); a figure is decided when every configuration is. Pure: samples in, verdicts out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hpcprobe.common import stats

ALPHA = 0.05
#: Differences smaller than this (relative) are no difference.
RESOLUTION = 0.02


@dataclass(frozen=True)
class Figure:
    """The samples of one workload's figure under one configuration (pooled over rounds)."""

    workload: str
    figure: str  # "memory.bandwidth kernel=triad ..."
    unit: str
    better: str
    configuration: str
    samples: Sequence[float]


@dataclass(frozen=True)
class Row:
    workload: str
    figure: str
    unit: str
    better: str
    configuration: str
    baseline: str
    baseline_median: float
    median: float
    ratio: float
    low: float
    high: float
    p: float  # Holm-adjusted over the configurations of this figure
    n_baseline: int
    n: int
    resolution: float
    alpha: float

    @property
    def gain(self) -> float:
        """Relative improvement (positive: better), whichever direction is better."""
        return self.ratio - 1 if self.better == "higher" else 1 / self.ratio - 1

    @property
    def gain_ci(self) -> tuple[float, float]:
        if self.better == "higher":
            return self.low - 1, self.high - 1
        return 1 / self.high - 1, 1 / self.low - 1

    @property
    def verdict(self) -> str:
        """better, worse, ~ (no difference larger than the resolution), or undecided."""
        if self.p < self.alpha:
            return "better" if self.gain > 0 else "worse"
        lo, hi = self.gain_ci
        if -self.resolution <= lo and hi <= self.resolution:
            return "~"
        return "undecided"

    def text(self) -> str:
        lo, hi = self.gain_ci
        return (f"{self.gain:+.1%} [{lo:+.1%}, {hi:+.1%}], "
                + (f"p < {_p_bound(self.p)}" if self.p < self.alpha else f"p = {self.p:.2f}"))

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.gain_ci
        return {**asdict(self), "gain": self.gain, "gain_low": lo, "gain_high": hi,
                "verdict": self.verdict}


def _p_bound(p: float) -> str:
    return next(f"{b:g}" for b in (0.001, 0.01, 0.05, 1.0) if p < b)


@dataclass(frozen=True)
class Recommendation:
    workload: str
    figure: str
    choice: str  # the configuration recommended
    decided: bool
    text: str  # "for memory.bandwidth ...: thp-always (+13 % [+11, +15], p < 0.01)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def holm(ps: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = [1.0] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def rows(figures: Sequence[Figure], baseline: str, alpha: float = ALPHA,
         resolution: float = RESOLUTION) -> list[Row]:
    """Every configuration against the baseline, per (workload, figure) that the baseline has."""
    groups: dict[tuple[str, str], dict[str, Figure]] = {}
    for f in figures:
        groups.setdefault((f.workload, f.figure), {})[f.configuration] = f
    out = []
    for (workload, figure), by_config in groups.items():
        base = by_config.get(baseline)
        if base is None or not base.samples or statistics.median(base.samples) == 0:
            continue
        others = [f for c, f in by_config.items() if c != baseline and f.samples]
        ps = holm([stats.mann_whitney_p(base.samples, f.samples) for f in others])
        for f, p in zip(others, ps, strict=True):
            mb, mo = statistics.median(base.samples), statistics.median(f.samples)
            lo, hi = stats.median_ratio_ci(base.samples, f.samples)
            out.append(Row(workload, figure, f.unit, f.better, f.configuration, baseline, mb, mo,
                           mo / mb, lo, hi, p, len(base.samples), len(f.samples), resolution,
                           alpha))
    return out


def decided(rs: Sequence[Row]) -> bool:
    return all(r.verdict != "undecided" for r in rs)


def recommend(rs: Sequence[Row], baseline: str, rounds: int) -> list[Recommendation]:
    """Per (workload, figure): the configuration that is significantly better than the baseline
    by most, else the baseline (with why)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rs:
        groups.setdefault((r.workload, r.figure), []).append(r)
    out = []
    for (workload, figure), group in groups.items():
        what = f"for {workload} ({figure})"
        better = sorted((r for r in group if r.verdict == "better"), key=lambda r: -r.gain)
        open_ = [r for r in group if r.verdict == "undecided"]
        if better:
            best = better[0]
            also = [r.configuration for r in better[1:]]
            text = (f"{what}: {best.configuration} ({best.text()} against {baseline})"
                    + (f"; also better than {baseline}: {', '.join(also)}" if also else ""))
            out.append(Recommendation(workload, figure, best.configuration, True, text))
        elif not open_:
            worse = [r.configuration for r in group if r.verdict == "worse"]
            same = [r.configuration for r in group if r.verdict == "~"]
            why = "; ".join(x for x in (
                f"no detectable difference (~) with {', '.join(same)}" if same else "",
                f"{', '.join(worse)} worse" if worse else "") if x)
            out.append(Recommendation(workload, figure, baseline, True,
                                      f"{what}: {baseline}, the baseline ({why})"))
        else:
            lead = max(open_, key=lambda r: r.gain)
            out.append(Recommendation(
                workload, figure, baseline, False,
                f"{what}: not decided after {rounds} round(s): {lead.configuration} "
                f"{lead.text()} against {baseline}, a CI wider than ±{lead.resolution:.0%} "
                f"and not significant; keep {baseline}, or measure more rounds"))
    return out


def document(rs: Sequence[Row], recs: Sequence[Recommendation],
             extra: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison and its recommendations as one JSON document."""
    return {**extra, "decided": decided(rs), "recommendations": [r.to_dict() for r in recs],
            "rows": [r.to_dict() for r in rs]}
