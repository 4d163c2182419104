"""The clock estimator on synthetic timings (overhead, wrong results, migration, outliers), and
the chain for real under each load this CPU runs."""

import os

import pytest

from hpcprobe import _native, clock
from hpcprobe.clock import Timing

SHORT, LONG = 10**6, 2 * 10**6


def at(ghz, overhead=1e-5, migrated=False):
    """The timing pair of a core at `ghz`, with a fixed overhead per timing."""
    return Timing(SHORT / ghz / 1e9 + overhead, LONG / ghz / 1e9 + overhead, migrated)


def test_pairs_cancel_the_fixed_overhead():
    est = clock.estimate([at(4.0, overhead=o) for o in (1e-5, 5e-5, 1e-4)], SHORT, LONG)
    assert est.ghz == pytest.approx([4.0] * 3)
    assert est.rejected == 0


def test_wrong_results_are_rejected():
    est = clock.estimate([at(4.0), Timing(-1.0, 0.0005), at(4.0)], SHORT, LONG)
    assert (len(est.ghz), est.wrong) == (2, 1)


def test_migrated_samples_are_rejected():
    est = clock.estimate([at(4.0), at(2.0, migrated=True), at(4.0)], SHORT, LONG)
    assert est.ghz == pytest.approx([4.0, 4.0])
    assert est.migrated == 1


def test_pairs_without_a_positive_difference_are_disturbed():
    est = clock.estimate([Timing(0.002, 0.001), at(3.0)], SHORT, LONG)
    assert est.ghz == pytest.approx([3.0])
    assert est.disturbed == 1


def test_outliers_are_rejected_but_jitter_is_not():
    pairs = [at(g) for g in (3.50, 3.51, 3.49, 3.50, 3.52, 3.48, 3.50)] + [at(2.1)]
    est = clock.estimate(pairs, SHORT, LONG)
    assert est.outliers == 1
    assert min(est.ghz) == pytest.approx(3.48)
    # a tight distribution does not turn 1 % of jitter into outliers
    tight = [at(3.5)] * 7 + [at(3.5 * 1.01)]
    assert clock.estimate(tight, SHORT, LONG).outliers == 0


def test_estimate_of_nothing_is_empty():
    est = clock.estimate([], SHORT, LONG)
    assert est.ghz == [] and est.rejected == 0


@pytest.mark.parametrize("load", _native.supported_isas())
def test_real_clock_is_plausible(load):
    with _native.Team([min(os.sched_getaffinity(0))]) as team:
        est = clock.measure(team, load, pairs=5, iters=20_000, warmup_s=0.05)
    assert 0.2 < est.median < 10.0  # any CPU of this century; not a timing assertion

