"""The clock estimator on synthetic timings (overhead, interrupts, wrong results, migration), and
the chain for real under each load this CPU runs."""

import os
import statistics

import pytest

from hpcprobe import native
from hpcprobe.machine import clock
from hpcprobe.machine.clock import Timing

SHORT, LONG = 10**6, 2 * 10**6


def at(ghz, overhead=1e-5, migrated=False):
    """The timing pair of a core at `ghz`, with a fixed overhead per timing."""
    return Timing(SHORT / ghz / 1e9 + overhead, LONG / ghz / 1e9 + overhead, migrated)


def test_a_block_cancels_the_fixed_overhead():
    assert clock.block_ghz([at(4.0, overhead=o) for o in (1e-5, 5e-5, 1e-4)], SHORT, LONG) == \
        pytest.approx(4.0)


def test_an_interrupt_in_one_timing_does_not_move_the_sample():
    # a stolen time slice adds time to one chain only; the minima are the undisturbed timings
    hit_long = Timing(SHORT / 4e9, LONG / 4e9 + 3e-4)
    hit_short = Timing(SHORT / 4e9 + 2e-4, LONG / 4e9)
    assert clock.block_ghz([at(4.0, overhead=0), hit_long, hit_short], SHORT, LONG) == \
        pytest.approx(4.0)


def test_wrong_and_migrated_pairs_are_left_out_and_too_few_rejects_the_sample():
    assert clock.block_ghz([at(4.0), Timing(-1.0, 0.0005), at(4.0)], SHORT, LONG) == \
        pytest.approx(4.0)
    assert clock.block_ghz([at(4.0), at(2.0, migrated=True), at(4.0)], SHORT, LONG) == \
        pytest.approx(4.0)
    assert clock.block_ghz([at(4.0), at(2.0, migrated=True), Timing(-1.0, 1.0)], SHORT,
                           LONG) is None
    assert clock.block_ghz([], SHORT, LONG) is None


def test_a_block_without_a_positive_difference_is_rejected():
    assert clock.block_ghz([Timing(0.002, 0.001), Timing(0.002, 0.0015)], SHORT, LONG) is None


@pytest.mark.parametrize("load", native.supported_isas())
def test_real_clock_is_plausible(load):
    with native.Team([min(os.sched_getaffinity(0))]) as team:
        ghz = clock.measure(team, load, n=5, iters=20_000, warmup_s=0.05)
    assert 0.2 < statistics.median(ghz) < 10.0  # any CPU of this century; not a timing check

