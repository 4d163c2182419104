"""Batch schedulers by name, the registry cluster mode will submit through. None is registered
yet: Slurm comes with the cluster issue, as one module that subclasses `Scheduler` and one
`@scheduler` line; the commands will only ever talk to this interface."""

from __future__ import annotations

from abc import ABC, abstractmethod


class Scheduler(ABC):
    """A batch scheduler hpcprobe submits node probes and link tests through."""

    name: str
    description: str

    @classmethod
    @abstractmethod
    def available(cls) -> bool:
        """Whether its client commands are here and its controller answers."""

    @abstractmethod
    def nodes(self, selection: str | None) -> list[str]:
        """The nodes of a partition or node list (None: the current allocation)."""


#: The registered schedulers by name (none yet, see the module's docstring).
SCHEDULERS: dict[str, type[Scheduler]] = {}


def scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Register a scheduler under its name."""
    SCHEDULERS[cls.name] = cls
    return cls
