"""Batch schedulers by name, the registry cluster mode submits through: a scheduler is one module
that subclasses `Scheduler` and registers itself with `@scheduler`; commands only ever talk to
this interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence


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


#: The registered schedulers by name.
SCHEDULERS: dict[str, type[Scheduler]] = {}


def scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Register a scheduler under its name."""
    SCHEDULERS[cls.name] = cls
    return cls


from hpcprobe.schedulers import slurm  # noqa: E402,F401  (registers itself)
