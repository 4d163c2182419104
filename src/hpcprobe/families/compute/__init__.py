"""The compute family: peak FLOP/s per ISA and precision against a model of FLOPs per cycle at
the clock measured under the same load, and core scaling."""

from __future__ import annotations

from hpcprobe.families.compute import bench, views
from hpcprobe.measure.family import (
    COUNT,
    Ceilings,
    Check,
    Default,
    Family,
    Headlines,
    Metrics,
    MetricSpec,
    Params,
    per_watt_specs,
    specs,
)
from hpcprobe.native.peak import OPS, PRECISIONS
from hpcprobe.results.ceilings import Bound

FAMILY = Family(
    "compute", "peak FLOP/s per ISA and precision against a measured-clock model, core scaling",
    bench.ComputeOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics((*specs("GFLOP/s", "higher", "peak"),
                     # the model (FLOP/cycle x the measured clock) and the peak's share of it
                     MetricSpec("peak_model", "GFLOP/s", derived=True),
                     MetricSpec("peak_fraction", "%", derived=True),
                     *specs("GHz", "higher", "clock", "clock_after", "scaling_cur_freq"),
                     # the power a peak drew and the peak per watt, where RAPL is read
                     *per_watt_specs(("peak", "GFLOP/s"))),
                    frozenset({"cpus", "model_source", "microarch", "flops_per_cycle",
                               "clock_load", "clock_side"}),
                    params=(Params(("placement", "cpus")),
                            Params(("domains",), ("power", "peak_per_watt")),
                            Params(("isa", "precision", "op", "threads", "width_bits"),
                                   ("peak", "peak_model", "peak_fraction", "power",
                                    "peak_per_watt"),
                                   {"precision": {"enum": list(PRECISIONS)},
                                    "op": {"enum": list(OPS)}, "threads": COUNT}))),
    views=(views.tables,), capabilities=(Headlines(views.headlines), Default(probe=True),
                                   Check(bench.check_options),
                                   Ceilings((Bound("compute", "peak", views.ceiling),))))
