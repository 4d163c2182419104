"""Build the MPI programs with the MPI's own mpicc, once per MPI fingerprint: the MPI tests
(hpb_mpi.c, self-contained) and the application proxies (hpb_proxy.c, linked to the native
core, whose header and build it follows: a rebuilt core gets a rebuilt program)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hpcprobe import native
from hpcprobe.common.compiled import cache_root, cached, compile_to
from hpcprobe.mpi.find import CFLAGS, Mpi
from hpcprobe.mpi.sources import HEADER, source_text


@dataclass(frozen=True)
class Program:
    """An MPI program of ours: its name (the source is NAME.c) and whether it links the core."""

    name: str
    with_core: bool
    what: str  # for messages

    @property
    def source(self) -> str:
        return f"{self.name}.c"


TESTS = Program("hpb_mpi", False, "the MPI tests")
PROXY = Program("hpb_proxy", True, "the application proxies")


def _core_tag() -> str:
    """Changes with the proxies' source, the core's header, and the core library's place (the
    program's rpath) and content: not with a reinstall that rebuilt the same library, which
    made a build of its own, left beside the others, at every install."""
    lib = native.lib_path()
    h = hashlib.sha256()
    for part in (source_text(PROXY.source).encode(), source_text(HEADER).encode(),
                 str(lib.resolve()).encode(), lib.read_bytes() if lib.is_file() else b"missing"):
        h.update(part + b"\0")
    return h.hexdigest()[:12]


def program(mpi: Mpi, prog: Program = TESTS) -> Path:
    """Where the program built for this MPI lives (built or not)."""
    name = f"{prog.name}-{_core_tag()}" if prog.with_core else prog.name
    return cache_root() / "mpi" / mpi.fingerprint / name


def build(mpi: Mpi, prog: Program = TESTS) -> Path:
    """The program for this MPI, compiled on first use; a changed MPI, flag or source has
    another fingerprint and gets its own build. A failing compile is a user error carrying the
    compiler's message."""
    exe = program(mpi, prog)
    if cached(exe) is not None:
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = exe.parent / prog.source
    src.write_text(source_text(prog.source))
    link: list[str] = []
    if prog.with_core:
        (exe.parent / HEADER).write_text(source_text(HEADER))
        lib = native.lib_path().resolve()
        link = [f"-I{exe.parent}", f"-L{lib.parent}", f"-l:{lib.name}",
                f"-Wl,-rpath,{lib.parent}", "-lm"]
    compile_to(exe, lambda out: [mpi.mpicc, *CFLAGS, str(src), "-o", out, *link],
               f"{mpi.mpicc} cannot compile {prog.what} ({mpi.implementation} {mpi.version})")
    (exe.parent / "fingerprint.txt").write_text("\n".join(
        f"{k}: {v}" for k, v in mpi.to_dict().items()) + "\n")
    return exe
