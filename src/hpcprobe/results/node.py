"""What a run records of its host and build (machine/provenance.py reads it): the CPU, kernel,
SMT, NUMA mode, memory, THP, governor, BIOS strings, compiler and kernels, the environment that
steers OpenMP, BLAS and MPI.

Declared once here as a typed record: each field its key in a run's provenance, its type and
its part of the result schema (the generator joins it to the envelope; the required ones are
those every version of hpcprobe wrote). Readers read `run.node.governor`, never a key; a run
stored by an older version reads None where it lacks a field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


def _of(kind: str | list[str], schema: Mapping[str, Any] | None = None,
        required: bool = False) -> Any:
    """A field's part of the schema (and whether every run has it) as its metadata."""
    return field(default=None,
                 metadata={"schema": {"type": kind, **(schema or {})}, "required": required})


_TEXT = ["string", "null"]
_TEXTS = {"items": {"type": "string"}}


@dataclass(frozen=True)
class Node:
    """The host and build a run measured on (None: not recorded, or by an older version)."""

    host: str | None = _of("string", required=True)
    cpu_model: str | None = _of(_TEXT, required=True)
    cpu_flags: tuple[str, ...] | None = _of("array", _TEXTS)
    kernel: str | None = _of("string", required=True)
    machine: str | None = _of("string")
    #: hardware threads per core
    smt: int | None = _of("integer")
    smt_active: bool | None = _of(["boolean", "null"])
    numa_nodes: int | None = _of("integer")
    #: NUMA domains per socket (AMD's NPS1/2/4)
    numa_per_package: int | None = _of(["integer", "null"])
    #: each NUMA domain one L3 (AMD's "L3 as NUMA")
    l3_as_numa: bool | None = _of(["boolean", "null"])
    tuned_profile: str | None = _of(_TEXT)
    #: the DMI strings any user may read (BIOS, vendor, product, board)
    dmi: Mapping[str, str] | None = _of("object", {"additionalProperties": {"type": "string"}})
    blas: str | None = _of(_TEXT)
    #: a cgroup's memory limit: {"bytes", "where"}
    memory_limit: Mapping[str, Any] | None = _of(["object", "null"], {
        "required": ["bytes", "where"],
        "properties": {"bytes": {"type": "integer", "minimum": 0}, "where": {"type": "string"}}})
    mem_total_bytes: int | None = _of(["integer", "null"], {"minimum": 0})
    thp: str | None = _of(_TEXT)
    thp_defrag: str | None = _of(_TEXT)
    governor: str | None = _of(_TEXT)
    #: the cpufreq policy of the first allowed CPU (machine.cpufreq.Policy.to_dict)
    cpufreq: Mapping[str, Any] | None = _of(["object", "null"])
    compiler: str | None = _of("string", required=True)
    isa_supported: tuple[str, ...] | None = _of("array", _TEXTS, required=True)
    isa: str | None = _of("string")
    hpcprobe_version: str | None = _of("string", required=True)
    #: the kernels' sources' digest
    kernels: str | None = _of("string")
    python: str | None = _of("string")
    topology_source: str | None = _of(_TEXT)
    allowed_cpus: str | None = _of("string")
    #: the variables that steer OpenMP, BLAS, MPI and hpcprobe, secrets masked
    environment: Mapping[str, str] | None = _of("object", {
        "additionalProperties": {"type": "string"}}, required=True)

    @classmethod
    def of(cls, provenance: Mapping[str, Any]) -> Node:
        """The node a run's provenance records (lists as tuples; what it lacks, None)."""
        got: dict[str, Any] = {name: provenance.get(name) for name in _NAMES}
        for name in ("cpu_flags", "isa_supported"):
            if isinstance(got[name], list):
                got[name] = tuple(got[name])
        return cls(**got)

    def to_dict(self) -> dict[str, Any]:
        """As a run's provenance keeps it (every field, None where not read)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}


#: Its fields' names (a fleet's report reads thousands of runs' nodes: `fields` each time was
#: a tenth of a second of it)
_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Node))
#: The part of the result schema these fields take in a run's provenance
SCHEMA: dict[str, Any] = {f.name: dict(f.metadata["schema"]) for f in fields(Node)}
#: The fields every run's provenance has
REQUIRED: list[str] = [f.name for f in fields(Node) if f.metadata["required"]]
