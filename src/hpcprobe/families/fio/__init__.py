"""fio, the I/O tester the field uses, as a family: a job built from the options (or the user's
job file) run --repeat times with `--output-format=json`; per job and direction its IOPS,
bandwidth and completion-latency percentiles, each repetition one sample."""

from __future__ import annotations

from hpcprobe.families.fio import bench, views
from hpcprobe.measure.family import Family, Metrics, MetricSpec

FAMILY = Family(
    "fio", "storage I/O with fio: IOPS, bandwidth, completion-latency percentiles per job",
    bench.FioOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    metrics=Metrics((MetricSpec("iops", "IOPS"), MetricSpec("bandwidth", "MB/s"),
                     MetricSpec("clat", "us", "lower"))),
    views=(views.tables,))
