"""Run one launch of the MPI test program: JSON lines in, a timeout per test, the launcher and
every rank stopped when a test hangs; whatever was measured before is kept."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from hpcprobe.mpi.launchers import Launch

#: After SIGTERM, the launcher and its ranks get this long before SIGKILL.
GRACE_S = 3.0
#: Starting the ranks (and MPI_Init) may take this long even when a test's timeout is shorter.
STARTUP_S = 60.0


@dataclass
class Outcome:
    """What one launch produced, and why it stopped early (error is None when it finished)."""

    info: dict[str, Any] | None = None
    bindings: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)  # a program's own validation
    running: str = "start-up"  # the test and size in progress, for messages
    error: str | None = None
    timed_out: bool = False


def stop(p: subprocess.Popen[str]) -> None:
    """SIGTERM to the launcher's process group (it and the ranks it started), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def _follow(p: subprocess.Popen[str], out: Outcome, timeout_s: float, name: str) -> bool:
    """Read the program's lines into `out` until it ends or a test makes no progress for
    timeout_s (then stop it); whether it said it was done."""
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    limit = max(timeout_s, STARTUP_S)
    deadline = time.monotonic() + limit
    done = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(timeout=left):
            stop(p)
            out.timed_out = True
            out.error = (f"{name}: no progress for {limit:g} s in {out.running}; the launcher "
                         "and its ranks were stopped (a hung or lost rank?)")
            break
        line = p.stdout.readline()
        if not line:
            break
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a library's chatter on stdout
        kind = rec.get("type")
        if kind == "begin":
            out.running = f"{rec['test']} at {rec['size']} B"
            limit = timeout_s
            deadline = time.monotonic() + limit
        elif kind == "sample":
            out.samples.append(rec)
        elif kind == "check":
            out.checks.append(rec)
        elif kind == "binding":
            out.bindings.append(rec)
        elif kind == "info":
            out.info = rec
        elif kind == "done":
            done = True
    return done


def run(launch: Launch, timeout_s: float, name: str) -> Outcome:
    """Run the launch: each test and size may take timeout_s, the start-up at least
    STARTUP_S; interrupted, it stops the launcher and its ranks before it re-raises."""
    out = Outcome()
    try:
        p = subprocess.Popen(launch.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, **launch.env},
                             start_new_session=True)
    except OSError as exc:
        out.error = f"{name} cannot be started: {exc}"
        return out
    assert p.stderr is not None
    err_lines: list[str] = []
    stderr = p.stderr
    drain = threading.Thread(target=lambda: err_lines.extend(stderr), daemon=True)
    drain.start()
    try:
        done = _follow(p, out, timeout_s, name)
    except BaseException:  # Ctrl-C: the ranks run in their own session and would live on
        stop(p)
        raise
    rc = p.wait()
    drain.join(timeout=GRACE_S)
    if out.error is None and (rc != 0 or not done):
        # the launcher's own message, without its banner lines of dashes
        tail = " | ".join(ln.strip() for ln in err_lines
                          if ln.strip() and set(ln.strip()) != {"-"})[-600:]
        out.error = (f"{name} exited with status {rc} during {out.running}"
                     + (f": {tail}" if tail else ""))
    return out
