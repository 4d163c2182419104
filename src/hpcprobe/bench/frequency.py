"""The frequency benchmark: the core clock with k = 1..N cores active, with the integer chain
alone and with each vector width's FMAs in flight, so turbo ratios and AVX downclocking show."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from .. import _native, clock, cpufreq, sampling
from .._native import Team
from ..cpulist import format_cpulist
from ..errors import UserError
from ..placement import active_counts
from ..placement import plan as place
from ..results import Metric
from ..topology import Topology
from .base import Benchmark, RunContext

#: Each point of the curve first runs its load this long, so the cores settle at its clock.
POINT_WARMUP_S = 0.05
#: Share of rejected samples above which a point gets a warning (a few disturbed samples are
#: normal on a shared machine; the estimator drops them).
REJECTED_WARN = 1 / 3


@dataclass(frozen=True)
class FrequencyOptions:
    """Options that narrow `hpcprobe run frequency`."""

    threads: tuple[int, ...] | None = None
    placement: str | None = None
    loads: tuple[str, ...] | None = None  # ISA names; None: the chain alone and every vector ISA


def default_loads() -> list[str]:
    """The chain alone ('scalar'), then with each vector ISA this CPU runs."""
    return _native.supported_isas()


def curve(topo: Topology, placement: str | None, threads: tuple[int, ...] | None,
          max_points: int | None, what: str = "the clock") -> tuple[str, tuple[int, ...],
                                                                    list[int]]:
    """(placement, its CPUs in order, active-core counts) of a curve over active cores. The
    clock of a core is only its own with one thread per core: no oversubscription."""
    name = placement or "one-per-core"
    cores = place(topo, name).cpus
    counts = sorted(set(threads)) if threads else active_counts(len(cores), max_points)
    for k in counts:
        if k < 1:
            raise UserError(f"--threads {k}: the thread count must be at least 1")
        if k > len(cores):
            raise UserError(f"--threads {k}: {what} needs one thread per CPU and placement {name} "
                            f"yields {len(cores)} CPU(s) here; use --threads 1..{len(cores)}")
    return name, cores, counts


def clock_point(ctx: RunContext, team: Team, load: str, cpus: tuple[int, ...], placement: str,
                budget_s: float, benchmark: str = "frequency") -> Metric | None:
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


def run(ctx: RunContext, opts: FrequencyOptions | None) -> None:
    opts = opts or FrequencyOptions()
    name, cores, counts = curve(ctx.topo, opts.placement, opts.threads,
                                ctx.profile.curve_points)
    loads = list(opts.loads or default_loads())
    policy = cpufreq.policy(cores[0])
    if policy is not None:
        ctx.findings.append({"benchmark": "frequency", "kind": "cpufreq", **policy.to_dict(),
                             "message": f"cpufreq on CPU {cores[0]}: driver {policy.driver}, "
                                        f"governor {policy.governor}, {policy.min_ghz}-"
                                        f"{policy.max_ghz} GHz"})
    points = [(load, k) for load in loads for k in counts]
    ctx.progress.start("frequency", len(points))
    with Team(cores) as team:
        team.select(cores[:counts[0]])
        clock.warm_up(team, loads[0])
        deadline = time.perf_counter() + ctx.profile.frequency_budget_s
        for i, (load, k) in enumerate(points):
            budget = max(0.0, deadline - time.perf_counter()) / (len(points) - i)
            clock_point(ctx, team, load, cores[:k], name, budget)
            ctx.progress.advance(f"clock {load} load, {k} active")


BENCHMARK = Benchmark("frequency", "core clock against active cores, integer and vector loads",
                      run)
