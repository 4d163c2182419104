"""The CUDA toolkit and driver found on this node: nvcc (HPCPROBE_NVCC, PATH, /usr/local/cuda),
its release and architectures, the driver's CUDA version, and a cuBLAS library to load."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.common.kernelfiles import read_text


@dataclass(frozen=True)
class Toolkit:
    nvcc: str
    release: str  # "13.0"
    archs: tuple[str, ...]  # the real architectures it builds for, "sm_90", …

    @property
    def root(self) -> Path:
        """The toolkit's folder (nvcc's bin/ parent; through the /usr/local/bin wrapper too)."""
        real = Path(os.path.realpath(self.nvcc))
        if real.parent.name == "bin":
            return real.parent.parent
        return Path("/usr/local/cuda")

    def to_dict(self) -> dict[str, str]:
        return {"nvcc": self.nvcc, "release": self.release, "archs": ",".join(self.archs)}


class NoToolkit(UserError):
    pass


def _nvcc_path() -> str | None:
    for cand in (os.environ.get("HPCPROBE_NVCC"), shutil.which("nvcc"),
                 "/usr/local/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


@cache
def find() -> Toolkit:
    """The toolkit, or NoToolkit saying what to install."""
    nvcc = _nvcc_path()
    if nvcc is None:
        raise NoToolkit("no nvcc (the CUDA toolkit) found: install it (Debian: "
                        "nvidia-cuda-toolkit) or set HPCPROBE_NVCC")
    try:
        v = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        a = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoToolkit(f"{nvcc} does not run: {exc}") from None
    m = re.search(r"release (\d+\.\d+)", v.stdout)
    if v.returncode != 0 or not m:
        raise NoToolkit(f"{nvcc} --version said no release: {(v.stdout + v.stderr)[-200:]}")
    archs = tuple(sorted({f"sm_{x}" for x in re.findall(r"compute_(\d+)", a.stdout)},
                         key=lambda s: int(s[3:])))
    return Toolkit(nvcc, m.group(1), archs)


def arch_of(cc: str) -> str:
    """A compute capability ("9.0") as nvcc's architecture ("sm_90")."""
    major, _, minor = cc.partition(".")
    return f"sm_{int(major)}{int(minor or 0)}"


@cache  # the loader's cache and the wheels are searched once, not once per GPU
def cublas_candidates(tk: Toolkit) -> list[str]:
    """cuBLAS libraries on this node, those of the toolkit's major release first:
    HPCPROBE_CUBLAS, the toolkit's own, the loader's cache, NVIDIA's Python wheels."""
    found: list[str] = []
    env = os.environ.get("HPCPROBE_CUBLAS")
    if env:
        found.append(env)
    for d in (tk.root / "lib64", tk.root / "targets" / "x86_64-linux" / "lib"):
        found += sorted(glob.glob(str(d / "libcublas.so*")))
    try:
        ld = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
        found += re.findall(r"=>\s*(\S*libcublas\.so[.\d]*)\s*$", ld, re.M)
    except (OSError, subprocess.TimeoutExpired):
        pass
    for base in {*sys.path, *glob.glob("/opt/*/.venv/lib/python3*/site-packages"),
                 *glob.glob("/usr/local/lib/python3*/dist-packages")}:
        found += sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", "libcublas.so*")))
    major = tk.release.split(".")[0]
    unique = list(dict.fromkeys(p for p in found if os.path.isfile(p)))
    return sorted(unique, key=lambda p: not re.search(rf"libcublas\.so\.{major}\b", p))


def cublas(tk: Toolkit, asked: str | None = None) -> str:
    """The cuBLAS library to load: the one asked for, else the best candidate."""
    if asked:
        if not os.path.isfile(asked):
            raise OptionError(f"<gpu_cublas> {asked}: no such file")
        return asked
    got = cublas_candidates(tk)
    if not got:
        raise OptionError("no cuBLAS library found (libcublas.so: the CUDA toolkit's, or pip's "
                          "nvidia-cublas); name one with <gpu_cublas> PATH or HPCPROBE_CUBLAS")
    return got[0]


def driver_version(proc: str = "/proc") -> str | None:
    """The NVIDIA kernel driver's version ("580.159.04"), or None without one."""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)",
                  read_text(Path(proc, "driver", "nvidia", "version")) or "")
    return m.group(1) if m else None
