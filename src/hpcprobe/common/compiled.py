"""Programs of ours compiled on first use into hpcprobe's cache: where the cache is, and one
compile that leaves either the finished program or nothing (a concurrent or interrupted build
leaves no half file)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from hpcprobe.common.errors import UserError


def cache_root() -> Path:
    """$HPCPROBE_CACHE, else $XDG_CACHE_HOME/hpcprobe, else ~/.cache/hpcprobe."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("HPCPROBE_CACHE") or Path(base) / "hpcprobe")


def compile_to(exe: Path, command: Callable[[str], Sequence[str]], what: str,
               timeout_s: float = 300) -> Path:
    """Run `command(output path)` to build `exe` unless it exists; a compiler that cannot run or
    fails is a user error with its last lines. `what` names the compiler and the program."""
    if exe.is_file():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=exe.parent, prefix=f".{exe.name}-")
    os.close(fd)
    argv = list(command(tmp))
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{argv[0]} failed to run: {exc}") from None
    if p.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        msg = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
        raise UserError(f"{what}: {msg}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, exe)
    return exe
