"""Pure statistics: summaries, the confidence interval of the median, robust z-scores,
Mann-Whitney U, the CI of a ratio of medians, adaptive repetition. The standard library's
statistics and fractions are imported where used: a state-only check (in every job's prolog)
summarises nothing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple


class Summary(NamedTuple):
    """What every figure carries: n, min, median, mean, max and the 95 % CI of the median.
    A named tuple: made for every figure of every run a fleet's driver and report read (0.6 us
    each here, where a frozen dataclass took 1.3; a summary 1.6 us, where it took 3.0)."""

    n: int
    min: float
    median: float
    mean: float
    max: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, object]:
        return {"n": self.n, "min": self.min, "median": self.median, "mean": self.mean,
                "max": self.max, "ci95": [self.ci95[0], self.ci95[1]]}

    @property
    def rel_ci_halfwidth(self) -> float:
        """Half the CI width relative to the median (0.02 = +/-2 %)."""
        if self.median == 0:
            return math.inf
        return (self.ci95[1] - self.ci95[0]) / 2 / abs(self.median)


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based ranks (j, n-1-j) of the sorted samples that bound the CI of the median.

    Distribution-free: the count B of samples below the true median is Binomial(n, 1/2), and
    [x(j), x(n-1-j)] covers the median with probability 1 - 2 P(B <= j). We take the narrowest
    such interval reaching `confidence`; below n = 6 no interval reaches 95 % and the full range
    (coverage 1 - 2^(1-n)) is returned.
    """
    if n <= 0:
        raise ValueError("no samples")
    # P(B <= j) = sum of C(n, i) for i <= j, over 2^n: exact in integers (and no scipy import,
    # which costs half a second at start-up)
    from fractions import Fraction

    limit = Fraction((1.0 - confidence) / 2) * 2**n
    j, below = -1, 0
    for i in range(n):
        below += math.comb(n, i)
        if below > limit:
            break
        j = i
    j = max(j, 0)
    return j, n - 1 - j


def summarize(samples: Sequence[float], confidence: float = 0.95) -> Summary:
    """The samples' summary. The median and mean as `statistics.median` and `fmean` make them
    (the middle sample or the mean of the middle two; fsum over n), bit for bit, from the one
    sort (a fleet's report summarises 187,000 figures: 4 us each with those, 2 us so). Where
    their sums pass the largest float (samples near 1e308), those of halves and of each
    sample over n: finite samples have a finite summary (not infinity, not OverflowError)."""
    if not samples:
        raise ValueError("cannot summarise zero samples")
    xs = sorted(samples)
    n = len(xs)
    lo, hi = median_ci_ranks(n, confidence)
    half = n // 2
    median = xs[half] if n % 2 else _mid(xs[half - 1], xs[half])
    try:
        mean = math.fsum(xs) / n
    except OverflowError:  # an intermediate sum past the largest float: each sample scaled
        # by a power of two at most 1 / n (exact), their sum then cannot pass it; rounded,
        # the mean of n largest floats could, so it is kept to the samples' range
        scale = 2.0 ** n.bit_length()
        mean = min(max(math.fsum(x / scale for x in xs) / n * scale, xs[0]), xs[-1])
    return Summary(n, xs[0], median, mean, xs[-1], (xs[lo], xs[hi]))


def _mid(a: float, b: float) -> float:
    """The mean of two samples, as statistics.median takes it; halves first where the sum
    passes the largest float."""
    mid = (a + b) / 2
    return a / 2 + b / 2 if math.isinf(mid) and math.isfinite(a) and math.isfinite(b) else mid


def robust_z(samples: Sequence[float]) -> list[float]:
    """(x - median) / (1.4826 MAD) of each sample: a z-score that outliers cannot inflate
    (0 for every sample when the MAD is 0)."""
    import statistics

    med = statistics.median(samples)
    mad = 1.4826 * statistics.median(abs(x - med) for x in samples)
    return [0.0 if mad == 0 else (x - med) / mad for x in samples]


def outliers(samples: Sequence[float], z: float = 3.5, floor: float = 0.0) -> set[int]:
    """Indices of samples whose robust z-score exceeds `z` and that lie more than `floor`
    (relative) from the median: a tight distribution does not make ordinary jitter an outlier."""
    import statistics

    if len(samples) < 3:
        return set()
    med = statistics.median(samples)
    return {i for i, (x, zx) in enumerate(zip(samples, robust_z(samples), strict=True))
            if abs(zx) > z and abs(x - med) > floor * abs(med)}


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (1.0 where either side has fewer than 2 samples or all
    samples are equal: no evidence of a difference)."""
    from scipy.stats import mannwhitneyu

    if len(a) < 2 or len(b) < 2 or len(set(a) | set(b)) == 1:
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def median_ratio_ci(base: Sequence[float], other: Sequence[float], confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of median(other) / median(base), resampling each side on its own;
    deterministic for a seed. With fewer than 2 samples a side, or no spread at all, the
    interval is the point ratio."""
    import statistics
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    point = statistics.median(other) / statistics.median(base)
    if len(base) < 2 or len(other) < 2 or len(set(base)) == len(set(other)) == 1:
        return point, point

    def ratio(x: Any, y: Any, axis: int = -1) -> Any:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small samples: "degenerate" bootstrap distributions
        res = bootstrap((np.asarray(base, float), np.asarray(other, float)), ratio,
                        vectorized=True, paired=False, confidence_level=confidence,
                        n_resamples=resamples, method="percentile",
                        random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isnan(lo) or math.isnan(hi):
        return point, point
    return min(lo, point), max(hi, point)


@dataclass(frozen=True)
class Repetition:
    """When to stop repeating: the CI of the median within `target` of it, or the budget spent,
    never before `min_samples` nor after `max_samples`."""

    target: float = 0.02
    min_samples: int = 5
    max_samples: int = 50

    def more(self, samples: Sequence[float], elapsed_s: float, budget_s: float) -> int:
        """How many more samples to take now (0 = stop)."""
        n = len(samples)
        if n < self.min_samples:
            return self.min_samples - n
        if n >= self.max_samples or elapsed_s >= budget_s:
            return 0
        if summarize(samples).rel_ci_halfwidth <= self.target:
            return 0
        per_sample = elapsed_s / n if n else 0.0
        left = int((budget_s - elapsed_s) / per_sample) if per_sample > 0 else self.max_samples
        return max(0, min(self.max_samples - n, max(1, n // 2), left))
