"""Steal time: the CPU time the hypervisor gave to others while this guest's CPUs wanted to run
(the eighth field of a `cpuN` line of /proc/stat). A guest whose host is oversubscribed measures
its neighbours' load as well as its own; the share of its CPUs' time taken so says by how much."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.results.findings import kind

#: The share of the CPUs' time stolen while a benchmark ran from which it is a warning: at 1 %
#: figures of a few % spread (the CI targets) may be the host's.
WARN = 0.01


#: The finding: the hypervisor took CPU time from the guest while a benchmark ran
STEAL = kind("steal", "the hypervisor took this guest's CPU time while the benchmark ran: its "
             "figures carry the host's other load")


def warns(percent: float) -> bool:
    """Whether a stored share (%) is one a run warned of."""
    return percent >= 100 * WARN


@dataclass(frozen=True)
class Times:
    """Jiffies of some CPUs, summed: stolen and all (user to steal; guest time is within user)."""

    steal: int
    total: int


def parse(text: str, cpus: Iterable[int]) -> Times | None:
    """The times of these CPUs in a /proc/stat text; None where a CPU's line is missing or
    has no steal field (a kernel before 2.6.11)."""
    lines = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            lines[int(name[3:])] = rest.split()
    steal = total = 0
    for cpu in cpus:
        fields = lines.get(cpu)
        if fields is None or len(fields) < 8 or not all(f.isdigit() for f in fields[:8]):
            return None
        steal += int(fields[7])
        total += sum(int(f) for f in fields[:8])
    return Times(steal, total)


def read(cpus: Iterable[int] | None = None, path: str = "/proc/stat") -> Times | None:
    """These CPUs' times now (default: the CPUs this process may run on); None where unreadable."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    return parse(text, sorted(os.sched_getaffinity(0) if cpus is None else cpus))


def share(before: Times | None, after: Times | None) -> float | None:
    """The share of the CPUs' time stolen between the two readings; None without both or where
    no time passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(0, after.steal - before.steal) / (after.total - before.total)
