"""A user's application across MPI ranks: placed by the rank layouts the MPI families use,
started by the launcher registry (mpirun's rankfile, mpiexec, srun) with each rank bound, and
read back: `hpcprobe.tools.inrank` runs in front of the application in every rank and says
which rank it is and where it was placed, so a repetition whose ranks did not all start, or
that ran off the CPUs asked for, is known."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import MeasurementError
from hpcprobe.machine.topology import Topology
from hpcprobe.mpi import find, launchers, layouts, params
from hpcprobe.mpi.layouts import Placement
from hpcprobe.tools import command, inrank


@dataclass(frozen=True)
class Launched:
    """One repetition across ranks: what it printed (the ranks' placement lines taken out),
    each rank's CPUs as read back ("0;1"), and the warnings about them."""

    ran: command.Ran
    binding: str
    warnings: list[str]


def place(topo: Topology, layout: str | None, ranks: int | None,
          hosts: tuple[str, ...] | None) -> Placement:
    """`ranks` ranks of the layout (default one per core, single-threaded; all of them), on
    `hosts`."""
    pl = layouts.place(topo, layout or "core", ranks, hosts, None, 1)
    assert pl is not None  # a layout is always given
    return pl


class Ranks:
    """The launch of an application on a placement, built once for its repetitions."""

    def __init__(self, pl: Placement, argv: tuple[str, ...], env: Mapping[str, str],
                 launcher: str | None, mpi_prefix: str | None) -> None:
        self.pl = pl
        mpi = find.find(mpi_prefix)
        ln, path = launchers.choose(mpi, launcher)
        self.provenance = params.provenance(mpi, ln.name, path)
        self.mpi = f"{mpi.implementation} {mpi.version}"
        threads = pl.ranks.threads
        env = {**({"OMP_NUM_THREADS": str(threads)} if threads > 1 else {}), **env}
        self._dir = tempfile.TemporaryDirectory(prefix="hpcprobe-app-")
        self.launch = ln.build(path, mpi, pl.layout,
                               [sys.executable, "-m", "hpcprobe.tools.inrank", *argv],
                               Path(self._dir.name), env)

    def close(self) -> None:
        self._dir.cleanup()

    def run(self, cwd: str | None, env: Mapping[str, str], timeout: float, name: str
            ) -> Launched:
        ran = command.run(self.launch.argv, cwd, {**env, **self.launch.env}, timeout)
        said, output = inrank.read(ran.output)
        ran = command.Ran(ran.argv, ran.code, output, ran.seconds)
        if not ran.ok:
            return Launched(ran, "", [])
        layout = self.pl.layout
        got: dict[Any, dict[str, Any]] = {s.get("rank"): s for s in said}
        missing = [r for r in range(layout.ranks) if r not in got]
        if missing:
            raise MeasurementError(
                f"app {name}: {len(said)} of {layout.ranks} rank(s) started and said where "
                f"they ran (none from rank(s) {format_cpulist(missing)}): the launcher did "
                "not start them all; this repetition does not count")
        out, warnings = [], []
        for r in range(layout.ranks):
            cpus = [int(c) for c in got[r].get("cpus", [])]
            out.append(format_cpulist(cpus))
            host = layout.hosts[r] if layout.hosts else None
            if host is not None and got[r].get("host") not in (host, host.split(".")[0]):
                warnings.append(f"app {name}: rank {r} was to run on {host}, ran on "
                                f"{got[r].get('host')}")
            if sorted(cpus) != sorted(layout.cpuset(r)):
                warnings.append(f"app {name}: rank {r} asked for CPUs "
                                f"{format_cpulist(sorted(layout.cpuset(r)))}, ran on "
                                f"{out[-1]}")
        return Launched(ran, ";".join(out), warnings)
