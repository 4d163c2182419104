"""The latency family: pointer-chase latency from L1 to DRAM with base and huge pages, latency
under streaming load, and core-to-core cache-line handoff."""

from __future__ import annotations

from hpcprobe.families.latency import bench, views
from hpcprobe.machine.sizing import LEVEL_VALUES, SIZE_VALUES
from hpcprobe.machine.smaps import PAGE_SIZE_VALUES
from hpcprobe.measure.family import (
    Default,
    Family,
    Headlines,
    Metrics,
    MetricSpec,
    Params,
    specs,
)

FAMILY = Family(
    "latency", "memory latency: pointer chase from L1 to DRAM, 4 KiB and huge pages",
    bench.LatencyOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics((*specs("ns", "lower", "latency", "loaded_latency", "core_to_core"),
                     MetricSpec("loaded_bandwidth", "GB/s")),
                    frozenset({"cpus", "huge_page_fraction", "load_cpus", "page_size"}),
                    params=(Params(("cpu_a", "cpu_b", "relation"), ("core_to_core",)),
                            Params(("size_bytes", "level", "page_size", "cpu_domain",
                                    "memory_domain", "load_threads"), ("latency",),
                                   {"size_bytes": SIZE_VALUES, "level": LEVEL_VALUES,
                                    "page_size": PAGE_SIZE_VALUES,
                                    "load_threads": {"type": "integer", "minimum": 0}}))),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Default(probe=True), Headlines(views.headlines)))
