"""Slurm through its client commands (sinfo, scontrol): the nodes of a partition, of a node list
or of the current allocation, each mistake one clear line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from hpcprobe.common.errors import UserError
from hpcprobe.schedulers import Scheduler, scheduler

#: Seconds a client command may take before the controller counts as not answering.
CLIENT_TIMEOUT_S = 30


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no output"


@scheduler
class Slurm(Scheduler):
    name = "slurm"
    description = "Slurm (sinfo, scontrol, sbatch, srun)"

    def _client(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env}
        if not self.prefix and shutil.which(argv[0], path=env.get("PATH")) is None:
            raise UserError(f"Slurm not found: {argv[0]} is not on PATH (install Slurm's "
                            "client commands, or run where they are)")
        try:
            return subprocess.run([*self.prefix, *argv], capture_output=True, text=True,
                                  timeout=CLIENT_TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            raise UserError(f"Slurm: `{' '.join(argv)}` did not answer in {CLIENT_TIMEOUT_S} s; "
                            "is slurmctld running?") from None

    def available(self) -> str | None:
        try:
            r = self._client("sinfo", "-h", "-o", "%P")
        except UserError as exc:
            return str(exc)
        if r.returncode != 0:
            return f"Slurm's controller does not answer: {_first_line(r.stderr)}"
        return None

    def _hostnames(self, nodelist: str) -> list[str]:
        r = self._client("scontrol", "show", "hostnames", nodelist)
        if r.returncode != 0 or not r.stdout.strip():
            raise UserError(f"--nodelist {nodelist!r}: not a Slurm node list "
                            f"({_first_line(r.stderr)}); write e.g. n[1-4],gpu7")
        return r.stdout.split()

    def _known(self, partition: str | None = None) -> list[str]:
        argv = ["sinfo", "-h", "-N", "-o", "%N"] + (["-p", partition] if partition else [])
        r = self._client(*argv)
        if r.returncode != 0:
            raise UserError(f"Slurm: {_first_line(r.stderr)}")
        return sorted(set(r.stdout.split()), key=_natural)

    def nodes(self, partition: str | None = None, nodelist: str | None = None) -> list[str]:
        if nodelist is not None:
            wanted = self._hostnames(nodelist)
            known = set(self._known(partition))
            unknown = [n for n in wanted if n not in known]
            if unknown:
                where = f"partition {partition}" if partition else "the cluster"
                raise UserError(f"--nodelist: {', '.join(unknown[:8])} "
                                f"{'is' if len(unknown) == 1 else 'are'} not in {where}")
            return wanted
        if partition is not None:
            got = self._known(partition)
            if not got:
                parts = self._client("sinfo", "-h", "-o", "%R").stdout.split()
                raise UserError(f"--partition {partition!r} does not exist or has no nodes; "
                                f"partitions: {', '.join(sorted(set(parts))) or 'none'}")
            return got
        allocation = {**os.environ, **self.env}.get("SLURM_JOB_NODELIST")
        if not allocation:
            raise UserError("no nodes given: name a --partition or a --nodelist, or run inside "
                            "a Slurm allocation (salloc)")
        return self._hostnames(allocation)


def _natural(name: str) -> tuple[object, ...]:
    """n2 before n10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
