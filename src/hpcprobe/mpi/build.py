"""Build the MPI test program with the MPI's own mpicc, once per MPI fingerprint."""

from __future__ import annotations

import os
import subprocess
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path

from hpcprobe.common.errors import UserError
from hpcprobe.mpi.find import CFLAGS, Mpi

SOURCE = "hpb_mpi.c"


@cache
def source_text() -> str:
    """The C source shipped in the package; run from a checkout (src/ on the path), the one in
    native/mpi/."""
    shipped = resources.files("hpcprobe.mpi").joinpath(SOURCE)
    if shipped.is_file():
        return shipped.read_text()
    return (Path(__file__).resolve().parents[3] / "native" / "mpi" / SOURCE).read_text()


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("HPCPROBE_CACHE") or Path(base) / "hpcprobe")


def program(mpi: Mpi) -> Path:
    """Where the program built for this MPI lives (built or not)."""
    return cache_root() / "mpi" / mpi.fingerprint / "hpb_mpi"


def build(mpi: Mpi) -> Path:
    """The program for this MPI, compiled on first use; a changed MPI, flag or source has
    another fingerprint and gets its own build. A failing compile is a user error carrying the
    compiler's message."""
    exe = program(mpi)
    if exe.is_file():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = exe.parent / SOURCE
    src.write_text(source_text())
    fd, tmp = tempfile.mkstemp(dir=exe.parent, prefix=".hpb_mpi-")
    os.close(fd)
    try:
        p = subprocess.run([mpi.mpicc, *CFLAGS, str(src), "-o", tmp], capture_output=True,
                           text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{mpi.mpicc} failed to run: {exc}") from None
    if p.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        msg = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
        raise UserError(f"{mpi.mpicc} cannot compile the MPI tests ({mpi.implementation} "
                        f"{mpi.version}): {msg}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, exe)  # atomic: a concurrent or interrupted build leaves no half file
    (exe.parent / "fingerprint.txt").write_text("\n".join(
        f"{k}: {v}" for k, v in mpi.to_dict().items()) + "\n")
    return exe
