"""Building a million small objects at once (a fleet's runs, figures and samples): Python's
cyclic garbage collector would walk them again and again as they pile up (0.7 s of 2 s loading
a 1,000-node campaign); they hold no reference cycles, so it pauses meanwhile."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def bulk() -> Iterator[None]:
    """The cyclic collector paused for the block (as it was afterwards)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
