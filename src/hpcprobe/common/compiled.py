"""Programs of ours compiled on first use into hpcprobe's cache: where the cache is, and one
compile that leaves either the finished program or nothing (a concurrent or interrupted build
leaves no half file). A cached program is run only where no other user could have put it there
or changed it: it and its directory owned by this user or root, writable by no one else (root
runs them in a prolog; a program another user can write would run as root)."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from hpcprobe.common.errors import UserError


def cache_root() -> Path:
    """$HPCPROBE_CACHE, else $XDG_CACHE_HOME/hpcprobe, else ~/.cache/hpcprobe."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("HPCPROBE_CACHE") or Path(base) / "hpcprobe")


def _untrusted(path: Path) -> str | None:
    """Why `path` may have been written by another user (owned by one, or writable by group or
    others), None where it cannot."""
    st = path.stat()
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by user {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
            path.is_dir() and st.st_mode & stat.S_ISVTX and st.st_uid == 0):
        return "writable by others"
    return None


def cached(exe: Path) -> Path | None:
    """The program already built at `exe`, None where there is none; one that another user
    could have written is refused in one line (never run)."""
    if not exe.is_file():
        return None
    for path in (exe, exe.parent):
        if (why := _untrusted(path)) is not None:
            raise UserError(f"{path}: {why}: a cached program there is not run; remove "
                            f"{exe.parent} (it is built again) or set HPCPROBE_CACHE to a "
                            "directory of your own")
    return exe


def compile_to(exe: Path, command: Callable[[str], Sequence[str]], what: str,
               timeout_s: float = 300) -> Path:
    """Run `command(output path)` to build `exe` unless it exists; a compiler that cannot run or
    fails is a user error with its last lines. `what` names the compiler and the program."""
    if cached(exe) is not None:
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
