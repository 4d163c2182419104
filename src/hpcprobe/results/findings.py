"""A run's findings as a type: each kind declared once, by the module that finds it (what it
says, how severe it is, which view shows it), a finding stored as the run document's dict
(`benchmark`, `kind`, its data, `message`), and the warning line a finding gives derived here
alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: note: recorded with the run, shown where its view shows it; warning: also a warning line
SEVERITIES = ("note", "warning")


@dataclass(frozen=True)
class Kind:
    """A kind of finding: its name in the document, what it says, its severity and the view
    that shows it."""

    name: str
    says: str
    severity: str = "warning"
    view: str = "the run's warnings"


#: Every kind declared, by name (a kind named twice must be declared the same).
KINDS: dict[str, Kind] = {}


def kind(name: str, says: str, severity: str = "warning",
         view: str = "the run's warnings") -> Kind:
    """Declare a kind of finding (once per module that makes it)."""
    if severity not in SEVERITIES:
        raise AssertionError(f"finding kind {name}: severity {severity!r} is none of "
                             f"{SEVERITIES}")
    new = Kind(name, says, severity, view)
    if KINDS.setdefault(name, new) != new:
        raise AssertionError(f"finding kind {name} is declared twice, differently")
    return new


@dataclass(frozen=True)
class Finding:
    """One finding of a run: the benchmark it is about, its kind, what it says, its data.
    `severity` overrides the kind's for this one (a cache level that agrees is a note);
    `where` names the figure in the warning line where the benchmark alone does not
    (`memory triad 2T`); `warning` replaces the warning's text where it says more than the
    stored message."""

    benchmark: str
    kind: Kind
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)
    severity: str | None = None
    where: str | None = None
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "kind": self.kind.name, **self.data,
                "message": self.message}

    def warning_line(self) -> str | None:
        """The warning it gives (None for a note): the one place warnings come from
        findings."""
        if (self.severity or self.kind.severity) != "warning":
            return None
        return f"{self.where or self.benchmark}: {self.warning or self.message}"


def of_kind(found: Iterable[Mapping[str, Any]], k: Kind,
            benchmark: str | None = None) -> list[Mapping[str, Any]]:
    """A run's stored findings of one kind (of one benchmark), for those who read them back;
    malformed entries (an imported document's) are skipped."""
    return [f for f in found if isinstance(f, Mapping) and f.get("kind") == k.name
            and (benchmark is None or f.get("benchmark") == benchmark)]


#: A device due for a reset or replacement (a GPU's memory errors, a pending row remapping): a
#: campaign drains its node until it is fixed, whatever its figures
HEALTH = kind("health", "a device due for a reset or replacement", "warning",
              "the run's warnings and the cluster report's drain list")
