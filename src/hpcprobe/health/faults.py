"""Every fault a check reads without a figure, from the sources registered in `SOURCES`: each
says what kind of fault it finds (its code and action) and reads it from what the check saw.
The check walks the registry; a new source is a function and one line here."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import Reference
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import facts
from hpcprobe.results.findings import HEALTH, Kind
from hpcprobe.results.model import Run


@dataclass(frozen=True)
class Seen:
    """What a check saw of its node: its run (state, figures, errors, and the faults its node
    facts found), the reference it was judged against, the counters that rose since the last
    check, and its temporary directory with the least free space a job needs (and where that
    is set)."""

    run: Run
    reference: Reference | None
    rose: list[str]
    tmp: str
    tmp_free: tuple[int, str]


def _state(seen: Seen) -> list[str]:
    """The node's state where it differs from its reference's."""
    if seen.reference is None:
        return []
    return health.differences(health.state_of(seen.run), seen.reference.state)


def _scratch(seen: Seen) -> list[str]:
    """The temporary directory with less free space than a job needs."""
    free = shutil.disk_usage(seen.tmp).free
    need, where = seen.tmp_free
    return [] if free >= need else [
        f"{seen.tmp}: {format_bytes(free)} free, less than the {format_bytes(need)} a job "
        f"needs ({where})"]


@dataclass(frozen=True)
class Source:
    """One source of faults: the kind it finds, and how it reads them from what was seen."""

    kind: Kind
    read: Callable[[Seen], list[str]]


#: The check's sources of faults, in the order its reasons are given
SOURCES: tuple[Source, ...] = (
    Source(health.STATE, _state),
    Source(health.COUNTER, lambda seen: seen.rose),
    Source(HEALTH, lambda seen: facts.faults(seen.run.provenance)),
    Source(health.SCRATCH, _scratch),
    Source(health.FAILED, lambda seen: seen.run.errors),
)


def faults(seen: Seen) -> list[health.Fault]:
    """Every registered source's faults, each with its kind."""
    return [(s.kind, line) for s in SOURCES for line in s.read(seen)]
