"""The dslash family: Grid's Wilson and domain-wall Dslash on one node (the per-node table, the
comparison point under each definition, the robustness), every kernel variant checked against
the reference first. The halo exchange across ranks and Grid's comms policies are still to
come (issue 15)."""

from __future__ import annotations

from hpcprobe.families.dslash import bench, views
from hpcprobe.measure.family import Family

FAMILY = Family(
    "dslash", "Grid's Wilson and domain-wall Dslash per node, comparison point and robustness",
    bench.DslashOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=bench.METRICS, not_joined=frozenset({"cpus"}), views=(views.tables,),
    figures=(views.figures,))
