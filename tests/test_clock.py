"""The clock estimator on synthetic timings, and once for real."""

import os

import pytest

from hpcprobe import _native, clock


def test_pairs_cancel_the_fixed_overhead():
    # 1e6 adds take 0.25 ms at 4 GHz; every timing carries 10 us of overhead
    short = [0.00025 + 1e-5] * 3
    long = [0.0005 + 1e-5] * 3
    assert clock.ghz_from_pairs(short, long, 10**6, 2 * 10**6) == pytest.approx([4.0] * 3)


def test_disturbed_pairs_are_dropped():
    assert clock.ghz_from_pairs([0.002, 0.001], [0.001, 0.002], 10**6, 2 * 10**6) == \
        pytest.approx([1.0])


def test_real_clock_is_plausible():
    with _native.Team([min(os.sched_getaffinity(0))]) as team:
        ghz = clock.median_ghz(clock.measure_ghz(team, samples=5, iters=50_000))
    assert 0.2 < ghz < 10.0  # any CPU of this century; not a timing assertion
