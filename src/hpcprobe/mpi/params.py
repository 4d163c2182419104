"""The protocol settings an MPI reports about itself: for Open MPI, each BTL's eager limit and the
shared-memory BTL's single-copy mechanism, as `ompi_info` gives them under this environment
(OMPI_MCA_* variables included). Other MPIs do not list theirs in a form read here."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from functools import cache

from hpcprobe.mpi.find import Mpi

#: Open MPI's shared-memory BTLs: vader (4.x and before), sm (5.x).
SHARED_MEMORY = ("vader", "sm")
_PARAM = re.compile(r"^mca:btl:(\w+):param:(btl_\w+):value:(.*)$", re.M)


@dataclass(frozen=True)
class Btl:
    """One Open MPI BTL's protocol settings."""

    name: str
    eager_limit: int  # bytes, the BTL's header included: a larger fragment goes by rendezvous
    single_copy: str | None = None  # the shared-memory BTL's copy above its eager limit

    @property
    def shared_memory(self) -> bool:
        return self.name in SHARED_MEMORY


def parse(text: str) -> list[Btl]:
    """The BTLs of `ompi_info --parsable --param btl all --level 9` that carry messages between
    ranks (self, a rank's to itself, is left out) and send eagerly (ofi reports a limit of 0)."""
    values: dict[str, dict[str, str]] = {}
    for comp, key, value in _PARAM.findall(text):
        values.setdefault(comp, {})[key.removeprefix(f"btl_{comp}_")] = value.strip()
    out = []
    for comp, kv in values.items():
        limit = kv.get("eager_limit", "")
        if comp != "self" and limit.isdigit() and int(limit) > 0:
            out.append(Btl(comp, int(limit), kv.get("single_copy_mechanism")))
    return out


@cache
def _ompi_info(path: str, env: tuple[tuple[str, str], ...]) -> str:
    try:
        p = subprocess.run([path, "--parsable", "--param", "btl", "all", "--level", "9"],
                           capture_output=True, text=True, timeout=30, env=dict(env))
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout if p.returncode == 0 else ""


def btls(mpi: Mpi) -> list[Btl]:
    """This Open MPI's BTLs and their limits under the current environment; [] for another MPI
    or where ompi_info is missing or fails (nothing is then said about its limits)."""
    path = mpi.bin("ompi_info") if mpi.implementation == "Open MPI" else None
    return parse(_ompi_info(path, tuple(sorted(os.environ.items())))) if path else []
