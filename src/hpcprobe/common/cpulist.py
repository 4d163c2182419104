"""Linux cpulist strings ("0-3,8") and hwloc bitmap strings ("0xffffffff,0x0000000f")."""

from __future__ import annotations

from collections.abc import Iterable


def parse_cpulist(text: str) -> list[int]:
    """Parse "0-3,8,10-11" into [0, 1, 2, 3, 8, 10, 11], keeping the order given.

    Raises ValueError on malformed input.
    """
    out: list[int] = []
    text = text.strip()
    if not text:
        return out
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty item in cpu list {text!r}")
        if "-" in part:
            lo_s, _, hi_s = part.partition("-")
            lo, hi = int(lo_s), int(hi_s)
            if lo < 0 or hi < lo:
                raise ValueError(f"bad range {part!r} in cpu list {text!r}")
            out.extend(range(lo, hi + 1))
        else:
            v = int(part)
            if v < 0:
                raise ValueError(f"negative CPU {part!r} in cpu list {text!r}")
            out.append(v)
    return out


def format_cpulist(cpus: Iterable[int]) -> str:
    """Compress sorted CPU numbers into "0-3,8"; the input order is not kept."""
    vals = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


def parse_hwloc_bitmap(text: str) -> set[int] | None:
    """Parse hwloc's bitmap ("0xffffffff,0x00000003": 32-bit words, most significant first).

    Returns None for an infinite set ("0xf...f,..."), which hwloc uses for "all".
    Raises ValueError on malformed input.
    """
    words = [w.strip() for w in text.split(",")]
    if not words or not all(w.lower().startswith("0x") for w in words):
        raise ValueError(f"not an hwloc bitmap: {text!r}")
    if words[0].lower() == "0xf...f":
        return None
    value = 0
    for w in words:
        value = (value << 32) | int(w[2:], 16)
    return {bit for bit in range(value.bit_length()) if value >> bit & 1}
