"""The numa family: latency and read bandwidth from each NUMA domain's cores to memory bound to
each domain."""

from __future__ import annotations

from hpcprobe.families.numa import bench, views
from hpcprobe.measure.family import Default, Family, Metrics, MetricSpec

FAMILY = Family(
    "numa", "NUMA latency and bandwidth matrices (memory bound with mbind)", bench.NumaOptions,
    bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics((MetricSpec("latency", "ns", "lower"), MetricSpec("bandwidth", "GB/s")),
                    frozenset({"cpus", "memory_domain_seen", "huge_page_fraction", "page_size"})),
    views=(views.tables,), figures=(views.figures,), capabilities=(Default(probe=True),))
