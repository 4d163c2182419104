"""The latency family: pointer-chase latency from L1 to DRAM with base and huge pages, latency
under streaming load, and core-to-core cache-line handoff."""

from __future__ import annotations

from hpcprobe.families.latency import bench, views
from hpcprobe.measure.family import Default, Family, Headlines, Metrics, MetricSpec, specs

FAMILY = Family(
    "latency", "memory latency: pointer chase from L1 to DRAM, 4 KiB and huge pages",
    bench.LatencyOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics((*specs("ns", "lower", "latency", "loaded_latency", "core_to_core"),
                     MetricSpec("loaded_bandwidth", "GB/s")),
                    frozenset({"cpus", "huge_page_fraction", "load_cpus", "page_size"})),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Default(probe=True), Headlines(views.headlines)))
