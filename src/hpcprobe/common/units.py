"""Sizes with binary and decimal suffixes, and durations, parsed from and formatted for
people."""

from __future__ import annotations

import math
import re
from typing import Any

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Parse "2GiB", "512MiB", "64k", "1e9" into bytes (k/M/G are decimal, KiB/MiB/GiB binary).

    Raises ValueError with the reason for malformed or negative sizes.
    """
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size; write e.g. 2GiB, 512MiB or 64KiB")
    value, unit = float(m.group(1)), m.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"{text!r}: unknown unit {m.group(2)!r}; use B, KiB, MiB, GiB, kB, MB, GB")
    if value <= 0:
        raise ValueError(f"{text!r}: a size must be positive")
    if not math.isfinite(value * _UNITS[unit]) or value * _UNITS[unit] >= 2 ** 63:
        raise ValueError(f"{text!r}: larger than any machine's memory or disk")
    return int(value * _UNITS[unit])


def format_bytes(n: int | float) -> str:
    """1536 -> "1.5 KiB"; binary units, as cache sizes are."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" or v == int(v) else f"{v:.1f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def duration(text: Any) -> float:
    """Seconds from 90, "90s", "20m", "1.5h", "7d"."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([smhd]?)\s*", str(text))
    if not m:
        raise ValueError(f"{text!r}: give a duration such as 600, 20m, 1h or 7d")
    try:
        value = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    except ValueError:
        raise ValueError(f"{text!r}: give a duration such as 600, 20m, 1h or 7d") from None
    if value <= 0:
        raise ValueError(f"{text!r}: give a positive duration")
    return value
