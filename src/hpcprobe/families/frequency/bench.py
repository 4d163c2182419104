"""The frequency benchmark: the core clock with k = 1..N cores active, with the integer chain
alone and with each vector width's FMAs in flight, so turbo ratios and AVX downclocking show."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.machine import clock, cpufreq
from hpcprobe.machine.placement import curve
from hpcprobe.measure import options
from hpcprobe.measure.family import RunContext, option
from hpcprobe.native import Team
from hpcprobe.probes.clock import clock_point


@dataclass(frozen=True)
class Settings:
    """What a profile gives the frequency family."""

    budget_s: float  # the clock curve under each load, after its warm-up


SETTINGS = {"quick": Settings(1.0), "default": Settings(2.5), "thorough": Settings(30.0)}


@dataclass(frozen=True)
class FrequencyOptions:
    """Options that narrow `hpcprobe run frequency`."""

    threads: tuple[int, ...] | None = option(options.THREADS)
    placement: str | None = option(options.PLACEMENT)
    loads: tuple[str, ...] | None = None  # ISA names; None: the chain alone and every vector ISA


def default_loads() -> list[str]:
    """The chain alone ('scalar'), then with each vector ISA this CPU runs."""
    return native.supported_isas()






def run(ctx: RunContext, opts: FrequencyOptions | None) -> None:
    opts = opts or FrequencyOptions()
    name, cores, counts = curve(ctx.topo, opts.placement, opts.threads,
                                ctx.profile.curve_points)
    loads = list(opts.loads or ((ctx.isa,) if ctx.isa_asked else default_loads()))
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
        deadline = time.perf_counter() + SETTINGS[ctx.profile.name].budget_s
        for i, (load, k) in enumerate(points):
            budget = max(0.0, deadline - time.perf_counter()) / (len(points) - i)
            clock_point(ctx, team, load, cores[:k], name, budget)
            ctx.progress.advance(f"clock {load} load, {k} active")
