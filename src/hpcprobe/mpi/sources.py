"""The C sources of hpcprobe's MPI programs, shipped in the package: what they are built from
(mpi/build.py) and part of an MPI's fingerprint (mpi/find.py)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

#: The native core's public header, which the proxies include.
HEADER = "hpb.h"
#: The MPI tests' source (the fingerprint's).
TESTS = "hpb_mpi.c"


@cache
def source_text(name: str = TESTS) -> str:
    """A C file shipped in the package; run from a checkout (src/ on the path), the one in
    native/mpi/ or native/include/."""
    shipped = resources.files("hpcprobe.mpi").joinpath(name)
    if shipped.is_file():
        return shipped.read_text()
    root = Path(__file__).resolve().parents[3] / "native"
    return (root / ("include" if name == HEADER else "mpi") / name).read_text()
