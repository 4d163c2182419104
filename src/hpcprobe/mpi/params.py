"""The message sizes at which an MPI changes how it sends, as the MPI reports them under this
environment (its variables set there count): Open MPI's BTL eager limits and shared-memory
single-copy mechanism (`ompi_info`), MPICH's CH4 thresholds (`mpivars`). Other MPIs do not list
theirs in a form read here."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field, replace
from functools import cache

from hpcprobe.common.parts import Part
from hpcprobe.mpi.find import Mpi

#: Open MPI's shared-memory BTLs: vader (4.x and before), sm (5.x).
SHARED_MEMORY = ("vader", "sm")
_OMPI = re.compile(r"^mca:btl:(\w+):param:(btl_\w+):value:(.*)$", re.M)
#: MPICH's CH4 variables that place a change of protocol within a node or between nodes, and how
#: a message at or above the size goes (the CH3 device's are listed by CH4 builds but unused).
MPICH = {
    "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE": (
        "intra-node", "in more than one cell of the shared-memory queue"),
    "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD": ("intra-node", "by a single CMA copy"),
    "MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD": (
        "intra-node", "by a single XPMEM copy, where MPICH was built with it"),
    "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD": ("inter-node", "by an MPICH rendezvous over OFI"),
}
_MPICH = re.compile(r"^\s*(MPIR_CVAR_\w+)\s*=(-?\d+)\s", re.M)


@dataclass(frozen=True)
class Threshold:
    """A message size from which the MPI sends another way."""

    variable: str  # the environment variable that sets it
    size: int  # bytes (Open MPI's eager limits count its header: a message a little smaller)
    scope: str  # "intra-node" or "inter-node"
    above: str  # how a message at or above it goes: "by rendezvous", "in more than one cell"
    knobs: tuple[str, ...]  # the variables that move or change it


def parse_ompi_info(text: str) -> list[Threshold]:
    """The BTL eager limits in `ompi_info --parsable --param btl all --level 9`: of the BTLs
    that carry messages between ranks (self, a rank's to itself, is left out) and send eagerly
    (ofi reports a limit of 0)."""
    values: dict[str, dict[str, str]] = {}
    for comp, key, value in _OMPI.findall(text):
        values.setdefault(comp, {})[key.removeprefix(f"btl_{comp}_")] = value.strip()
    out = []
    for comp, kv in values.items():
        limit = kv.get("eager_limit", "")
        if comp == "self" or not limit.isdigit() or int(limit) == 0:
            continue
        var = f"OMPI_MCA_btl_{comp}_eager_limit"
        copy = kv.get("single_copy_mechanism")
        above = ("by rendezvous" + (f", then a single copy by {copy}" if copy else "")
                 + " (through the ob1 PML; under UCX, UCX_RNDV_THRESH sets the size instead)")
        knobs = (var, *([f"OMPI_MCA_btl_{comp}_single_copy_mechanism"] if copy else []))
        out.append(Threshold(var, int(limit), "intra-node" if comp in SHARED_MEMORY else
                             "inter-node", above, knobs))
    return out


def parse_mpivars(text: str) -> list[Threshold]:
    """MPICH's CH4 thresholds in `mpivars`' listing that are set (a negative value: none)."""
    out = []
    for var, value in _MPICH.findall(text):
        if var in MPICH and int(value) > 0:
            scope, above = MPICH[var]
            out.append(Threshold(var, int(value), scope, above, (var,)))
    return out


#: implementation -> (the program of its bin/ that lists its settings, its arguments, parser)
LISTERS = {"Open MPI": ("ompi_info", ("--parsable", "--param", "btl", "all", "--level", "9"),
                        parse_ompi_info),
           "MPICH": ("mpivars", (), parse_mpivars)}


@cache
def _listing(argv: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> str:
    """The program's listing, once per environment: it answers within a second (ompi_info
    0.2 s, mpivars 0.07 s here); one that hangs costs a run 10 s and says nothing."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10, env=dict(env))
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout if p.returncode == 0 else ""


def thresholds(mpi: Mpi) -> list[Threshold]:
    """This MPI's thresholds under the current environment; [] for an MPI not read here or
    where its program is missing or fails (nothing is then said about them)."""
    if mpi.implementation not in LISTERS:
        return []
    program, args, parse = LISTERS[mpi.implementation]
    path = mpi.bin(program)
    return parse(_listing((path, *args), tuple(sorted(os.environ.items())))) if path else []


@dataclass(frozen=True)
class MpiUsed:
    """What a run records of the MPI it launched ranks with (its provenance part `mpi`): the
    MPI as its wrapper describes it, its build fingerprint, the launcher, and the thresholds
    in force (variable -> bytes)."""

    mpicc: str | None = None
    prefix: str | None = None
    implementation: str | None = None
    version: str | None = None
    standard: str | None = None
    wrapper_flags: str | None = None
    fingerprint: str | None = None
    launcher: str | None = None
    launcher_path: str | None = None
    thresholds: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, mpi: Mpi) -> MpiUsed:
        """The MPI as its wrapper describes it (no launcher, no thresholds read)."""
        return cls(mpi.mpicc, mpi.prefix, mpi.implementation, mpi.version, mpi.standard,
                   mpi.wrapper_flags, mpi.fingerprint)

    @property
    def named(self) -> str:
        """"Open MPI 4.1.4 (/usr)"."""
        return f"{self.implementation} {self.version} ({self.prefix})"


#: The run's part: the MPI a family's ranks ran with (the mpi family, the proxies, an
#: application run across ranks)
MPI = Part("mpi", MpiUsed)


def provenance(mpi: Mpi, launcher: str, path: str | None) -> MpiUsed:
    """What a run records of the MPI it launched ranks with."""
    return replace(MpiUsed.of(mpi), launcher=launcher, launcher_path=path,
                   thresholds={t.variable: t.size for t in thresholds(mpi)})
