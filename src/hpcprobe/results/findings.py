"""A run's findings as a type: each kind declared once, by the module that finds it (what it
says, how severe it is, which view shows it), a finding stored as the run document's dict
(`benchmark`, `kind`, its data, `message`), and the warning line a finding gives derived here
alone."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: note: recorded with the run, shown where its view shows it; warning: also a warning line
SEVERITIES = ("note", "warning")

#: What a finding asks of the operator, the strongest first
ACTIONS = {
    "drain": "take the node out of service until an administrator has looked (the scheduler "
             "drains it)",
    "reboot": "reboot the node (a state only a reboot clears)",
    "reset GPU": "reset the GPU (nvidia-smi -r) or replace it",
    "re-measure": "measure again (a quiet node, known-good partners): the figure is in doubt, "
                  "not the node",
    "watch": "nothing now; look at it if it persists or spreads",
    "none": "information: nothing to do",
}

#: Codes once given to kinds that are gone: never given again (code -> what it was)
RETIRED: dict[str, str] = {}


@dataclass(frozen=True)
class Kind:
    """A kind of finding: its name in the document, what it says, its severity, the view
    that shows it, its stable code (HPnnn: documented, never reused) and the action it asks
    for (one of ACTIONS)."""

    name: str
    says: str
    severity: str = "warning"
    view: str = "the run's warnings"
    code: str = ""
    action: str = "none"

    @property
    def tag(self) -> str:
        """Its code and action as a warning line ends: `[HP102 re-measure]`, `[HP209]`
        (`TAG` finds it)."""
        return f"[{self.code}{'' if self.action == 'none' else ' ' + self.action}]"


#: The code and action a finding's warning line ends in (`Kind.tag`), for a view that cuts it
TAG = re.compile(r" \[HP\d{3}( [a-zA-Z -]+)?\]$")


#: Every kind declared, by name (a kind named twice must be declared the same).
KINDS: dict[str, Kind] = {}


def kind(name: str, says: str, severity: str = "warning", view: str = "the run's warnings",
         *, code: str, action: str) -> Kind:
    """Declare a kind of finding (once per module that makes it), with its code and action."""
    if severity not in SEVERITIES or action not in ACTIONS:
        raise AssertionError(f"finding kind {name}: severity {severity!r} or action "
                             f"{action!r} is none of {SEVERITIES} and {tuple(ACTIONS)}")
    if not re.fullmatch(r"HP\d{3}", code) or code in RETIRED or any(
            k.code == code and k.name != name for k in KINDS.values()):
        raise AssertionError(f"finding kind {name}: code {code!r} is not HPnnn, is retired, "
                             "or is another kind's")
    new = Kind(name, says, severity, view, code, action)
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
        return {"benchmark": self.benchmark, "kind": self.kind.name, "code": self.kind.code,
                "action": self.kind.action, **self.data, "message": self.message}

    def warning_line(self) -> str | None:
        """The warning it gives (None for a note), ending in its code and the action it asks
        for (`[HP102 re-measure]`): the one place warnings come from findings."""
        if (self.severity or self.kind.severity) != "warning":
            return None
        return f"{self.where or self.benchmark}: {self.warning or self.message} {self.kind.tag}"


def of_kind(found: Iterable[Mapping[str, Any]], k: Kind,
            benchmark: str | None = None) -> list[Mapping[str, Any]]:
    """A run's stored findings of one kind (of one benchmark), for those who read them back;
    malformed entries (an imported document's) are skipped."""
    return [f for f in found if isinstance(f, dict | Mapping) and f.get("kind") == k.name
            and (benchmark is None or f.get("benchmark") == benchmark)]


#: A device due for a reset or replacement (a GPU's memory errors, a pending row remapping): a
#: campaign drains its node until it is fixed, whatever its figures
HEALTH = kind("health", "a device due for a reset or replacement", "warning",
              "the run's warnings and the cluster report's drain list",
                  code="HP301", action="drain")


#: Where the table of every kind is kept (generated by scripts/generate.py)
KINDS_FILE = "docs/findings.md"


def kinds_text() -> str:
    """docs/findings.md: every kind of finding with its code and action, from the kinds
    declared (the modules that make them imported first)."""
    out = ["# Findings: codes and actions", "",
           "<!-- generated by scripts/generate.py from the kinds declared; do not edit -->", "",
           "Every finding a run, a check or a campaign stores carries its kind's stable **code** "
           "(never given to another kind, even once its kind is gone) and the **action** it "
           "asks of the operator, in its JSON (`code`, `action`), in a drain's reason, and at "
           "the end of the warning line a run prints for it (`... [HP104 re-measure]`; the "
           "action left out where it is none).", "",
           "| action | what it asks |", "|---|---|",
           *(f"| {a} | {says} |" for a, says in ACTIONS.items()), "",
           "| code | kind | action | severity | what it says | shown in |",
           "|---|---|---|---|---|---|",
           *(f"| {k.code} | {k.name} | {k.action} | {k.severity} | {k.says} | {k.view} |"
             for k in sorted(KINDS.values(), key=lambda k: k.code) if k.code)]
    if RETIRED:
        out += ["", "Retired codes (never reused):", "",
                *(f"- {c}: {what}" for c, what in sorted(RETIRED.items()))]
    return "\n".join(out) + "\n"
