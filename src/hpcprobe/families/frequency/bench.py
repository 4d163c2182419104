"""The frequency benchmark: the core clock with k = 1..N cores active, with the integer chain
alone and with each vector width's FMAs in flight, so turbo ratios and AVX downclocking show."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.machine import clock, cpufreq
from hpcprobe.machine.placement import curve, plan
from hpcprobe.measure import options
from hpcprobe.measure.family import RunContext, option
from hpcprobe.native import Team
from hpcprobe.probes.clock import clock_point
from hpcprobe.results.findings import Finding, kind

CPUFREQ = kind("cpufreq", "the cpufreq driver, governor and range of the CPUs measured",
               "note", "the frequency table", code="HP208", action="none")


@dataclass(frozen=True)
class Settings:
    """What a profile gives the frequency family."""

    budget_s: float  # the clock curve under each load, after its warm-up


SETTINGS = {"quick": Settings(1.0), "default": Settings(2.5), "thorough": Settings(30.0),
            "check": Settings(0.3)}


@dataclass(frozen=True)
class FrequencyOptions:
    """Options that narrow `hpcprobe run frequency`."""

    threads: tuple[int, ...] | None = option(options.THREADS)
    placement: str | None = option(options.PLACEMENT, note="the order of their cores")
    loads: tuple[str, ...] | None = None  # ISA names; None: the chain alone and every vector ISA


def check_options(ctx: RunContext) -> FrequencyOptions:
    """The health tier's measurement: the clock of every core under the ISA run's FMAs."""
    cores = len(plan(ctx.topo, "one-per-core").cpus)
    return FrequencyOptions(threads=(cores,), loads=(ctx.isa,))


def default_loads() -> list[str]:
    """The chain alone ('scalar'), then with each vector ISA this CPU runs."""
    return native.supported_isas()


def points(ctx: RunContext, opts: FrequencyOptions
           ) -> tuple[str, tuple[int, ...], list[tuple[str, int]]]:
    """(placement, its cores, (load, active cores) of every point of the curves)."""
    name, cores, counts = curve(ctx.topo, opts.placement, opts.threads,
                                ctx.profile.curve_points)
    loads = list(opts.loads or ((ctx.isa,) if ctx.isa_asked else default_loads()))
    return name, cores, [(load, k) for load in loads for k in counts]


def labels(ctx: RunContext, opts: FrequencyOptions | None) -> list[str]:
    """Each point of the clock curves."""
    return [f"clock {load} load, {k} active core(s)"
            for load, k in points(ctx, opts or FrequencyOptions())[2]]


def run(ctx: RunContext, opts: FrequencyOptions | None) -> None:
    opts = opts or FrequencyOptions()
    name, cores, todo = points(ctx, opts)
    policy = cpufreq.policy(cores[0])
    if policy is not None:
        ctx.find(Finding("frequency", CPUFREQ,
                         f"cpufreq on CPU {cores[0]}: driver {policy.driver}, governor "
                         f"{policy.governor}, {policy.min_ghz}-{policy.max_ghz} GHz",
                         policy.to_dict()))
    ctx.progress.start("frequency", len(todo))
    with Team(cores) as team:
        team.select(cores[:todo[0][1]])
        clock.warm_up(team, todo[0][0])
        deadline = time.perf_counter() + SETTINGS[ctx.profile.name].budget_s
        for i, (load, k) in enumerate(todo):
            budget = max(0.0, deadline - time.perf_counter()) / (len(todo) - i)
            clock_point(ctx, team, load, cores[:k], name, budget, "frequency")
            ctx.progress.advance(f"clock {load} load, {k} active")
