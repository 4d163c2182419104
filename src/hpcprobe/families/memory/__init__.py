"""The memory family: bandwidth of the streaming kernels over a working-set sweep from L1 to
DRAM and the STREAM ladder over thread counts, ordinary and non-temporal stores."""

from __future__ import annotations

from hpcprobe.families.memory import bench, views
from hpcprobe.machine.sizing import LEVEL_VALUES, SIZE_VALUES
from hpcprobe.measure.family import (
    COUNT,
    TEXT,
    Check,
    Default,
    Family,
    Headlines,
    Metrics,
    Params,
    per_watt_specs,
    specs,
)
from hpcprobe.native import STORES
from hpcprobe.native.kernels import KERNELS

FAMILY = Family(
    "memory", "memory bandwidth: cache sweep and DRAM STREAM", bench.MemoryOptions, bench.run,
    settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics((*specs("GB/s", "higher", "bandwidth"),
                     # the same traffic counted with the write-allocate reads
                     *specs("GB/s", "higher", "bandwidth_write_allocate", derived=True),
                     # the power a DRAM figure drew and the figure per watt, where RAPL is read
                     *per_watt_specs(("bandwidth", "GB/s"))),
                    frozenset({"cpus", "binding"}),
                    params=(Params(("kernel", "threads", "placement", "size_bytes", "level",
                                    "stores", "isa", "cpus"),
                                   values={"kernel": {"enum": list(KERNELS)}, "threads": COUNT,
                                           "placement": TEXT, "size_bytes": SIZE_VALUES,
                                           "level": LEVEL_VALUES,
                                           "stores": {"enum": list(STORES)},
                                           "isa": TEXT, "cpus": TEXT}),
                            Params(("domains",), ("power", "bandwidth_per_watt")))),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Default(probe=True), Headlines(views.headlines), Check(bench.check_options)))
