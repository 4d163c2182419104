"""Ceilings as data: what the hardware allows a figure, declared by the source that knows it
(the DIMMs, the FLOP model, HPL's Rpeak, the cache ports, a GPU's memory and GEMM peaks), never
worked out by the code that picks or shows the figure. A source declares a `Bound` per figure
it bounds; the registry gathers them (machine facts and families alike) and every headline,
and every other figure of a run, gets its ceiling from them (`of`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hpcprobe.results.model import Metric, Run


@dataclass(frozen=True)
class Ceiling:
    """A figure's ceiling in the figure's unit, and how it was made; `value` None: the source
    bounds such figures but not this one here, and `source` says why (said beside the figure)."""

    value: float | None
    source: str


@dataclass(frozen=True)
class Bound:
    """A ceiling source's declaration: the figures (benchmark, name) it bounds and how to read
    one figure's ceiling from its run (None: this source says nothing of that figure)."""

    benchmark: str
    name: str
    of: Callable[[Run, Metric], Ceiling | None]


def of(run: Run, metric: Metric, bounds: Iterable[Bound]) -> Ceiling | None:
    """The figure's ceiling: the first source with a value for it, else the first that says
    why it has none, else None (nothing bounds such figures)."""
    said: Ceiling | None = None
    for b in bounds:
        if (b.benchmark, b.name) != (metric.benchmark, metric.name):
            continue
        c = b.of(run, metric)
        if c is not None and c.value is not None:
            return c
        said = said or c
    return said
