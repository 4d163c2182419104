"""Run a program as the user wrote it: an argv list (never through a shell), a working
directory, extra environment, a timeout; its output kept to quote its last lines when it fails."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.errors import UserError


@dataclass(frozen=True)
class Ran:
    argv: tuple[str, ...]
    code: int | None  # None: killed at its timeout
    output: str  # stdout and stderr together, in order
    seconds: float

    @property
    def ok(self) -> bool:
        return self.code == 0

    def tail(self, lines: int = 5) -> str:
        """Its last lines of output, on one line."""
        got = [x for x in self.output.strip().splitlines() if x.strip()][-lines:]
        return " | ".join(got) if got else "(no output)"

    def failure(self) -> str:
        """Why it failed, with its last lines."""
        how = "timed out" if self.code is None else f"exited with {self.code}"
        return f"`{shlex.join(self.argv)}` {how}; its last lines: {self.tail()}"


def check_program(argv: Sequence[str], what: str) -> None:
    """A command whose program exists (on PATH or as a path), else a user error."""
    if not argv:
        raise UserError(f"{what}: the command is empty")
    prog = argv[0]
    if os.sep in prog:
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            raise UserError(f"{what}: {prog} is not an executable file")
    elif shutil.which(prog) is None:
        raise UserError(f"{what}: command {prog!r} not found on PATH")


def run(argv: Sequence[str], cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
        timeout: float | None = None) -> Ran:
    """Run it to its end (or its timeout: its whole process group is killed), output captured.
    `env` adds to (or overrides) this process's environment."""
    full = {**os.environ, **(env or {})}
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(list(argv), cwd=cwd, env=full, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    except FileNotFoundError:
        raise UserError(f"command {argv[0]!r} not found") from None
    except NotADirectoryError:
        raise UserError(f"working directory {cwd} is not a directory") from None
    except PermissionError as exc:
        raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
    try:
        out, _ = p.communicate(timeout=timeout)
        code: int | None = p.returncode
    except subprocess.TimeoutExpired:
        _kill(p)
        out, _ = p.communicate()
        code = None
    except BaseException:  # Ctrl-C: the program does not outlive us
        _kill(p)
        p.wait()
        raise
    return Ran(tuple(argv), code, out.decode(errors="replace"), time.perf_counter() - t0)


def _kill(p: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
