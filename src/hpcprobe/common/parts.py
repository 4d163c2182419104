"""A part of a run's provenance that a family or a wing writes (the MPI its ranks ran with,
HPL's program, the GPUs it measured, an application's command, a tool's version, a scaling
series, a check's outcome), declared once by the module that writes it: its key and its typed
record, a frozen dataclass whose fields are the part's JSON fields. The record is the
declaration: its part of the result schema is made from its fields' types (`schema`), it is
written with `put` (or `add`, a part keyed by name; a field that is None is not stored) and
read back by attribute with `of` (or `each`).
What a run stored stays as it was: `of` reads an older run's part field by field, a field it
lacks taking its default (so every field has one), and leaves out what it does not know."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

R = TypeVar("R")

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                            type(None): "null"}


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON schema of a field's type: str, int, float, bool, None, their unions,
    list/tuple of one type, dict of str to one type, a record (a dataclass), Any."""
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if dataclasses.is_dataclass(hint):
        return record_schema(hint)  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds = [schema_of(a) for a in args]
        if all(set(k) == {"type"} for k in kinds):  # scalars: one type list
            return {"type": [k["type"] for k in kinds]}
        return {"anyOf": kinds}
    if origin in (list, tuple):
        return {"type": "array", "items": schema_of(args[0]) if args else {}}
    if origin is dict or origin is Mapping:
        return {"type": "object", "additionalProperties": schema_of(args[1]) if args else {}}
    raise TypeError(f"a provenance part's field of type {hint!r} has no JSON schema here")


def record_schema(record: type) -> dict[str, Any]:
    """A record's schema: each field's type; none required (an older run's part may lack a
    field the record has now), others allowed (a newer run's may have one it lacks)."""
    hints = typing.get_type_hints(record)
    return {"type": "object", "properties": {
        f.name: schema_of(hints[f.name]) for f in dataclasses.fields(record)}}


def _record(record: type[R], raw: Any) -> R | None:
    """The record from a stored part (None: not an object)."""
    if not isinstance(raw, Mapping):
        return None
    names = {f.name for f in dataclasses.fields(record)}  # type: ignore[arg-type]
    return record(**{k: v for k, v in raw.items() if k in names})


@dataclass(frozen=True)
class Part(Generic[R]):
    """One part: its provenance key and its record's type (a frozen dataclass, or a scalar:
    str); `keyed`: the part holds one record per name (an application's, a tool's), which
    `each` gives by name."""

    key: str
    record: type[R]
    keyed: bool = False

    def schema(self) -> dict[str, Any]:
        """The part's schema: its record's, or null (what a run could not read: the MPI it
        would use where none was found; a campaign's record without an MPI, as earlier
        versions stored it)."""
        one = schema_of(self.record)  # a record's or a scalar's: one type
        one = {**one, "type": [one["type"], "null"]}
        return {"type": ["object", "null"], "additionalProperties": one} if self.keyed else one

    def put(self, provenance: MutableMapping[str, Any], value: R) -> None:
        """Keep `value` as the run's part (replacing one kept before)."""
        provenance[self.key] = _stored(value)

    def add(self, provenance: MutableMapping[str, Any], name: str, value: R) -> None:
        """Keep `value` under `name` in a keyed part (beside the names kept before)."""
        provenance.setdefault(self.key, {})[name] = _stored(value)

    def of(self, provenance: Mapping[str, Any]) -> R | None:
        """The run's part as its record (None where the run has none)."""
        return _record(self.record, provenance.get(self.key))

    def each(self, provenance: Mapping[str, Any]) -> dict[str, R]:
        """A keyed part's records by name (none where the run has none)."""
        raw = provenance.get(self.key)
        if not isinstance(raw, Mapping):
            return {}
        if not dataclasses.is_dataclass(self.record):
            return {k: v for k, v in raw.items() if isinstance(v, self.record)}
        return {k: got for k, v in raw.items() if (got := _record(self.record, v)) is not None}


def _stored(value: Any) -> Any:
    """A record as the run stores it: its fields (JSON types), but those that are None (what
    this run has not: a scaling series' count run has no list of runs)."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    return {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
