"""Slurm through its client commands (sinfo, scontrol): the nodes of a partition, of a node list
or of the current allocation, each mistake one clear line."""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcprobe.common.errors import HpcprobeError, OptionError, UserError
from hpcprobe.common.names import natural
from hpcprobe.schedulers.base import Job, JobSpec, Scheduler

#: Reasons of a pending job that no wait resolves: the request breaks a limit or a permission.
NEVER = frozenset({"PartitionTimeLimit", "PartitionNodeLimit", "PartitionConfig",
                   "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSNotAllowed",
                   "BadConstraints", "QOSMaxWallDurationPerJobLimit",
                   "AssocMaxWallDurationPerJobLimit", "QOSMaxNodePerJobLimit"})
#: Seconds a client command may take before the controller counts as not answering.
CLIENT_TIMEOUT_S = 30
#: Seconds a broadcast to the nodes (hpcprobe's bundle, a few hundred MiB) may take
BROADCAST_TIMEOUT_S = 900
#: Seconds the controller is given to pass on a request for a job's stacks.
STACKS_TIMEOUT_S = 5


def _mpi_step(spec: JobSpec) -> list[str]:
    """srun's options for an MPI job's ranks: its MPI plugin, and a rank that dies ends the
    step (srun's default leaves the others waiting for it in their next collective)."""
    return ["--kill-on-bad-exit=1", *([f"--mpi={spec.mpi}"] if spec.mpi else [])]


def _gpus(spec: JobSpec) -> list[str]:
    """The GPUs a job asks for on each node: without them a GRES-managed node hides its GPUs
    from the job (ConstrainDevices), --exclusive or not."""
    return [f"--gpus-per-node={spec.gpus_per_node}"] if spec.gpus_per_node else []


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no output"


