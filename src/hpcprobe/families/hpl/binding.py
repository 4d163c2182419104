"""The CPUs each local HPL rank is really bound to, read from /proc while it runs (hpcc and
xhpl print no binding): the rank processes are the launcher's descendants running the
program; each one's rank comes from the variable its launcher sets (Open MPI, Slurm, Hydra)."""

from __future__ import annotations

import os
from pathlib import Path

from hpcprobe.common.cpulist import parse_cpulist
from hpcprobe.tools.inrank import RANK_VARS


def _children(proc: Path) -> dict[int, list[int]]:
    """Parent pid -> child pids of every process visible now."""
    out: dict[int, list[int]] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(d.name))
    return out


def _descendants(root: int, proc: Path) -> list[int]:
    kids = _children(proc)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for k in kids.get(pid, []):
            out.append(k)
            todo.append(k)
    return out


def _rank(env: bytes) -> int | None:
    fields = dict(v.split(b"=", 1) for v in env.split(b"\0") if b"=" in v)
    for var in RANK_VARS:
        value = fields.get(var.encode())
        if value is not None and value.isdigit():
            return int(value)
    return None


def ranks(launcher_pid: int, program: str, proc: Path = Path("/proc")) -> dict[int, list[int]]:
    """Rank -> its allowed CPUs, for the ranks of `program` under the launcher on this host."""
    name = os.path.basename(program)
    out: dict[int, list[int]] = {}
    for pid in _descendants(launcher_pid, proc):
        d = proc / str(pid)
        try:
            if os.path.basename(os.readlink(d / "exe")) != name:
                continue
            rank = _rank((d / "environ").read_bytes())
            status = (d / "status").read_text()
        except OSError:
            continue
        allowed = next((ln.split(":", 1)[1].strip() for ln in status.splitlines()
                        if ln.startswith("Cpus_allowed_list:")), None)
        if rank is not None and allowed:
            out[rank] = parse_cpulist(allowed)
    return out
