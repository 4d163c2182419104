"""Host names in the order people expect."""

from __future__ import annotations

import re


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key putting n2 before n10 (numbers compare as numbers)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name) if p)
