"""Small readings of the running system (memory available, its cgroup limit, huge pages) shared
by planners."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


def _meminfo_kib(field: str, meminfo: str) -> int | None:
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: cgroup v1 states "no limit" as LONG_MAX rounded down to a page; no memory is this large.
UNLIMITED = 1 << 60


@dataclass(frozen=True)
class MemoryLimit:
    """The tightest memory limit of a process's cgroups: the limit, what is charged to that
    cgroup now, and the file that sets it."""

    limit: int
    usage: int
    where: str

    @property
    def headroom(self) -> int:
        return max(0, self.limit - self.usage)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None  # absent, unreadable, or v2's "max"


def _limits(base: Path, rel: str, limit: str, usage: str) -> list[MemoryLimit]:
    """The limits set on the cgroup `rel` under `base` and on each of its ancestors."""
    out = []
    d = base / rel.strip("/")
    while True:
        lim, used = _read_int(d / limit), _read_int(d / usage)
        if lim is not None and used is not None and lim < UNLIMITED:
            out.append(MemoryLimit(lim, used, str(d / limit)))
        if d == base or base not in d.parents:
            return out
        d = d.parent


def cgroup_memory_limit(proc_cgroup: str = "/proc/self/cgroup",
                        root: str = "/sys/fs/cgroup") -> MemoryLimit | None:
    """The limit that leaves this process the least memory, over its cgroup and the cgroups
    above it (a Slurm job's `--mem`, a container's): cgroup v2's memory.max and memory.current,
    v1's memory.limit_in_bytes and memory.usage_in_bytes; None where none is set or readable."""
    try:
        text = Path(proc_cgroup).read_text()
    except OSError:
        return None
    found: list[MemoryLimit] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":  # v2: at the root, or beside v1 (hybrid) under unified/
            for base in (Path(root), Path(root) / "unified"):
                if (base / "cgroup.controllers").exists():
                    found += _limits(base, rel, "memory.max", "memory.current")
                    break
        elif "memory" in controllers.split(","):
            found += _limits(Path(root) / controllers, rel, "memory.limit_in_bytes",
                             "memory.usage_in_bytes")
    return min(found, key=lambda m: m.headroom, default=None)


def mem_available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes, or None when the kernel does not say."""
    return _meminfo_kib("MemAvailable", meminfo)


def mem_total_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemTotal in bytes, or None when the kernel does not say."""
    return _meminfo_kib("MemTotal", meminfo)


def _lower(node: int | None, cgroup: int | None) -> int | None:
    return node if cgroup is None else cgroup if node is None else min(node, cgroup)


def usable_total_bytes() -> int | None:
    """The memory this process may have in all: MemTotal, or its cgroup's limit where lower."""
    lim = cgroup_memory_limit()
    return _lower(mem_total_bytes(), None if lim is None else lim.limit)


def usable_available_bytes() -> int | None:
    """The memory this process may take now: MemAvailable, or what its cgroup's limit leaves
    where that is less."""
    lim = cgroup_memory_limit()
    return _lower(mem_available_bytes(), None if lim is None else lim.headroom)


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
