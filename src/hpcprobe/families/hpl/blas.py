"""The BLAS libraries HPL can run on here, which one a run uses (`--blas`), what each says of
its kernels, and whether those use the widest vector unit the CPU has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.families.hpl import dgemm as dgemm_worker
from hpcprobe.machine import energy, provenance

#: Debian's BLAS packages: each installs a libblas.so.3 in one of these directories of the
#: multiarch library directory, an alternative of the system's libblas.so.3.
DEBIAN = {"openblas": ("openblas-pthread", "openblas-openmp", "openblas-serial", "openblas"),
          "blis": ("blis-pthread", "blis-openmp", "blis-serial"),
          "reference": ("blas",)}
HOW_TO = ("Debian: apt install libopenblas0-pthread (OpenBLAS) or libblis4-pthread (BLIS); "
          "or name a libblas.so.3 by its path")
#: Vector ISAs in order of width; a BLAS kernel set narrower than the CPU's widest is a finding.
ORDER = ("scalar", "sse", "avx", "avx2", "avx512")
#: OpenBLAS's core names (openblas_get_corename) -> the widest ISA of their DGEMM kernels.
OPENBLAS_ISA = {
    **dict.fromkeys(("skylakex", "cooperlake", "sapphirerapids"), "avx512"),
    **dict.fromkeys(("haswell", "zen", "excavator"), "avx2"),
    **dict.fromkeys(("sandybridge", "bulldozer", "piledriver", "steamroller"), "avx"),
    **dict.fromkeys(("nehalem", "core2", "penryn", "dunnington", "atom", "prescott", "opteron",
                     "barcelona", "bobcat", "katmai", "coppermine", "northwood"), "sse"),
}
#: BLIS's configuration names (bli_arch_string) -> the widest ISA of their kernels.
BLIS_ISA = {
    **dict.fromkeys(("skx", "knl", "zen4", "zen5"), "avx512"),
    **dict.fromkeys(("haswell", "zen", "zen2", "zen3"), "avx2"),
    **dict.fromkeys(("sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"),
                    "avx"),
    "penryn": "sse", "generic": "scalar",
}
#: OPENBLAS_CORETYPE that selects OpenBLAS's kernels for each CPU ISA.
OPENBLAS_CORETYPE = {"avx512": "SkylakeX", "avx2": "Haswell"}
#: Environment variables that set a BLAS's thread count.
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")
#: One DGEMM worker run may take this long.
WORKER_TIMEOUT_S = 300.0


def libdir() -> Path:
    return Path("/usr/lib") / getattr(sys.implementation, "_multiarch", "x86_64-linux-gnu")


@dataclass(frozen=True)
class Blas:
    """A BLAS a run uses: its name, its libblas.so.3, and an OpenBLAS core type forced."""

    name: str  # "openblas", "openblas:SkylakeX", "blis", "reference", or a path
    library: str
    coretype: str | None = None

    def env(self, threads: int) -> dict[str, str]:
        """What the ranks' environment needs: the library first on the search path (programs
        linked against libblas.so.3 load it), its thread count, the core type forced."""
        out = {v: str(threads) for v in THREAD_VARS}
        lib_path = os.environ.get("LD_LIBRARY_PATH")
        out["LD_LIBRARY_PATH"] = str(Path(self.library).parent) + (f":{lib_path}"
                                                                   if lib_path else "")
        if self.coretype:
            out["OPENBLAS_CORETYPE"] = self.coretype
        return out


def installed(root: Path | None = None) -> dict[str, str]:
    """Name -> libblas.so.3 of each Debian BLAS installed."""
    root = root or libdir()
    out = {}
    for name, dirs in DEBIAN.items():
        for d in dirs:
            lib = root / d / "libblas.so.3"
            if lib.is_file():
                out[name] = str(lib)
                break
    return out


def name_of(library: str) -> str:
    """The Debian name of a libblas.so.3, or its path."""
    folder = Path(library).parent.name
    return next((name for name, dirs in DEBIAN.items() if folder in dirs), library)


def choose(wanted: tuple[str, ...] | None, have: dict[str, str] | None = None) -> list[Blas]:
    """The BLAS libraries of `--blas` (names, name:CORETYPE for OpenBLAS, or paths of a
    libblas.so.3), or the system's (the libblas.so.3 alternative)."""
    have = installed() if have is None else have
    if not wanted:
        system = provenance.blas()
        if system is not None and os.path.isfile(system):
            return [Blas(name_of(system), system)]
        if not have:
            raise UserError(f"no BLAS found: {HOW_TO}")
        first = next(iter(have))
        return [Blas(first, have[first])]
    out = []
    for spec in wanted:
        name, _, coretype = spec.partition(":")
        if "/" in name:
            if not os.path.isfile(name):
                raise OptionError(f"<blas> {spec}: no such file")
            if Path(name).name != "libblas.so.3":
                raise OptionError(f"<blas> {spec}: name a libblas.so.3 (programs linked against "
                                  "the BLAS load it by that name)")
            why = loads(name)
            if why:
                raise OptionError(f"<blas> {spec}: cannot be loaded: {why}")
            out.append(Blas(spec, name, coretype or None))
            continue
        if name not in DEBIAN:
            raise OptionError(f"<blas> {spec!r} is unknown; names: {', '.join(DEBIAN)} (installed: "
                              f"{', '.join(have) or 'none'}), NAME:CORETYPE for OpenBLAS, or a "
                              "libblas.so.3 path")
        if name not in have:
            raise OptionError(f"<blas> {name}: not installed here ({HOW_TO}); installed: "
                              f"{', '.join(have) or 'none'}")
        if coretype and name != "openblas":
            raise OptionError(f"<blas> {spec}: a core type is OpenBLAS's (OPENBLAS_CORETYPE)")
        out.append(Blas(spec, have[name], coretype or None))
    return out


