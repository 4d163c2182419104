"""The provenance's parts as typed records (common/parts.py): each record's schema made from
its field types, written and read back by attribute, an older run's part (fields it lacks,
fields it has that the record no longer knows) read without loss of what it has, keyed and
scalar parts, and every part a run writes valid under the generated schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pytest

from hpcprobe.common.parts import Part, schema_of
from hpcprobe.families.app.bench import APPS, AppRun
from hpcprobe.families.hpl.bench import HPL, HplUsed
from hpcprobe.measure import schema
from hpcprobe.mpi.params import MPI, MpiUsed
from hpcprobe.results.model import schema as result_schema


@dataclass(frozen=True)
class _Kept:
    name: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    seen: list[float] | None = None


def test_a_records_schema_is_made_from_its_field_types():
    assert schema_of(str | None) == {"type": ["string", "null"]}
    assert schema_of(list[float] | None) == {"anyOf": [
        {"type": "array", "items": {"type": "number"}}, {"type": "null"}]}
    assert schema_of(_Kept) == {"type": "object", "properties": {
        "name": {"type": ["string", "null"]},
        "sizes": {"type": "object", "additionalProperties": {"type": "integer"}},
        "seen": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}]}}}
    assert schema_of(Any) == {}
    with pytest.raises(TypeError, match="no JSON schema"):
        schema_of(set[int])


def test_a_part_is_written_and_read_back_by_attribute_and_an_older_one_still_reads():
    part = Part("kept", _Kept)
    provenance: dict[str, Any] = {}
    part.put(provenance, _Kept("a", {"x": 1}))
    assert provenance == {"kept": {"name": "a", "sizes": {"x": 1}}}  # None is not stored
    assert part.of(provenance) == _Kept("a", {"x": 1})
    jsonschema.validate(provenance["kept"], part.schema())
    jsonschema.validate(None, part.schema())  # an earlier version's "no such part"
    # an older run's: a field it lacks takes its default, one the record dropped is left out
    assert part.of({"kept": {"name": "b", "retired": 3}}) == _Kept("b")
    assert part.of({}) is None and part.of({"kept": "not an object"}) is None


def test_keyed_and_scalar_parts():
    provenance: dict[str, Any] = {}
    APPS.add(provenance, "lammps", AppRun(["lmp", "-in", "in.lj"], "/tmp", {}, "atom-steps/s"))
    APPS.add(provenance, "hpcg", AppRun(["xhpcg"], "/tmp", warmup=1))
    assert {k: v.command[0] for k, v in APPS.each(provenance).items()} == {
        "lammps": "lmp", "hpcg": "xhpcg"}
    tools = Part("tools", str, keyed=True)
    tools.add(provenance, "fio", "fio-3.33")
    assert tools.each(provenance) == {"fio": "fio-3.33"}
    assert tools.schema() == {"type": ["object", "null"],
                              "additionalProperties": {"type": ["string", "null"]}}


def test_every_part_a_run_writes_is_in_the_result_schema():
    """The parts that families declare (`Keeps`) and those other modules write sit in the
    generated schema under their keys, with their records' schemas: a record's field of the
    wrong type is refused there."""
    props = result_schema()["properties"]["provenance"]["properties"]
    for part in (*schema.SHARED_PARTS, HPL, APPS):
        assert props[part.key] == part.schema(), part.key
    provenance: dict[str, Any] = {}
    HPL.put(provenance, HplUsed("hpcc", "/usr/bin/hpcc", "Open MPI 4.1.4", "mpirun",
                                ["openblas"]))
    MPI.put(provenance, MpiUsed(implementation="Open MPI", version="4.1.4",
                                thresholds={"btl_sm_eager_limit": 4096}))
    for key, kept in provenance.items():
        jsonschema.validate(kept, props[key])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"blas": "openblas"}, props["hpl"])  # a list, not a string
