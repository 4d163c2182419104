"""The dslash family: Grid's Wilson and domain-wall Dslash (the per-node table, the comparison
point under each definition, the robustness), in this process or across MPI ranks with the
halo exchange and both comms policies, every kernel variant (and policy) checked against the
reference first; Grid's a x + y memory table and halo table."""

from __future__ import annotations

from hpcprobe.families.dslash import bench, views
from hpcprobe.measure.family import Default, Family, Headlines, Metrics, Scaling, Sized

FAMILY = Family(
    "dslash", "Grid's Wilson and domain-wall Dslash per node, comparison point and robustness",
    bench.DslashOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics(bench.METRICS, frozenset({"cpus", "mpi"})), views=(views.tables,),
    figures=(views.figures,),
    capabilities=(Headlines(views.headlines), Default(), Scaling(("dslash", "comms_share"), vary=(
        "nodes", "ranks", "grid", "cpus", "mpi")),
    Sized(bench.scaled, bench.total_rate,
          "the Dslash rate (best kernel variant and comms policy)")))
