"""A figure's history as data: one host's series of one figure (its runs kept as columns, its
change points once searched) and what `history` found over them all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from hpcprobe.history import changes as history

#: Configuration differences named per change point, at most
DIFFERENCES = 3


@dataclass
class Series:
    """One host's series of one figure (its params fixed), oldest first, kept as columns (a
    fleet's history holds hundreds of thousands of runs: their points are made only for what
    is shown), and its change points once searched."""

    label: str
    unit: str
    better: str
    host: str
    params: dict[str, Any]
    runs: Sequence[str]
    created: Sequence[str]
    tags: Sequence[str | None]
    medians: Any  # NumPy arrays of floats
    rel_ci: Any
    disturbed: Sequence[str | None]  # why each run is left out of the search (None: it is not)
    changes: list[history.Change] = field(default_factory=list)

    def point(self, i: int) -> history.Point:
        return history.Point(self.runs[i], self.created[i], self.host, self.tags[i],
                             float(self.medians[i]), float(self.rel_ci[i]), self.disturbed[i])

    @property
    def points(self) -> list[history.Point]:
        return [self.point(i) for i in range(len(self.runs))]

    @cached_property
    def undisturbed(self) -> list[int]:
        """The runs not left out as disturbed."""
        return [i for i, why in enumerate(self.disturbed) if why is None]

    @cached_property
    def kept(self) -> list[int]:
        """The runs searched: undisturbed, a median above 0."""
        return [i for i in self.undisturbed if self.medians[i] > 0]

    @property
    def used(self) -> list[history.Point]:
        return [self.point(i) for i in self.undisturbed]

    def left_out(self) -> int:
        return len(self.runs) - len(self.undisturbed)

    def either_side(self, when: str) -> tuple[history.Point, history.Point] | None:
        """Its last undisturbed run before `when` and its first at or after it (None where it
        has no run on one side)."""
        import bisect

        used = self.undisturbed
        k = bisect.bisect_left(used, bisect.bisect_left(self.created, when))
        return (self.point(used[k - 1]), self.point(used[k])) if 0 < k < len(used) else None

    def searched(self) -> tuple[Any, Any]:
        """What its search reads: the medians and relative CIs of the runs kept."""
        return self.medians[self.kept], self.rel_ci[self.kept]

    def found(self, steps: list[history.Step]) -> None:
        """Its change points from the steps its search found."""
        kept = self.kept
        self.changes = [s.change(self.point(kept[s.cut - 1]), self.point(kept[s.cut]))
                        for s in steps]


@dataclass
class History:
    """What `history` found: the series, per figure the nodes' changes grouped into fleet
    changes, each host's hardware group, and per figure the groups' change points."""

    series: list[Series]
    fleets: dict[str, list[history.FleetChange]]
    groups: dict[str, str]
    group_changes: dict[str, list[history.GroupChange]]


def by_label(series: list[Series]) -> dict[str, list[Series]]:
    """The series of each figure, in the order they come."""
    out: dict[str, list[Series]] = {}
    for s in series:
        out.setdefault(s.label, []).append(s)
    return out


def differences_text(differences: list[tuple[str, list[str]]]) -> str:
    """The first DIFFERENCES configuration differences in a few words."""
    return "; ".join(f"{label} {' -> '.join(values)}" for label, values in
                     differences[:DIFFERENCES]) or "no configuration difference recorded"
