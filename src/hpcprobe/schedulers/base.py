"""The batch scheduler interface cluster mode submits through: a job's spec, the job as the
driver follows it, and what a scheduler answers (nodes, submission, states, drain)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Job states after which a job runs no more.
FINISHED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                      "PREEMPTED", "BOOT_FAIL", "DEADLINE", "GONE"})


@dataclass
class JobSpec:
    """One job: `argv` run once on the first node (mpi None), or as tasks_per_node MPI ranks on
    every node through the scheduler's launcher and that MPI plugin ("" its default)."""

    name: str
    nodes: list[str]
    argv: list[str]
    output: Path  # stdout and stderr
    time_limit_s: float
    tasks_per_node: int = 1
    mpi: str | None = None
    partition: str | None = None  # None: the scheduler's default
    env: dict[str, str] = field(default_factory=dict)  # added to the job's environment
    gpus_per_node: int = 0  # GPUs asked for on each node (Slurm GRES); 0: none asked


@dataclass
class Job:
    """A submitted job as the driver follows it."""

    spec: JobSpec
    id: str
    state: str = "PENDING"
    reason: str = ""
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None  # when first seen running
    never: bool = False  # pending for a reason that no wait resolves (a limit, an account)
    handle: Any = None  # the scheduler's own (e.g. a process)
    #: when the driver asked an overdue job for its stacks, and how long its output was then
    stacks_asked: tuple[float, int] | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


class Scheduler(ABC):
    """A batch scheduler hpcprobe finds nodes and submits through. `prefix` runs its client
    commands through another (e.g. nsenter into a test cluster's namespace), `env` adds to
    their environment (e.g. SLURM_CONF)."""

    name: str
    description: str

    def __init__(self, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None):
        self.prefix = list(prefix)
        self.env = dict(env or {})

    @abstractmethod
    def available(self) -> str | None:
        """None where its clients are here and its controller answers; else why not."""

    @abstractmethod
    def nodes(self, partition: str | None = None, nodelist: str | None = None) -> list[str]:
        """The nodes of a partition, of a node list, or (neither) of the current allocation."""

    @abstractmethod
    def submit(self, spec: JobSpec) -> Job:
        """Submit a job (UserError with the scheduler's reason when it is refused)."""

    @abstractmethod
    def poll(self, jobs: Sequence[Job]) -> None:
        """Bring the jobs' states up to date (and `started` when first seen running)."""

    @abstractmethod
    def cancel(self, jobs: Sequence[Job]) -> None:
        """Cancel the jobs that still run or wait."""

    @abstractmethod
    def stacks(self, jobs: Sequence[Job]) -> None:
        """Ask the jobs' hpcprobe processes to print their threads' stacks into their output
        (SIGUSR1), before an overdue job is cancelled."""

    @abstractmethod
    def cpus(self, nodes: Sequence[str]) -> dict[str, int]:
        """Each node's CPU count as the scheduler knows it."""

    def broadcast(self, path: Path, dest: Path, nodes: Sequence[str]) -> str:
        """Copy `path` to `dest` on each of `nodes` at once where this scheduler can; how it
        was done, or why not (each node's job then copies it)."""
        return "each node's first job copies it"

    @abstractmethod
    def drain_argv(self, node: str, reason: str) -> list[str]:
        """The command that takes a node out of service with a reason (printed for the user)."""

    @abstractmethod
    def drain(self, node: str, reason: str) -> None:
        """Take the node out of service (HpcprobeError with the scheduler's reason if not)."""
