"""Benchmarks by name: each is a module with `run(ctx, options)` registered here."""

from __future__ import annotations

from hpcprobe.families.compute import bench as compute
from hpcprobe.families.frequency import bench as frequency
from hpcprobe.families.latency import bench as latency
from hpcprobe.families.memory import bench as memory
from hpcprobe.families.mpi import bench as mpi
from hpcprobe.families.numa import bench as numa
from hpcprobe.measure.family import Benchmark

#: Registered benchmarks, in the order `hpcprobe run` runs them.
BENCHMARKS: dict[str, Benchmark] = {
    "memory": memory.BENCHMARK,
    "latency": latency.BENCHMARK,
    "numa": numa.BENCHMARK,
    "frequency": frequency.BENCHMARK,
    "compute": compute.BENCHMARK,
    "mpi": mpi.BENCHMARK,
}

__all__ = ["BENCHMARKS", "Benchmark"]
