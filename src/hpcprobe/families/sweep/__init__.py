"""Tuning sweeps (`hpcprobe sweep FILE`): each workload figure under every configuration,
samples pooled over the interleaved rounds, against the baseline, and the recommendation per
figure (it measures nothing itself: tuning/sweep.py runs the workloads)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.families.sweep import views
from hpcprobe.measure.family import Family


@dataclass(frozen=True)
class NoOptions:
    """The sweep summary takes no options of its own (the sweep file has them)."""


FAMILY = Family(
    "sweep", "configurations against a baseline per workload, and a recommendation each",
    NoOptions, None, open_metrics="", not_joined=frozenset({"figure"}),
    views=(views.tables,), figures=(views.figures,))
