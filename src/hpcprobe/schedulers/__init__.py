"""Batch schedulers by name, the registry cluster mode submits through: a scheduler is one module
that subclasses `base.Scheduler`, and one line here; commands only ever talk to this interface."""

from __future__ import annotations

from hpcprobe.schedulers import slurm
from hpcprobe.schedulers.base import Job, JobSpec, Scheduler

__all__ = ["SCHEDULERS", "Job", "JobSpec", "Scheduler"]

#: The schedulers by name.
SCHEDULERS: dict[str, type[Scheduler]] = {cls.name: cls for cls in (slurm.Slurm,)}