class Slurm(Scheduler):
    name = "slurm"
    description = "Slurm (sinfo, scontrol, sbatch, srun)"

    def __init__(self, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None):
        super().__init__(prefix, env)
        self._allocations: dict[str, frozenset[str]] = {}  # node list -> its host names

    @property
    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _client(self, *argv: str, timeout: float | None = None
                ) -> subprocess.CompletedProcess[str]:
        env, timeout = self._env, timeout or CLIENT_TIMEOUT_S
        if not self.prefix and shutil.which(argv[0], path=env.get("PATH")) is None:
            raise UserError(f"Slurm not found: {argv[0]} is not on PATH (install Slurm's "
                            "client commands, or run where they are)")
        try:
            return subprocess.run([*self.prefix, *argv], capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise UserError(f"Slurm: `{' '.join(argv)}` did not answer in {timeout:g} s; "
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
            raise OptionError(f"<nodelist> {nodelist!r}: not a Slurm node list "
                              f"({_first_line(r.stderr)}); write e.g. n[1-4],gpu7")
        return r.stdout.split()

    def _known(self, partition: str | None = None) -> list[str]:
        argv = ["sinfo", "-h", "-N", "-o", "%N"] + (["-p", partition] if partition else [])
        r = self._client(*argv)
        if r.returncode != 0:
            raise UserError(f"Slurm: {_first_line(r.stderr)}")
        return sorted(set(r.stdout.split()), key=natural)

    def nodes(self, partition: str | None = None, nodelist: str | None = None) -> list[str]:
        if nodelist is not None:
            wanted = self._hostnames(nodelist)
            known = set(self._known(partition))
            unknown = [n for n in wanted if n not in known]
            if unknown:
                where = f"partition {partition}" if partition else "the cluster"
                raise OptionError(f"<nodelist>: {', '.join(unknown[:8])} "
                                  f"{'is' if len(unknown) == 1 else 'are'} not in {where}")
            return wanted
        if partition is not None:
            got = self._known(partition)
            if not got:
                parts = self._client("sinfo", "-h", "-o", "%R").stdout.split()
                raise OptionError(f"<partition> {partition!r} does not exist or has no nodes; "
                                  f"partitions: {', '.join(sorted(set(parts))) or 'none'}")
            return got
        allocation = self._env.get("SLURM_JOB_NODELIST")
        if not allocation:
            raise OptionError("no nodes given: name a <partition> or a <nodelist>, or run inside "
                              "a Slurm allocation (salloc)")
        return self._hostnames(allocation)

    # -- jobs: sbatch from a login node; srun steps inside an allocation (salloc, a batch job)

    def _in_allocation(self, nodes: Sequence[str]) -> bool:
        """Inside an allocation that holds these nodes: jobs become srun steps of it."""
        mine = self._env.get("SLURM_JOB_NODELIST")
        if not (self._env.get("SLURM_JOB_ID") and mine):
            return False
        if mine not in self._allocations:  # once, not once per job
            self._allocations[mine] = frozenset(self._hostnames(mine))
        return set(nodes) <= self._allocations[mine]

    def submit(self, spec: JobSpec) -> Job:
        if self._in_allocation(spec.nodes):
            return self._step(spec)
        script = spec.output.with_suffix(".sh")
        run = spec.argv if spec.mpi is None else ["srun", *_mpi_step(spec), *spec.argv]
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.env.items())
        # nothing free-form in it unquoted: a name with a newline would be a command (repr
        # writes a newline as \n)
        script.write_text(f"#!/bin/sh\n# written by hpcprobe for job {spec.name!r}\n{exports}"
                          f"exec {shlex.join(run)}\n")
        r = self._client("sbatch", "--parsable", "--job-name", spec.name,
                         "--nodes", str(len(spec.nodes)), "--nodelist", ",".join(spec.nodes),
                         "--ntasks-per-node", str(spec.tasks_per_node), "--exclusive",
                         *_gpus(spec),
                         "--time", str(max(1, math.ceil(spec.time_limit_s / 60))),
                         *(["--partition", spec.partition] if spec.partition else []),
                         "--output", str(spec.output), str(script))
        if r.returncode != 0 or not r.stdout.strip():
            raise UserError(f"sbatch refused {spec.name}: {_first_line(r.stderr)}")
        return Job(spec, r.stdout.strip().split(";")[0])

    def _step(self, spec: JobSpec) -> Job:
        argv = ["srun", "--nodes", str(len(spec.nodes)), "--nodelist", ",".join(spec.nodes),
                "--ntasks-per-node", str(spec.tasks_per_node), "--exact", *_gpus(spec),
                *(_mpi_step(spec) if spec.mpi is not None else []), *spec.argv]
        with open(spec.output, "w") as out:
            p = subprocess.Popen([*self.prefix, *argv], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**self._env, **spec.env},
                                 start_new_session=True)
        return Job(spec, f"step-{p.pid}", state="RUNNING", handle=p)

    def poll(self, jobs: Sequence[Job]) -> None:
        batch = [j for j in jobs if j.handle is None and not j.finished]
        for j in jobs:
            if j.handle is not None and not j.finished:
                rc = j.handle.poll()
                if rc is not None:
                    j.state = "COMPLETED" if rc == 0 else "FAILED"
                    j.reason = f"exit status {rc}" if rc else ""
        for chunk in range(0, len(batch), 500):
            part = batch[chunk:chunk + 500]
            r = self._client("squeue", "-h", "-t", "all", "-j", ",".join(j.id for j in part),
                             "-o", "%i|%T|%r")
            seen = {}
            for line in r.stdout.splitlines():
                fields = line.strip().split("|")
                if len(fields) == 3:
                    seen[fields[0]] = (fields[1], fields[2])
            for j in part:
                # a job gone from the controller's memory (MinJobAge) has finished
                j.state, reason = seen.get(j.id, ("GONE", ""))
                j.reason = "" if reason in ("None", "(null)") else reason
                j.never = j.state == "PENDING" and j.reason in NEVER
        now = time.monotonic()
        for j in jobs:
            if j.started is None and j.state not in ("PENDING", "CONFIGURING"):
                j.started = now

    def _signal(self, jobs: Sequence[Job], sig: signal.Signals, *scancel: str,
                timeout: float | None = None) -> list[Job]:
        """`sig` to each unfinished job (a step: its srun, which forwards it to the tasks; a
        batch job: scancel with these options); the jobs signalled."""
        live = [j for j in jobs if not j.finished]
        for j in live:
            if j.handle is not None:
                try:
                    os.killpg(j.handle.pid, sig)
                except ProcessLookupError:
                    pass
        ids = [j.id for j in live if j.handle is None]
        if ids:
            self._client("scancel", *scancel, *ids, timeout=timeout)
        return live

    def cancel(self, jobs: Sequence[Job]) -> None:
        for j in self._signal(jobs, signal.SIGTERM):  # srun cancels its step on SIGTERM
            j.state = "CANCELLED"

    def stacks(self, jobs: Sequence[Job]) -> None:
        # a batch job's script process: hpcprobe (the script execs it), or srun forwarding it.
        # Only a request: where the controller is slow to answer (busy, restarting), the job
        # is cancelled without its stacks.
        try:
            self._signal(jobs, signal.SIGUSR1, "--batch", "--signal=USR1",
                         timeout=STACKS_TIMEOUT_S)
        except UserError:
            pass

    def cpus(self, nodes: Sequence[str]) -> dict[str, int]:
        r = self._client("sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %c")
        out = {}
        for line in r.stdout.splitlines():
            name, _, count = line.partition(" ")
            if count.strip().isdigit():
                out[name] = int(count)
        return out

    def broadcast(self, path: Path, dest: Path, nodes: Sequence[str]) -> str:
        """Inside an allocation holding the nodes: its directory made on each (one step), then
        one `sbcast` (Slurm's tree broadcast; `BcastParameters=Compression=lz4` in slurm.conf
        compresses it). A refusal is said and each node's job copies it instead."""
        if not self._in_allocation(nodes):
            return "no allocation: each node's first job copies it"
        # sbcast sends to every node of the allocation, so each of them gets the directory
        hosts = sorted(self._allocations[self._env["SLURM_JOB_NODELIST"]], key=natural)
        mkdir = self._client("srun", "--nodes", str(len(hosts)), "--nodelist", ",".join(hosts),
                             "--ntasks-per-node", "1", "mkdir", "-p", str(dest.parent),
                             timeout=BROADCAST_TIMEOUT_S)
        r = mkdir if mkdir.returncode != 0 else self._client(
            "sbcast", "--force", str(path), str(dest), timeout=BROADCAST_TIMEOUT_S)
        if r.returncode != 0:
            return f"sbcast failed ({_first_line(r.stderr)}): each node's first job copies it"
        return f"one sbcast to the allocation's {len(hosts)} node(s)"

    def drain_argv(self, node: str, reason: str) -> list[str]:
        return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]

    def drain(self, node: str, reason: str) -> None:
        r = self._client(*self.drain_argv(node, reason))
        if r.returncode != 0:
            raise HpcprobeError(f"scontrol could not drain {node}: {_first_line(r.stderr)}")

    def _show_node(self, node: str) -> str:
        r = self._client("scontrol", "-o", "show", "node", node)
        if r.returncode != 0:
            raise HpcprobeError(f"scontrol could not show node {node}: "
                                f"{_first_line(r.stderr)}")
        return str(r.stdout)

    def state(self, node: str) -> str:
        """The node's state as Slurm shows it (IDLE, ALLOCATED, MIXED+DRAIN, ...)."""
        state = re.search(r"\bState=(\S+)", self._show_node(node))
        return state.group(1).upper() if state else ""

    def drained(self, node: str) -> str | None:
        """The reason of the node's drain (its `Reason=`, without the `[user@time]` Slurm
        adds), "" for a drain without one, None where the node is not drained or draining."""
        shown = self._show_node(node)
        state = re.search(r"\bState=(\S+)", shown)
        if state is None or "DRAIN" not in state.group(1).upper():
            return None
        why = re.search(r"\bReason=(.*?)(?: \[[^\]]*@[^\]]*\])?(?=\s+\w+=|\s*$)", shown)
        return why.group(1).strip() if why else ""

    def resume(self, node: str) -> None:
        r = self._client("scontrol", "update", f"NodeName={node}", "State=RESUME")
        if r.returncode != 0:
            raise HpcprobeError(f"scontrol could not resume {node}: {_first_line(r.stderr)}")
