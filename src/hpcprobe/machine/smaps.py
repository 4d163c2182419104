"""Which page size a mapping really got: /proc/self/smaps, read without privileges."""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+)\s")
_FIELD = re.compile(r"^(\w+):\s+(\d+) kB")


def mapping_pages(smaps: str, addr: int) -> tuple[int, int] | None:
    """(resident bytes, bytes in transparent huge pages) of the mapping containing `addr`, or
    None when no mapping of `smaps` contains it."""
    inside = False
    rss = huge = 0
    for line in smaps.splitlines():
        head = _HEADER.match(line)
        if head:
            if inside:
                break
            inside = int(head.group(1), 16) <= addr < int(head.group(2), 16)
            continue
        if inside:
            field = _FIELD.match(line)
            if field and field.group(1) == "Rss":
                rss = int(field.group(2)) * 1024
            elif field and field.group(1) == "AnonHugePages":
                huge = int(field.group(2)) * 1024
    return (rss, huge) if inside else None


#: What page_label says, as a JSON Schema (the result schema's for a figure's page size)
PAGE_SIZE_VALUES = {"type": "string", "pattern": "^([0-9]+(KiB|MiB|GiB)|mixed)$"}


def page_label(rss: int, huge: int, base_page: int, huge_page: int) -> tuple[str, float]:
    """The page size to state for a mapping, and the fraction of it in huge pages: the huge page
    size only when every resident byte is in huge pages, the base size when none is, else
    'mixed'. Never a size that was not granted."""
    if rss and huge >= rss:
        return _size(huge_page), 1.0
    if huge == 0:
        return _size(base_page), 0.0
    return "mixed", round(huge / rss, 4)


def _size(n: int) -> str:
    return f"{n >> 20}MiB" if n >= 1 << 20 else f"{n >> 10}KiB"


def read_self() -> str:
    return Path("/proc/self/smaps").read_text()
