"""The one result schema: a run (provenance + metrics), its JSON document and validation."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from sys import intern
from typing import Any

from hpcprobe.common import files, jsondoc
from hpcprobe.common.errors import UserError
from hpcprobe.common.jsondoc import text_key
from hpcprobe.common.stats import Summary, summarize
from hpcprobe.results import findings
from hpcprobe.results.conditions import Conditions
from hpcprobe.results.node import Node

SCHEMA_NAME = "hpcprobe-result"
SCHEMA_VERSION = 1
#: The kind of a run's finding that needs an administrator before the node serves jobs (a GPU
#: to reset or replace): `cluster report` lists and drains such nodes.
HEALTH = findings.HEALTH.name


class Params(dict[str, Any]):
    """A metric's params as a document or a store gives them (`shared`): read-only, since one
    object serves every metric with the same params (a fleet's thousand nodes repeat the same
    few hundred), and carrying what is asked of them per figure, made once: their key
    (`jsondoc.text_key`: the verdict's labels) and their text as stored (keys sorted). A copy
    (`dict(params)`) is an ordinary dict; so is one pickled."""

    __slots__ = ("_key", "_text")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._key: Any = _UNMADE
        self._text: str | None = None

    @property
    def key(self) -> Any:
        """`jsondoc.text_key` of these params."""
        if self._key is _UNMADE:
            self._key = text_key(self)
        return self._key

    @property
    def text(self) -> str:
        """Their JSON, keys sorted: the text a store keeps."""
        if self._text is None:
            self._text = json.dumps(self, sort_keys=True)
        return self._text

    def _shared(self, *_: Any, **__: Any) -> Any:
        raise TypeError("a metric's params are shared by every metric with the same ones: "
                        "change a copy (dict(params))")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _shared

    def __reduce__(self) -> Any:
        return dict, (dict(self),)


_UNMADE = object()
#: each distinct params, by key: a campaign's node runs and links give a few thousand; past
#: this many, params are read as objects of their own (each still read-only)
SHARED_MAX = 65_536
_SHARED: dict[Any, Params] = {}


def shared(params: dict[str, Any]) -> dict[str, Any]:
    """Read params (a document's or a store's): the one `Params` of their key, their text
    values interned; an ordinary dict of their own where they have no key (a negative float
    zero, a list or an object among the values)."""
    key = text_key(params)
    try:
        got = None if key is None else _SHARED.get(key)
    except TypeError:  # a list or an object among the values
        key = got = None
    if got is not None:
        return got
    made = {k: intern(v) if type(v) is str else v for k, v in params.items()}
    if key is None:
        return made
    got = Params(made)
    got._key = key
    if len(_SHARED) < SHARED_MAX:
        _SHARED[key] = got
    return got


@dataclass
class Metric:
    """One named figure of a benchmark under one parameter set, with every raw sample."""

    benchmark: str
    name: str
    unit: str
    params: dict[str, Any]
    samples: list[float]
    better: str = "higher"  # or "lower"
    #: the summary of the samples it was made of (a fleet's verdict and store ask for each
    #: figure's often): made again where they are no longer those
    _summary: tuple[tuple[float, ...], Summary] | None = field(
        default=None, init=False, repr=False, compare=False)

    @property
    def summary(self) -> Summary:
        key = tuple(self.samples)
        if self._summary is None or self._summary[0] != key:
            self._summary = (key, summarize(self.samples))
        return self._summary[1]

    def to_dict(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "name": self.name, "unit": self.unit,
                "better": self.better, "params": self.params, "samples": list(self.samples),
                "summary": self.summary.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Metric:
        """The metric of a document's entry, its names interned and its params `shared`: a
        fleet's thousand documents repeat the same few hundred (JSON makes each a string of
        its own: a 1,000-node campaign's peak 822 MiB here, 715 interned)."""
        return cls(intern(d["benchmark"]), intern(d["name"]), intern(d["unit"]),
                   shared(d["params"]), list(map(float, d["samples"])),
                   intern(d.get("better", "higher")))


#: What a stored run is: one invocation on one host (its topology measured), or a campaign
#: driver's record (its node list, failures and link figures; it measured no machine, so it
#: has no topology)
RUN_KINDS = ("node", "campaign")


@dataclass
class Run:
    """One invocation of `hpcprobe run` on one host, or (kind "campaign") a campaign driver's
    record."""

    run_id: str
    created: str
    host: str
    profile: str
    benchmarks: list[str]
    provenance: dict[str, Any]
    topology: dict[str, Any]
    metrics: list[Metric] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tag: str | None = None
    duration_s: float = 0.0
    kind: str = "node"
    #: the metrics by (benchmark, name), and the list (identity, length) it was built from
    _by_name: tuple[int, int, dict[tuple[str, str], list[Metric]]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def select(self, benchmark: str, name: str) -> list[Metric]:
        """The run's metrics of one benchmark and name, in measurement order (from an index
        built once per metrics list: the verdict's ceilings ask for each figure's bound)."""
        seen = (id(self.metrics), len(self.metrics))
        if self._by_name is None or self._by_name[:2] != seen:
            by: dict[tuple[str, str], list[Metric]] = {}
            for m in self.metrics:
                by.setdefault((m.benchmark, m.name), []).append(m)
            self._by_name = (*seen, by)
        return list(self._by_name[2].get((benchmark, name), ()))

    @property
    def conditions(self) -> Conditions:
        """How the run ran (results.conditions), read from its provenance."""
        return Conditions.of(self.provenance)

    @property
    def node(self) -> Node:
        """The host and build it ran on (results.node), read from its provenance."""
        return Node.of(self.provenance)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "run_id": self.run_id,
            "created": self.created, "host": self.host, "tag": self.tag, "profile": self.profile,
            "benchmarks": list(self.benchmarks), "duration_s": self.duration_s,
            "provenance": self.provenance, "topology": self.topology,
            "findings": self.findings, "warnings": self.warnings, "errors": self.errors,
            "metrics": [m.to_dict() for m in self.metrics],
            **({} if self.kind == "node" else {"kind": self.kind}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Run:
        return cls(d["run_id"], d["created"], d["host"], d["profile"], list(d["benchmarks"]),
                   d["provenance"], d["topology"], [Metric.from_dict(m) for m in d["metrics"]],
                   list(d.get("findings", [])), list(d.get("warnings", [])),
                   list(d.get("errors", [])), d.get("tag"), float(d.get("duration_s", 0.0)),
                   d.get("kind", "node"))


def schema() -> dict[str, Any]:
    """The JSON schema of a run document, shipped in the package."""
    text = resources.files("hpcprobe.results").joinpath("schema/result-v1.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate(doc: dict[str, Any], source: str = "result") -> None:
    """Raise UserError naming the first place where `doc` breaks the schema."""
    _validate(doc, source)


def _validate(doc: dict[str, Any], source: str) -> None:
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA_NAME and version != SCHEMA_VERSION:
        raise UserError(f"{source}: schema version {version} is not supported by this hpcprobe "
                        f"(it reads version {SCHEMA_VERSION}); upgrade hpcprobe")
    if _fast_accepts(doc):
        exc = None
    else:  # the message, and the reference's word, from jsonschema
        import jsonschema

        exc = jsonschema.exceptions.best_match(_validator().iter_errors(doc))
    if exc is not None:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        raise UserError(f"{source}: not an hpcprobe result at {where}: {exc.message}")
    _check_values(doc, source)


def _check_values(doc: dict[str, Any], source: str) -> None:
    """What the schema does not check: `created` is a UTC time (stores order and select runs
    by its text), and every sample is finite (Python's JSON reads NaN and Infinity)."""
    try:
        offset = datetime.fromisoformat(doc["created"]).utcoffset()
    except ValueError:
        offset = None
    if offset is None or offset.total_seconds():
        raise UserError(f"{source}: not an hpcprobe result at created: {doc['created']!r} is not "
                        "a UTC date-time such as 2026-11-01T10:00:00+00:00")
    for i, m in enumerate(doc["metrics"]):
        if all(map(math.isfinite, m["samples"])):  # each sample looked at in C, not in Python
            continue
        j, x = next((j, x) for j, x in enumerate(m["samples"]) if not math.isfinite(x))
        raise UserError(f"{source}: not an hpcprobe result at metrics/{i}/samples/{j}: "
                        f"{x} is not a finite number")


def _fast_accepts(doc: Any) -> bool:
    """Whether the schema accepts `doc`, by jsonschema-rs (Rust; formats not asserted, as
    jsonschema's validator does not): a node's document of 177 figures in 0.5-1.0 ms here, where
    fastjsonschema's generated Python took 2.1-2.4 ms and jsonschema's 238 ms. False where it
    refuses, cannot read a value (a key that is not a string) or is not installed: then
    jsonschema's word stands (tests/test_schema.py keeps the two in agreement)."""
    validator = _fast_validator()
    try:
        return validator is not None and bool(validator.is_valid(doc))
    except ValueError:  # a value JSON has not, which jsonschema judges and names
        return False


@cache
def _fast_validator() -> Any:
    """jsonschema-rs's validator of the schema, built once (7 ms here); None where the package
    is not installed (a platform without its wheel)."""
    try:
        import jsonschema_rs
    except ImportError:
        return None
    return jsonschema_rs.validator_for(schema(), validate_formats=False)


@cache
def _validator() -> Any:
    """The schema's validator, built once (not once per document). The schema itself is
    checked by the suite (checking it here cost a second a command)."""
    import jsonschema

    s = schema()
    return jsonschema.validators.validator_for(s)(s)


def write_json(run: Run, path: str | os.PathLike[str]) -> None:
    """Write the run's document atomically (validated first), readable by its owner and group
    (it holds the environment the run ran in)."""
    doc = run.to_dict()
    validate(doc)
    files.atomic_write(path, (jsondoc.dumps(doc, indent=1) + "\n").encode(), "--json",
                       private=True)


def read_json(path: str | os.PathLike[str], host: str | None = None) -> Run:
    """The run of a document, checked; its host `host` where given (a campaign's name for the
    node that wrote it), set before the check. A store takes the run as checked (`save(run,
    checked=True)`) where nothing changed it since."""
    p = Path(path)
    try:
        doc = jsondoc.loads(files.read_input_bytes(p))
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError:
        raise files.not_text(p) from None
    if host is not None and isinstance(doc, dict):
        doc["host"] = host
    _validate(doc, str(p))
    return Run.from_dict(doc)
