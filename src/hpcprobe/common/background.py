"""Work done in a forked child while the caller goes on, its result handed back pickled through
a pipe: a report's figures drawn and encoded as PNG (matplotlib imported, five figures drawn: a
second of a 1,000-node campaign's report here) while it judges its nodes and reads their history.
The child has what the caller had made (forked, nothing passed to it); it touches nothing of the
caller's (an open store's connection included) and leaves by `os._exit`. Where no child can be
made, it fails or it has not answered within `timeout_s`, the work is done here when asked for:
the same result, later."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def start(work: Callable[[], _T], timeout_s: float = 300.0) -> Callable[[], _T]:
    """`work` begun in a child; the function that gives its result (waiting for it)."""
    try:
        r, w = os.pipe()
    except OSError:
        return work
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return work
    if pid == 0:  # the child: its result, or nothing and a failing status
        code = 1
        try:
            import pickle

            os.close(r)
            with os.fdopen(w, "wb") as out:
                out.write(pickle.dumps(work()))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return lambda: _result(pid, r, work, timeout_s)


def _result(pid: int, fd: int, work: Callable[[], _T], timeout_s: float) -> _T:
    """The child's result: all it wrote, then its status; its work done here where it failed or
    did not answer in time (then it is killed)."""
    import pickle
    import select
    import signal
    import time

    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended meanwhile
                    pass
                chunks = []
                break
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    if chunks and os.waitstatus_to_exitcode(status) == 0:
        return pickle.loads(b"".join(chunks))  # type: ignore[no-any-return]
    return work()