@cache
def loads(library: str) -> str | None:
    """None when the library loads and has dgemm_ (tried in a child process: a broken library
    may crash it); else why not. Once per library: the plan and the run both choose."""
    probe = "import ctypes, sys; ctypes.CDLL(sys.argv[1]).dgemm_"
    try:
        p = subprocess.run([sys.executable, "-c", probe, library], capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "loading it hangs"
    if p.returncode == 0:
        return None
    lines = [ln.strip() for ln in p.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"the loader died (status {p.returncode})"


def kernel_isa(info: dict[str, Any]) -> str | None:
    """The widest ISA of the kernels a BLAS said it chose (None: it does not say)."""
    kernel = (info.get("kernel") or "").lower()
    lib = info.get("library")
    if lib == "openblas":
        return OPENBLAS_ISA.get(kernel)
    if lib == "blis":
        return BLIS_ISA.get(kernel)
    if lib == "reference":
        return "scalar"
    return None


def narrower(kernel: str | None, cpu_isa: str) -> bool:
    return kernel is not None and cpu_isa in ORDER and ORDER.index(kernel) < ORDER.index(cpu_isa)


def advice(blas: Blas, info: dict[str, Any], cpu_isa: str, env: dict[str, str] | None = None
           ) -> str:
    """Why the BLAS runs kernels narrower than the CPU's, and the fix to try."""
    env = dict(os.environ) if env is None else env
    kernel = info.get("kernel")
    lib = info.get("library")
    coretype = OPENBLAS_CORETYPE.get(cpu_isa)
    if lib == "openblas":
        forced = blas.coretype or env.get("OPENBLAS_CORETYPE")
        why = (f"OPENBLAS_CORETYPE={forced} pins OpenBLAS to its {kernel} kernels" if forced
               else f"{info.get('config') or 'OpenBLAS'} does not know this CPU and chose its "
                    f"{kernel} kernels")
        fix = (f"OPENBLAS_CORETYPE={coretype} selects its {cpu_isa} kernels (--blas "
               f"openblas:{coretype} runs them)" if coretype else "a newer OpenBLAS")
        return f"{why}; {fix}, or try BLIS (--blas blis)"
    if lib == "blis":
        return (f"{info.get('config') or 'BLIS'} does not know this CPU and runs its {kernel} "
                f"kernels; a newer BLIS (AMD's AOCL-BLIS) or OpenBLAS (--blas openblas"
                + (f":{coretype}" if coretype else "") + ")")
    return ("the reference BLAS is unoptimised Fortran: install OpenBLAS or BLIS "
            f"({HOW_TO}) and choose it with --blas or `update-alternatives --config "
            "libblas.so.3-x86_64-linux-gnu`")


def dgemm(blas: Blas, cpus: tuple[int, ...], reps: int, n: int = 0,
          meter: energy.Meter | None = None) -> dict[str, Any]:
    """DGEMM on `cpus` (one BLAS thread each) in a fresh process: the library's words on its
    kernels, GFLOP/s samples, and the result's check (`error`, None when it holds). With a
    `meter`, the worker waits at its timed calls (`dgemm.READY`) and `window` is their energy
    alone (None where the meter reads nothing)."""
    gated = meter is not None and meter.mark() is not None
    argv = [sys.executable, "-m", "hpcprobe.families.hpl.dgemm", blas.library, str(n), str(reps),
            ",".join(map(str, cpus)), *(["gated"] if gated else [])]
    window: list[energy.Window | None] = [None]
    late = threading.Event()
    with tempfile.TemporaryFile("w+") as err, subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
            env={**os.environ, **blas.env(len(cpus))}) as p:
        timer = threading.Timer(WORKER_TIMEOUT_S, _stop, (p, late))
        timer.start()
        try:
            lines = _answers(p, meter if gated else None, window)
            p.wait()
        except BaseException:  # Ctrl-C: not a worker left behind
            p.kill()
            raise
        finally:
            timer.cancel()
        err.seek(0)
        stderr = err.read()
    if late.is_set():
        return {"error": f"DGEMM through {blas.name} took over {WORKER_TIMEOUT_S:g} s"}
    if p.returncode != 0 or not lines:
        tail = " | ".join(ln.strip() for ln in stderr.splitlines() if ln.strip())[-300:]
        return {"error": f"DGEMM through {blas.name} ({blas.library}) "
                         + (f"died of signal {-p.returncode}" if p.returncode < 0 else
                            f"exited with status {p.returncode}")
                         + (f": {tail}" if tail else "")}
    got: dict[str, Any] = json.loads(lines[-1])
    got["window"] = window[0]
    return got


def _stop(p: subprocess.Popen[str], late: threading.Event) -> None:
    late.set()
    p.kill()


def _answers(p: subprocess.Popen[str], meter: energy.Meter | None,
             window: list[energy.Window | None]) -> list[str]:
    """The worker's JSON lines; the meter marked when it is READY (and told to go) and read
    when it is DONE, into `window[0]`."""
    assert p.stdin is not None and p.stdout is not None
    out, at = [], None
    for line in p.stdout:
        word = line.strip()
        if word == dgemm_worker.READY and meter is not None:
            at = meter.mark()
            p.stdin.write("go\n")
            p.stdin.flush()
        elif word == dgemm_worker.DONE and meter is not None:
            window[0] = meter.since(at)
        elif word.startswith("{"):
            out.append(word)
    return out
