"""How a run ran, as its provenance keeps it: the seconds each benchmark took, the CPU time the
hypervisor and other processes took while it ran, the node sentinel's readings, and where a
signal interrupted it (the energy counters' readings are the energy fact's:
machine/facts.py).

Declared once here: the key each part is kept under, its type, and its part of the result
schema (the generator joins it to the envelope). The runner, the scaling series and the
re-test write a run's parts through `Conditions.into`; every reader reads a part by attribute
(`run.conditions.interrupted`), never by its key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: The keys of a run's provenance this module declares, by attribute
KEYS = {"seconds": "seconds", "steal": "steal_percent", "others": "others_percent",
        "sentinel": "sentinel", "interrupted": "interrupted"}


@dataclass(frozen=True)
class Stop:
    """Where a signal (Ctrl-C, SIGTERM) stopped a run: the benchmark it was measuring, and what
    it did not run."""

    benchmark: str
    not_run: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "not_run": list(self.not_run)}


@dataclass(frozen=True)
class Reading:
    """One reading of the node sentinel: the benchmark it followed (None: before the first)
    and its samples (GB/s)."""

    after: str | None
    samples: tuple[float, ...]


@dataclass(frozen=True)
class Sentinel:
    """The node sentinel: what it streams (its CPUs, size, kernel: `about`) and its readings
    in order."""

    about: Mapping[str, Any]
    readings: tuple[Reading, ...]

    def first(self) -> tuple[float, ...] | None:
        """The samples of the reading before the first benchmark (None without readings)."""
        return self.readings[0].samples if self.readings else None

    def to_dict(self) -> dict[str, Any]:
        return {**self.about, "readings": [{"after": r.after, "samples": list(r.samples)}
                                           for r in self.readings]}


def _shares(stored: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in stored.items()} if isinstance(stored, dict) else {}


def sentinel(stored: Any) -> Sentinel | None:
    """The sentinel as machine.sentinel or a run's provenance keeps it (None: not a record)."""
    if not isinstance(stored, dict):
        return None
    readings = tuple(Reading(r.get("after"), tuple(float(x) for x in r.get("samples", ())))
                     for r in stored.get("readings") or ())
    return Sentinel({k: v for k, v in stored.items() if k != "readings"}, readings)


def _stop(stored: Any) -> Stop | None:
    if not isinstance(stored, dict):
        return None
    return Stop(str(stored.get("benchmark", "?")), tuple(stored.get("not_run") or ()))


@dataclass(frozen=True)
class Conditions:
    """A run's conditions, each empty (or None) where the run kept none (an older run's, a
    check that measured nothing)."""

    #: the seconds each family took (its sentinel reading after it included)
    seconds: Mapping[str, float] = field(default_factory=dict)
    #: the share of its CPUs' time the hypervisor took while each family ran, in %
    steal: Mapping[str, float] = field(default_factory=dict)
    #: the share of its CPUs' time other processes used while each family ran, in %
    others: Mapping[str, float] = field(default_factory=dict)
    sentinel: Sentinel | None = None
    interrupted: Stop | None = None

    @classmethod
    def of(cls, provenance: Mapping[str, Any]) -> Conditions:
        """The conditions a run's provenance keeps."""
        return cls(_shares(provenance.get(KEYS["seconds"])),
                   _shares(provenance.get(KEYS["steal"])),
                   _shares(provenance.get(KEYS["others"])),
                   sentinel(provenance.get(KEYS["sentinel"])),
                   _stop(provenance.get(KEYS["interrupted"])))

    def stored(self) -> dict[str, Any]:
        """The parts kept (those not empty), by their provenance keys."""
        parts = {"seconds": dict(self.seconds) or None, "steal": dict(self.steal) or None,
                 "others": dict(self.others) or None,
                 "sentinel": None if self.sentinel is None else self.sentinel.to_dict(),
                 "interrupted": None if self.interrupted is None else
                 self.interrupted.to_dict()}
        return {KEYS[a]: v for a, v in parts.items() if v is not None}

    def into(self, provenance: dict[str, Any]) -> None:
        """Write the parts kept into a run's provenance; a part left out is dropped there."""
        for key in KEYS.values():
            provenance.pop(key, None)
        provenance.update(self.stored())


def update(provenance: dict[str, Any], **parts: Any) -> None:
    """Replace some parts of the conditions a run's provenance keeps (by attribute)."""
    replace(Conditions.of(provenance), **parts).into(provenance)


def _by_family() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": {"type": "number"}}


#: The part of the result schema these keys take in a run's provenance
SCHEMA: dict[str, Any] = {
    KEYS["seconds"]: _by_family(),
    KEYS["steal"]: _by_family(),
    KEYS["others"]: _by_family(),
    KEYS["sentinel"]: {
        "type": "object", "required": ["readings"],
        "properties": {"readings": {"type": "array", "items": {
            "type": "object", "required": ["after", "samples"],
            "properties": {"after": {"type": ["string", "null"]},
                           "samples": {"type": "array", "minItems": 1,
                                       "items": {"type": "number", "exclusiveMinimum": 0}}}}}}},
    KEYS["interrupted"]: {
        "type": "object", "required": ["benchmark", "not_run"],
        "properties": {"benchmark": {"type": "string"},
                       "not_run": {"type": "array", "items": {"type": "string"}}}},
}
