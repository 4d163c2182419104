"""Scaling studies (`hpcprobe scale`): the total rate of a family at each rank count, weak and
strong, with the speedup against the first count, the parallel efficiency and the ideal line
(it measures nothing itself: measure/scaling.py runs the family)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.families.scale import views
from hpcprobe.measure.family import Family, MetricSpec


@dataclass(frozen=True)
class NoOptions:
    """The scaling summary takes no options of its own (`hpcprobe scale` has them)."""


FAMILY = Family(
    "scale", "speedup and parallel efficiency of a family across rank counts",
    NoOptions, None, metrics=(MetricSpec("rate", "GFLOP/s"), MetricSpec("rate", "GB/s")),
    not_joined=frozenset({"run", "base_ranks"}), views=(views.tables,), figures=(views.figures,))
