"""The cg family: an HPCG-shaped conjugate gradient proxy (27-point stencil, CG with its dot
products and vector updates), in this process or across MPI ranks with HPCG's halo exchange,
checked against a reference CG, with its bandwidth against the STREAM triad."""

from __future__ import annotations

from hpcprobe.families.cg import bench, views
from hpcprobe.measure.family import (
    Default,
    Family,
    Headlines,
    Metrics,
    Predicts,
    Scaling,
    Sized,
)

FAMILY = Family(
    "cg", "HPCG-shaped CG proxy: GFLOP/s, phase shares, bandwidth against STREAM triad",
    bench.CgOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics(bench.METRICS, frozenset({"cpus", "mpi"})), views=(views.tables,),
    capabilities=(Headlines(views.headlines), Default(), Scaling(
        ("gflops", "bandwidth_fraction"), grow=("gflops",), vary=(
            "nodes", "ranks", "rank_grid", "global", "cpus", "mpi", "nonzeros",
            "flops_per_iteration")),
        Sized(bench.scaled, bench.total_rate, "the CG rate"),
        # `hpcprobe app hpcg --with cg -- xhpcg`: how far the proxy is from the real one
        Predicts("app", "app:hpcg", {"figure": "rating"}, "HPCG's rating")))
