"""Small readings of the running system (memory available) shared by planners."""

from __future__ import annotations

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


def huge_page_bytes(meminfo: str = "/proc/meminfo") -> int:
    """The size of a (transparent) huge page: Hugepagesize, 2 MiB when the kernel does not say."""
    return _meminfo_kib("Hugepagesize", meminfo) or 2 << 20
