"""The mpi family: point-to-point, message rate, collectives and a 4-D halo exchange with OSU's
loop shapes, built with and run by the MPI found, out of process."""

from __future__ import annotations

from hpcprobe.families.mpi import bench, views
from hpcprobe.measure.family import Command, Default, Family, Headlines, Metrics, Params, Sized
from hpcprobe.mpi.launchers import LAUNCHERS

FAMILY = Family(
    "mpi", "MPI point-to-point, message rate, collectives and halo exchange (OSU conventions), "
    "out of process", bench.MpiOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics(bench.METRICS, frozenset({"cpus", "binding", "hosts", "mpi", "launcher"}),
                    params=(Params(("size_bytes", "ranks", "pairs", "launcher", "placement",
                                    "cpus", "binding", "mpi"),
                                   values={"size_bytes": {"type": "integer", "minimum": 0},
                                           "ranks": {"type": "integer", "minimum": 2},
                                           "pairs": {"type": "integer", "minimum": 0},
                                           "launcher": {"enum": list(LAUNCHERS)}}),)),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Headlines(views.headlines), Default(), Command(
        help="MPI tests with OSU conventions, or `mpi info`",
        description="MPI point-to-point, message rate, collectives and a 4-D halo exchange, "
                    "built with and run by the MPI found (`mpi info` shows it).",
        actions={"info": ("show the MPI found, its fingerprint and launchers", bench.info)}),
    Sized(bench.scaled, bench.aggregate,
          "the collective's aggregate bandwidth (ranks x bytes a rank / time)", "GB/s",
          modes=("weak",), least=2)))
