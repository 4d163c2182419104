"""Run profiles: how much time and how many samples each benchmark may spend."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.common.errors import UserError
from hpcprobe.common.stats import Repetition


@dataclass(frozen=True)
class Profile:
    """Budgets and sampling rules of one run profile."""

    name: str
    description: str
    memory_budget_s: float  # the whole memory benchmark, allocation included
    latency_budget_s: float  # the whole latency benchmark
    loaded_latency: bool  # measure latency under streaming load (needs DRAM-sized arrays)
    huge_page_sweep: bool  # repeat the latency sweep with transparent huge pages
    numa_on_one_node: bool  # run the NUMA matrix (1x1) even where there is one NUMA domain
    compute_budget_s: float  # peak FLOPs of every kernel and the core-scaling curve
    frequency_budget_s: float  # the clock curve under each load, after its warm-up
    curve_points: int | None  # most active-core counts in a clock or scaling curve (None: all)
    repetition: Repetition
    sample_s: float  # shortest timed sample for cache-resident sizes
    sweep_points_per_octave: int
    sweep_kernels: tuple[str, ...]
    stream_stores: tuple[str, ...]


PROFILES: dict[str, Profile] = {
    p.name: p for p in (
        Profile("quick", "a first look: triad sweep, STREAM with ordinary stores, latency with "
                "default pages, few samples",
                memory_budget_s=8.0, latency_budget_s=3.0, loaded_latency=False,
                huge_page_sweep=False, numa_on_one_node=False,
                compute_budget_s=2.5, frequency_budget_s=1.0, curve_points=8,
                repetition=Repetition(0.02, 3, 10), sample_s=0.001,
                sweep_points_per_octave=1, sweep_kernels=("triad",),
                stream_stores=("regular",)),
        Profile("default", "sweep L1 to DRAM, STREAM ladder, CI target 2 %, 14 s memory budget",
                memory_budget_s=14.0, latency_budget_s=3.0, loaded_latency=True,
                huge_page_sweep=True, numa_on_one_node=True,
                compute_budget_s=5.0, frequency_budget_s=2.5, curve_points=16,
                repetition=Repetition(0.02, 5, 30), sample_s=0.002,
                sweep_points_per_octave=1, sweep_kernels=("triad", "load"),
                stream_stores=("regular", "nt")),
        Profile("thorough", "dense sweep, more samples, for reference measurements",
                memory_budget_s=180.0, latency_budget_s=60.0, loaded_latency=True,
                huge_page_sweep=True, numa_on_one_node=True,
                compute_budget_s=60.0, frequency_budget_s=30.0, curve_points=None,
                repetition=Repetition(0.01, 10, 100), sample_s=0.01,
                sweep_points_per_octave=2, sweep_kernels=("triad", "load", "copy", "store"),
                stream_stores=("regular", "nt")),
    )
}


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UserError(f"--profile {name!r} is unknown; profiles: {', '.join(PROFILES)}") from None
