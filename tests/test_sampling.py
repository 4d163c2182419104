"""The sampling driver on synthetic sample streams: warm-up until successive samples agree,
the CI target, the budget, rejected samples, and what the ledger says."""

from __future__ import annotations

from collections.abc import Iterator

from hpcprobe.common.stats import Repetition
from hpcprobe.measure.sampling import Ledger, Take, sample


def stream(values: list[float | None], then: float | None = None) -> Take:
    """take() over a fixed sequence of samples, then `then` forever."""
    it: Iterator[float | None] = iter(values)
    return lambda n: [next(it, then) for _ in range(n)]


def test_warm_up_drops_a_ramp_until_successive_samples_agree():
    # a ring filling a cache: 85, 62, 35, 24 ns, then steady at 20
    take = stream([85.0, 62.0, 35.0, 24.0, 20.0, 20.1, 20.0], then=20.0)
    got = sample(take, Repetition(0.02, 5, 20), budget_s=10.0)
    assert got.steady and got.warmup == 7
    assert got.samples and max(got.samples) <= 20.1
    assert got.target_met


def test_without_warm_up_only_the_first_sample_is_dropped():
    take = stream([85.0], then=20.0)
    got = sample(take, Repetition(0.02, 5, 20), budget_s=10.0, warmup=False)
    assert got.warmup == 1 and got.samples == [20.0] * 5


def test_a_warm_up_that_never_settles_stops_at_its_budget_and_says_so():
    import itertools

    ramp = itertools.count(100.0, -7.0)  # never two samples within 3 %

    def take(n: int) -> list[float | None]:
        return [float(next(ramp)) for _ in range(n)]

    got = sample(take, Repetition(0.02, 3, 10), budget_s=0.0)
    assert not got.steady and len(got.samples) == 3
    ledger = Ledger("latency")
    ledger.add("4 MiB default pages", got)
    warnings = ledger.warnings()
    assert any("before successive warm-up samples agreed" in w for w in warnings)
    assert any(f.to_dict()["kind"] == "sampling" for f in ledger.findings())


def test_noisy_samples_stop_at_the_budget_and_the_ledger_says_so():
    import random

    rng = random.Random(1)

    def take(n: int) -> list[float | None]:
        return [100.0 + rng.uniform(-20, 20) for _ in range(n)]

    got = sample(take, Repetition(0.001, 5, 8), budget_s=10.0, warmup=False)
    assert len(got.samples) == 8 and not got.target_met
    ledger = Ledger("memory")
    ledger.add("triad 2T", got)
    assert any("stopped at the time budget before the CI target" in w and "triad 2T" in w
               for w in ledger.warnings())


def test_rejected_samples_do_not_count_and_a_hopeless_measurement_stops():
    take = stream([None, 5.0, None, 5.0, 5.0, 5.0], then=5.0)
    got = sample(take, Repetition(0.02, 3, 10), budget_s=10.0)
    assert got.rejected == 2 and got.samples == [5.0] * 3
    never = stream([], then=None)
    got = sample(never, Repetition(0.02, 3, 10), budget_s=10.0)
    assert got.samples == [] and got.rejected == 11
