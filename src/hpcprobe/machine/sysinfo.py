"""Small readings of the running system (memory available, huge pages) shared by planners."""

from __future__ import annotations

import re
from pathlib import Path


def _meminfo_kib(field: str, meminfo: str) -> int | None:
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def mem_available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes, or None when the kernel does not say."""
    return _meminfo_kib("MemAvailable", meminfo)


def mem_total_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemTotal in bytes, or None when the kernel does not say."""
    return _meminfo_kib("MemTotal", meminfo)


def huge_page_bytes(meminfo: str = "/proc/meminfo") -> int:
    """The size of a (transparent) huge page: Hugepagesize, 2 MiB when the kernel does not say."""
    return _meminfo_kib("Hugepagesize", meminfo) or 2 << 20


THP_SYSFS = "/sys/kernel/mm/transparent_hugepage"


def bracketed(text: str | None) -> str | None:
    """The selected value of a sysfs choice list: "always [madvise] never" -> "madvise"."""
    if text is None:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip() or None


def sysfs_choice(path: str) -> str | None:
    """The selected value of a sysfs choice list, or None where the file cannot be read."""
    try:
        return bracketed(Path(path).read_text())
    except OSError:
        return None


def huge_page_shortfall(ring_bytes: int, huge_page: int, thp: str | None,
                        defrag: str | None) -> str:
    """Why a mapping that asked for transparent huge pages did not get them all, in words."""
    if ring_bytes < huge_page:
        return (f"the ring is smaller than one {huge_page >> 20} MiB huge page, and THP backs "
                "only whole aligned huge pages")
    if thp == "never":
        return f"transparent huge pages are disabled ({THP_SYSFS}/enabled: never)"
    if thp is None:
        return "this kernel has no transparent huge pages"
    return (f"THP is '{thp}' with defrag '{defrag}', so the kernel found too few free "
            f"{huge_page >> 20} MiB blocks (fragmented memory; as root, "
            "`echo 1 > /proc/sys/vm/compact_memory` may help)")
