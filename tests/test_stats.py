"""Pure statistics."""

import math
import statistics

import pytest
from hypothesis import example, given
from hypothesis.strategies import floats, integers, lists, one_of

from hpcprobe.common.stats import Repetition, median_ci_ranks, summarize


def test_summary_values():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.min, s.median, s.mean, s.max) == (5, 1.0, 3.0, 3.0, 5.0)
    assert s.ci95 == (1.0, 5.0)  # n < 6: the full range


@pytest.mark.parametrize("n,ranks", [(6, (0, 5)), (10, (1, 8)), (20, (5, 14)), (100, (39, 60))])
def test_median_ci_ranks_match_binomial_tables(n, ranks):
    assert median_ci_ranks(n) == ranks


def test_ci_contains_median_and_narrows():
    wide = summarize([10.0 + (i % 7) for i in range(10)])
    narrow = summarize([10.0 + (i % 7) for i in range(200)])
    assert wide.ci95[0] <= wide.median <= wide.ci95[1]
    assert narrow.rel_ci_halfwidth <= wide.rel_ci_halfwidth


def test_empty():
    with pytest.raises(ValueError):
        summarize([])


def test_repetition_rules():
    r = Repetition(target=0.02, min_samples=5, max_samples=20)
    assert r.more([], 0.0, 10.0) == 5
    assert r.more([1.0] * 5, 0.1, 10.0) == 0  # CI of zero width
    noisy = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert r.more(noisy, 0.1, 10.0) > 0
    assert r.more(noisy, 11.0, 10.0) == 0  # budget spent
    assert r.more([float(i) for i in range(20)], 0.1, 10.0) == 0  # max reached
    assert math.isinf(summarize([0.0, 0.0]).rel_ci_halfwidth)


def test_robust_z_ignores_the_outlier_it_scores():
    from hpcprobe.common.stats import outliers, robust_z

    xs = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 50.0]
    z = robust_z(xs)
    assert z[-1] > 100 and max(abs(v) for v in z[:-1]) < 2
    assert outliers(xs) == {6}
    assert outliers([1.0, 1.0, 1.0, 1.0]) == set()  # MAD 0: nobody is an outlier
    assert outliers([10.0, 10.1, 9.9, 10.0, 10.5], z=3.5, floor=0.1) == set()


@given(lists(one_of(floats(allow_nan=False), integers(-10**6, 10**6)), min_size=1, max_size=30))
@example([8.988465674311579e+307, 8.98846567431158e+307])
@example([1e308, 1.5e308, -1e308, 1.7e308])
@example([1.7976931348623157e+308] * 3)
@example([math.inf, -math.inf, 1.0])
@example([8.988465674311579e+307, 8.98846567431158e+307, math.inf])  # found by the suite
@example([1e308, 1e308, math.inf, -math.inf])
def test_a_summarys_median_and_mean_are_the_standard_librarys(xs):
    """From one sort, bit for bit what statistics.median and fmean make (infinities too), and
    the same error where fmean's sum fails on infinities (inf - inf); finite samples have a
    finite median and mean, between the least and the largest, where those sums pass the
    largest float (statistics: infinity, OverflowError); where fmean's sum overflows before it
    meets an infinity (OverflowError), the mean is that infinity (inf - inf: ValueError)."""
    finite = all(math.isfinite(x) for x in xs)
    infinities = {x for x in xs if math.isinf(x)}
    try:
        theirs = (statistics.median(xs), statistics.fmean(xs))
    except OverflowError:
        if len(infinities) == 2:
            with pytest.raises(ValueError):
                summarize(xs)
            return
        theirs = (statistics.median(xs), infinities.pop() if infinities else math.inf)
    except ValueError as exc:
        with pytest.raises(type(exc)):
            summarize(xs)
        return
    s = summarize(xs)
    if finite and not all(map(math.isfinite, theirs)):  # theirs overflowed: not compared
        assert min(xs) <= s.median <= max(xs) and min(xs) <= s.mean <= max(xs)
        return
    for mine, their in zip((s.median, s.mean), theirs, strict=True):
        assert mine == their or (math.isnan(mine) and math.isnan(their))
        assert math.copysign(1, mine) == math.copysign(1, their)
