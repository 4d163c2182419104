"""The core clock under a load, as a sampled figure (shared by the families that need it:
frequency for its curve, compute for its model)."""

from __future__ import annotations

import math

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.machine import clock, cpufreq
from hpcprobe.measure import sampling
from hpcprobe.measure.family import RunContext
from hpcprobe.native import Team
from hpcprobe.results.model import Metric

#: Each point of the curve first runs its load this long, so the cores settle at its clock.
POINT_WARMUP_S = 0.05


#: Share of rejected samples above which a point gets a warning (a few disturbed samples are
#: normal on a shared machine; the estimator drops them).
REJECTED_WARN = 1 / 3


def clock_point(ctx: RunContext, team: Team, load: str, cpus: tuple[int, ...], placement: str,
                budget_s: float, benchmark: str) -> Metric | None:
    """The clock of `cpus` all running the chain under `load`, in the steady state: samples
    pooled over the threads (each from a block of short/long pairs); scaling_cur_freq read
    during the samples where cpufreq exists."""
    team.select(cpus)
    clock.warm_up(team, load, POINT_WARMUP_S)
    readings: list[float] = []

    def take(n: int) -> list[float | None]:
        with cpufreq.CurrentSampler(cpus, delay_s=0.001) as cur:
            got = clock.samples(team, load, math.ceil(n / len(cpus)))
        readings.extend(cur.readings)
        return got

    label = f"clock {load} load, {len(cpus)} active core(s)"
    sampled = sampling.sample(take, ctx.profile.repetition, budget_s)
    ghz = ctx.record(benchmark, label, sampled)
    taken = sampled.rejected + sampled.warmup + len(ghz)
    if not ghz:
        ctx.errors.append(f"{benchmark}: {label}: every sample was rejected (wrong results, "
                          "migrated threads or disturbed timings); no figure")
        return None
    if sampled.rejected > REJECTED_WARN * taken:
        ctx.warnings.append(f"{benchmark}: {label}: {sampled.rejected} of {taken} samples "
                            "rejected (migrated threads or disturbed timings); is the machine "
                            "busy?")
    params = {"load": load, "active_cores": len(cpus), "placement": placement,
              "cpus": format_cpulist(cpus)}
    out = Metric(benchmark, "clock", "GHz", params, ghz)
    ctx.metrics.append(out)
    if readings:
        ctx.metrics.append(Metric(benchmark, "scaling_cur_freq", "GHz", dict(params), readings))
    return out
