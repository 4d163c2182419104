"""The cg family: an HPCG-shaped conjugate gradient proxy on one node (27-point stencil, CG with
its dot products and vector updates), checked against a reference CG, with its bandwidth
against the STREAM triad. Multi-rank halo exchange and scaling are still to come (issue 15)."""

from __future__ import annotations

from hpcprobe.families.cg import bench, views
from hpcprobe.measure.family import Family

FAMILY = Family(
    "cg", "HPCG-shaped CG proxy: GFLOP/s, phase shares, bandwidth against STREAM triad",
    bench.CgOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=bench.METRICS, not_joined=frozenset({"cpus"}), views=(views.tables,))
