"""Steal time: the CPU time the hypervisor gave to others while this guest's CPUs wanted to run
(the eighth field of a `cpuN` line of /proc/stat). A guest whose host is oversubscribed measures
its neighbours' load as well as its own; the share of its CPUs' time taken so says by how much.

Other work: the CPUs' busy time (user to softirq) that this process and its children did not
spend, read the same way. A node whose CPUs run another job, a daemon or a second benchmark
while one is measured gives figures of a shared machine; a check must not fail it for them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.results.findings import kind

#: The share of the CPUs' time stolen while a benchmark ran from which it is a warning: at 1 %
#: figures of a few % spread (the CI targets) may be the host's.
WARN = 0.01


#: The share of the CPUs' time other processes used while a benchmark ran from which its
#: figures are not judged: a daemon waking up takes well under 1 %; a second STREAM on one of
#: two CPUs takes 50 %.
OTHERS = 0.10
#: Less CPU time than this between two readings is not read for others' share: /proc/stat and
#: the process's times count in ticks (10 ms), a few of which would then be a large share
MIN_WINDOW_S = 0.5

#: The finding: the hypervisor took CPU time from the guest while a benchmark ran
STEAL = kind("steal", "the hypervisor took this guest's CPU time while the benchmark ran: its "
             "figures carry the host's other load", code="HP102", action="re-measure")
#: The finding: other processes ran on the benchmark's CPUs while it ran
BUSY = kind("busy", "other processes used this node's CPUs while the benchmark ran: its "
            "figures are those of a shared node", code="HP103", action="re-measure")


def warns(percent: float) -> bool:
    """Whether a stored steal share (%) is one a run warned of."""
    return percent >= 100 * WARN


def busy(percent: float) -> bool:
    """Whether a stored share (%) of others' CPU time left a benchmark's figures unjudged."""
    return percent >= 100 * OTHERS


@dataclass(frozen=True)
class Times:
    """Jiffies of some CPUs, summed: stolen and all (user to steal; guest time is within
    user), busy (user, nice, system, irq, softirq); and the CPU seconds this process and its
    waited-for children had spent (`own`, read with them by `read`)."""

    steal: int
    total: int
    busy: int = 0
    own: float = 0.0


#: A Slurm job's cgroup on a path of this process's cgroup (v2: .../job_12/step_0/...; v1:
#: /slurm/uid_0/job_12/...)
_JOB = re.compile(r"^(.*/job_\d+)(?:/|$)")


def job_seconds(proc: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The CPU seconds of every process of the Slurm job this process runs in (its job cgroup:
    the ranks an `srun` inside the job started, which are not this process's children, are
    the job's own work, not others'); None outside a Slurm job's cgroup."""
    try:
        lines = Path(proc).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        controllers, _, path = line.partition(":")[2].partition(":")
        m = _JOB.match(path)
        if m is None or controllers not in ("", "cpu,cpuacct", "cpuacct,cpu", "cpuacct"):
            continue
        v2 = controllers == ""
        where = Path(root) / ("" if v2 else controllers) / m.group(1).lstrip("/")
        try:
            text = (where / ("cpu.stat" if v2 else "cpuacct.usage")).read_text()
        except OSError:
            continue
        if not v2:
            return int(text.split()[0]) / 1e9
        usage = re.search(r"^usage_usec (\d+)$", text, re.M)
        if usage:
            return int(usage.group(1)) / 1e6
    return None


def own_seconds() -> float:
    """The CPU seconds of this process (every thread) and of its children it waited for; in a
    Slurm job, of every process of the job."""
    t = os.times()
    mine = t.user + t.system + t.children_user + t.children_system
    return max(mine, job_seconds() or 0.0)


def parse(text: str, cpus: Iterable[int]) -> Times | None:
    """The times of these CPUs in a /proc/stat text; None where a CPU's line is missing or
    has no steal field (a kernel before 2.6.11)."""
    lines = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit():
            lines[int(name[3:])] = rest.split()
    steal = total = busy = 0
    for cpu in cpus:
        fields = lines.get(cpu)
        if fields is None or len(fields) < 8 or not all(f.isdigit() for f in fields[:8]):
            return None
        steal += int(fields[7])
        total += sum(int(f) for f in fields[:8])
        busy += sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return Times(steal, total, busy)


def read(cpus: Iterable[int] | None = None, path: str = "/proc/stat") -> Times | None:
    """These CPUs' times now (default: the CPUs this process may run on); None where unreadable."""
    own = own_seconds()
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    got = parse(text, sorted(os.sched_getaffinity(0) if cpus is None else cpus))
    return None if got is None else Times(got.steal, got.total, got.busy, own)


def share(before: Times | None, after: Times | None) -> float | None:
    """The share of the CPUs' time stolen between the two readings; None without both or where
    no time passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(0, after.steal - before.steal) / (after.total - before.total)


def others(before: Times | None, after: Times | None) -> float | None:
    """The share of the CPUs' time between the two readings that other processes used (their
    busy time less this process's own); None without both, or where the window is shorter
    than MIN_WINDOW_S of CPU time (the counters tick every 10 ms: a shorter one is noise)."""
    tick = os.sysconf("SC_CLK_TCK")
    if before is None or after is None or after.total - before.total < MIN_WINDOW_S * tick:
        return None
    busy = (after.busy - before.busy) / tick - (after.own - before.own)
    return max(0.0, busy) / ((after.total - before.total) / tick)
