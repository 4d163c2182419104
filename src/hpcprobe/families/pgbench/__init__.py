"""pgbench, PostgreSQL's TPC-B-like benchmark (the OLTP workload of tuning studies), as a
family: a throwaway PostgreSQL server started by hpcprobe (or the user's, by URL), initialised
at a scale, then pgbench run --repeat times: transactions per second and average latency."""

from __future__ import annotations

from hpcprobe.families.pgbench import bench, views
from hpcprobe.measure.family import Family, Metrics, MetricSpec

FAMILY = Family(
    "pgbench", "OLTP with pgbench against a throwaway PostgreSQL: TPS and latency",
    bench.PgbenchOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    metrics=Metrics((MetricSpec("tps", "tx/s"), MetricSpec("latency", "ms", "lower"))),
    views=(views.tables,))
