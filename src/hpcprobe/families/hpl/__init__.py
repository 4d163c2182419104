"""The hpl family: the real HPL (Debian's hpcc or the user's xhpl) against an Rpeak on the clock
measured under load, DGEMM through the same BLAS, and which kernels that BLAS runs."""

from __future__ import annotations

from hpcprobe.families.hpl import bench, views
from hpcprobe.measure.family import (
    Ceilings,
    Command,
    Default,
    Family,
    Headlines,
    Keeps,
    Metrics,
    Params,
    Scaling,
    Sized,
)
from hpcprobe.results.ceilings import Bound

FAMILY = Family(
    "hpl", "HPL (hpcc or your xhpl) against an Rpeak on the measured clock; DGEMM and the "
    "BLAS's kernels", bench.HplOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics(bench.METRICS, frozenset({
        "hosts", "launcher", "blas_library", "blas_kernels", "blas_isa", "n", "microarch",
        "flops_per_cycle", "model_source", "clock_load", "cpus", "basis", "clock_ghz",
        "binding"}), params=(Params(("domains",), ("power", "dgemm_per_watt",
                                                    "rmax_per_watt")),)),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Headlines(views.headlines), Default(), Keeps((bench.HPL,)),
                  Ceilings((Bound("hpl", "rmax", views.rmax_ceiling),
                            Bound("hpl", "dgemm", views.dgemm_ceiling))), Command(
        help="HPL against the measured peak, DGEMM and the BLAS, or `hpl info`",
        description="HPL (Debian's hpcc, or --xhpl) with an input derived from this node (N "
                    "from 80 % of memory unless --quick or --n), its Rmax against an Rpeak on "
                    "the clock measured under the widest ISA's load, and DGEMM through the same "
                    "BLAS with the kernels it chose (`hpl info` lists the BLAS libraries).",
        actions={"info": ("show the HPL, MPI and BLAS libraries found and the kernels each "
                          "BLAS picks", bench.info)}),
    Scaling(("rmax", "efficiency"), grow=("rmax",),
            vary=("nodes", "ranks", "p", "q", "hosts", "n", "cores")),
    Sized(bench.scaled, bench.total_rate, "Rmax (best BLAS)")))
