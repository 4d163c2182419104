"""The roofline: compute and bandwidth ceilings and ridge points, derived from the memory and
compute families' figures (it measures nothing)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.families.roofline import derive, views
from hpcprobe.measure.family import Ceilings, Derives, Family, Metrics, MetricSpec, Params
from hpcprobe.results.ceilings import Bound


@dataclass(frozen=True)
class NoOptions:
    """The roofline takes no options."""


FAMILY = Family(
    "roofline", "ceilings and ridge points derived from the compute and memory figures",
    NoOptions, None,
    metrics=Metrics((MetricSpec("compute_ceiling", "GFLOP/s"),
                     MetricSpec("bandwidth_ceiling", "GB/s"), MetricSpec("ridge_point", "FLOP/B"),
                     MetricSpec("port_ceiling", "GB/s")),
                    frozenset({"cpus", "bytes_per_cycle", "source", "size_bytes"}),
                    params=(Params(("threads",)),)),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Derives(derive.derive),
                  Ceilings((Bound("memory", "bandwidth", derive.port_ceiling),))))
