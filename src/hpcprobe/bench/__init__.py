"""Benchmarks by name: each is a module with `run(ctx, options)` registered here."""

from __future__ import annotations

from . import compute, frequency, latency, memory, mpi, numa
from .base import Benchmark

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
