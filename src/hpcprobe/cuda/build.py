"""Build our GPU program (hpb_gpu.cu) with the nvcc found, once per toolkit, driver, target
architectures and source: machine code for each GPU architecture present and PTX for the newest,
so a newer GPU still runs it through the driver's JIT."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from hpcprobe.common.compiled import cache_root, cached, compile_to
from hpcprobe.common.errors import UserError
from hpcprobe.cuda.toolkit import Toolkit

SOURCE = "hpb_gpu.cu"
FLAGS = ("-O3", "-std=c++17", "-Xcompiler", "-Wall")


@cache
def source_text() -> str:
    """The CUDA source shipped in the package; from a checkout, the one in native/cuda/."""
    shipped = resources.files("hpcprobe.cuda").joinpath(SOURCE)
    if shipped.is_file():
        return shipped.read_text()
    return (Path(__file__).resolve().parents[3] / "native" / "cuda" / SOURCE).read_text()


def targets(tk: Toolkit, wanted: Sequence[str]) -> tuple[str, ...]:
    """The architectures to build for: those wanted that this nvcc knows (a GPU newer than it
    gets the newest one's PTX), else the oldest it knows (a compile check without a GPU)."""
    known = [a for a in wanted if a in tk.archs]
    newer = [a for a in wanted if a not in tk.archs and tk.archs and
             int(a[3:]) > int(tk.archs[-1][3:])]
    if newer:
        known.append(tk.archs[-1])
    if not known and wanted:
        raise UserError(f"nvcc {tk.release} cannot build for {', '.join(wanted)} (it knows "
                        f"{', '.join(tk.archs)}): use a CUDA toolkit that supports the GPU")
    return tuple(sorted(set(known or tk.archs[:1]), key=lambda s: int(s[3:])))


def fingerprint(tk: Toolkit, archs: Sequence[str], driver: str | None) -> str:
    h = hashlib.sha256()
    for part in (tk.nvcc, tk.release, ",".join(archs), driver or "no-driver", *FLAGS,
                 source_text()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def gencode(archs: Sequence[str]) -> list[str]:
    out = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a[3:]},code={a}"]
    if archs:
        out += ["-gencode", f"arch=compute_{archs[-1][3:]},code=compute_{archs[-1][3:]}"]
    return out


def build(tk: Toolkit, wanted: Sequence[str] = (), driver: str | None = None) -> Path:
    """The program for these architectures, compiled on first use."""
    archs = targets(tk, wanted)
    exe = cache_root() / "cuda" / fingerprint(tk, archs, driver) / "hpb_gpu"
    if cached(exe) is not None:
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    src = exe.parent / SOURCE
    src.write_text(source_text())
    compile_to(exe, lambda out: [tk.nvcc, *FLAGS, *gencode(archs), str(src), "-o", out, "-ldl",
                                 "-lpthread"],
               f"nvcc {tk.release} cannot compile the GPU program for {', '.join(archs)}")
    (exe.parent / "fingerprint.txt").write_text(
        f"nvcc: {tk.nvcc}\nrelease: {tk.release}\narchs: {','.join(archs)}\n"
        f"driver: {driver or 'none'}\n")
    return exe
