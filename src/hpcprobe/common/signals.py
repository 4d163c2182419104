"""Interruptions held back for a short block that must finish whole (a family's bookkeeping
after it measured, the node sentinel's reading): Ctrl-C or SIGTERM arriving meanwhile is
recorded, and the caller acts on it once the block is done."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred() -> Iterator[list[int]]:
    """The block runs with Ctrl-C and SIGTERM recorded, not raised; the list it yields holds
    the signals that arrived (empty: none). Outside the main thread, where no handler can be
    set, the block runs as it is."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def note(signum: int, frame: Any) -> None:
        got.append(signum)

    old = {sig: signal.signal(sig, note) for sig in INTERRUPTS}
    try:
        yield got
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
