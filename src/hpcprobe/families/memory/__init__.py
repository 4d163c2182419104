"""The memory family: bandwidth of the streaming kernels over a working-set sweep from L1 to
DRAM and the STREAM ladder over thread counts, ordinary and non-temporal stores."""

from __future__ import annotations

from hpcprobe.families.memory import bench, views
from hpcprobe.measure.family import Family, specs

FAMILY = Family(
    "memory", "memory bandwidth: cache sweep and DRAM STREAM", bench.MemoryOptions, bench.run,
    settings=bench.SETTINGS, plan=bench.labels,
    metrics=specs("GB/s", "higher", "bandwidth", "bandwidth_write_allocate"),
    not_joined=frozenset({"cpus", "binding"}),
    views=(views.tables,), figures=(views.figures,))
