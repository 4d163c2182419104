"""The result schema and the table of figures are generated from the families' declarations:
the files kept are what the declarations make, every declared figure passes the schema, and a
figure nobody declared is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from hpcprobe import registry
from hpcprobe.common.errors import UserError
from hpcprobe.families import FAMILIES
from hpcprobe.measure import schema
from hpcprobe.measure.family import CAPABILITIES, Family, MetricSpec
from hpcprobe.results import model
from hpcprobe.results.store import Store
from hpcprobe.views import prometheus

ROOT = Path(__file__).resolve().parent.parent
SPECS = [(f, s) for f in FAMILIES.values() for s in f.metrics.specs]


def test_the_kept_files_are_what_the_declarations_make() -> None:
    for path, text in registry.generated(ROOT).items():
        assert path.read_text() == text, f"{path} is stale: run scripts/generate.py"
    # the package validates against the file it ships, which is that one, and a valid schema
    # (commands no longer check it: a second each)
    assert model.schema() == schema.generate(FAMILIES.values())
    jsonschema.validators.validator_for(model.schema()).check_schema(model.schema())


def test_every_module_says_what_it_is_for() -> None:
    """docs/modules.md lists every module with its docstring's first sentence: none without
    one; a sentence ends at its full stop, not at an abbreviation's or a number's."""
    from hpcprobe.common import moduledocs

    listed = moduledocs.modules(ROOT / "src" / "hpcprobe")
    assert len(listed) > 100
    assert [p for p, said in listed if said == moduledocs.NO_DOCSTRING] == []
    assert moduledocs.first_sentence("Reads e.g. the 2.5 GT/s link. More here.\n\nAnd so.") \
        == "Reads e.g. the 2.5 GT/s link."
    assert moduledocs.first_sentence("One paragraph, no full stop\n\nthen more.") == \
        "One paragraph, no full stop"
    assert moduledocs.first_sentence(None) == moduledocs.NO_DOCSTRING


def test_the_generator_says_what_is_stale() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def _errors(metric: dict) -> list[jsonschema.ValidationError]:
    schema = model.schema()
    doc_schema = {**schema, "$ref": "#/$defs/metric"}
    for key in ("required", "properties", "if", "then", "else", "type"):
        doc_schema.pop(key, None)
    return list(jsonschema.Draft202012Validator(doc_schema).iter_errors(metric))


def _metric(benchmark: str, s: MetricSpec, params: dict | None = None) -> dict:
    return {"benchmark": benchmark, "name": s.name, "unit": s.unit, "better": s.better,
            "params": params or {}, "samples": [1.0],
            "summary": {"n": 1, "min": 1.0, "median": 1.0, "mean": 1.0, "max": 1.0,
                        "ci95": [1.0, 1.0]}}


@pytest.mark.parametrize("family,spec", SPECS, ids=[f"{f.name}.{s.name}.{s.unit}"
                                                     for f, s in SPECS])
def test_every_declared_figure_passes_but_for_its_params(family: Family,
                                                        spec: MetricSpec) -> None:
    """A figure as declared (name, unit, direction) is refused for nothing but the params it
    lacks: the schema never refuses what a family may emit (roofline.port_ceiling was)."""
    bad = [e for e in _errors(_metric(family.name, spec))
           if list(e.absolute_path)[:1] != ["params"]]
    assert not bad, [e.message for e in bad]
    required = {k for p in family.metrics.params if not p.names or spec.name in p.names
                for k in p.required}
    missing = {e.message.split("'")[1] for e in _errors(_metric(family.name, spec))
               if e.validator == "required"}
    assert missing == required


@pytest.mark.parametrize("change", [{"name": "port_ceiling_x"}, {"unit": "MB/s"},
                                    {"better": "lower"}])
def test_a_figure_not_declared_is_refused(change: dict) -> None:
    roofline = FAMILIES["roofline"]
    spec = next(s for s in roofline.metrics.specs if s.name == "port_ceiling")
    assert not _errors(_metric("roofline", spec, {"threads": 2}))
    assert _errors({**_metric("roofline", spec, {"threads": 2}), **change})


def test_an_open_family_takes_its_prefix_only() -> None:
    app = next(f for f in FAMILIES.values() if f.metrics.open_prefix)
    prefix = app.metrics.open_prefix
    spec = MetricSpec(f"{prefix}rating", "GFLOP/s")
    assert not _errors(_metric(app.name, spec))
    assert _errors(_metric(app.name, MetricSpec("rating", "GFLOP/s")))


def test_the_table_of_figures_lists_every_declared_figure() -> None:
    table = (ROOT / "docs" / "figures.md").read_text()
    for f, s in SPECS:
        assert f"| {f.name} | `{s.name}` | {s.unit} |" in table


def test_every_capability_is_declared_and_documented() -> None:
    """A family's modes are the capabilities measure/family.py lists, and docs/design.md's
    table says what each is (a capability added without a row, or a family declaring an object
    that is none, fails here)."""
    design = (ROOT / "docs" / "design.md").read_text()
    for kind in CAPABILITIES:
        assert f"| `{kind.__name__}(" in design, f"docs/design.md has no row for {kind.__name__}"
    for f in FAMILIES.values():
        for c in f.capabilities:
            assert isinstance(c, CAPABILITIES), (f.name, c)


def test_every_declared_unit_has_a_prometheus_name() -> None:
    """Each unit a family declares is spelled out by the Prometheus export's own table, never
    by its fallback (a sanitised guess)."""
    for _, s in SPECS:
        parts = s.unit.split("/")
        for part in parts:
            assert part in prometheus._BASE or (
                len(part) > 1 and part[0] in prometheus._PREFIX and part[1:] in prometheus._BASE
            ), f"{s.unit}: {part!r} has no Prometheus name"


@pytest.mark.parametrize("fast", [True, False], ids=["jsonschema-rs", "jsonschema alone"])
def test_a_valid_document_passes_and_a_changed_one_is_refused_where_it_breaks(fast, monkeypatch
                                                                              ) -> None:
    """With jsonschema-rs, and without it (a machine where it has no wheel: jsonschema checks
    every document), the same word and the same message."""
    if fast:
        pytest.importorskip("jsonschema_rs")
    else:
        monkeypatch.setattr(model, "_fast_validator", lambda: None)
    doc = json.loads((ROOT / "tests" / "data" / "cluster" / "probe-quick.json").read_text())
    model.validate(doc)
    unit, doc["metrics"][0]["unit"] = doc["metrics"][0]["unit"], "furlongs"
    with pytest.raises(UserError, match="metrics/0/unit"):
        model.validate(doc)
    doc["metrics"][0]["unit"] = unit
    doc["metrics"][0]["name"] = "no_such_figure"
    with pytest.raises(UserError, match="no_such_figure"):
        model.validate(doc)
    doc["metrics"][0]["name"] = "bandwidth"
    doc["metrics"][0]["samples"][0] = float("nan")
    with pytest.raises(UserError, match="finite"):
        model.validate(doc)


def _documents() -> list[Path]:
    """Every recorded result document under tests/data."""
    out = []
    for p in sorted((ROOT / "tests" / "data").rglob("*.json")):
        try:
            doc = json.loads(p.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == model.SCHEMA_NAME:
            out.append(p)
    return out


def test_the_fast_validator_accepts_what_jsonschema_accepts_and_nothing_else() -> None:
    """jsonschema-rs is the fast path; jsonschema's word stands. On every recorded document,
    every declared figure (with its params and without), and figures and documents bent out of
    shape, the two agree."""
    pytest.importorskip("jsonschema_rs")  # installed where it has a wheel (pyproject.toml)
    docs = [json.loads(p.read_text()) for p in _documents()]
    assert len(docs) >= 3
    base = docs[0]
    bent = [{**base, "run_id": "XYZ"}, {**base, "created": 5}, {**base, "kind": "other"},
            {k: v for k, v in base.items() if k != "metrics"}, {**base, "extra": 1},
            {**base, "topology": {}}, {**base, "metrics": [{**base["metrics"][0], "x": 1}]}]
    for f, s in SPECS:
        fine = _metric(f.name, s)
        bent.append({**base, "metrics": [fine]})
        for change in ({"unit": "furlongs"}, {"better": "sideways"}, {"samples": []},
                       {"name": s.name + "_x"}, {"summary": {}}):
            bent.append({**base, "metrics": [{**fine, **change}]})
    # a figure's rules are chosen by its benchmark and name (the schema's `if`s): each recorded
    # figure with each param taken out, under another family's name, under no family
    recorded = {(m["benchmark"], m["name"]): m for d in docs for m in d["metrics"]}
    others = sorted({s.name for _, s in SPECS})
    for (_, name), m in recorded.items():
        bent.append({**base, "metrics": [m, {**m, "benchmark": "no-such-family"}]})
        other = others[(others.index(name) + 1) % len(others)] if name in others else others[0]
        bent.append({**base, "metrics": [{**m, "name": other}]})
        for p in m["params"]:
            params = {k: v for k, v in m["params"].items() if k != p}
            bent.append({**base, "metrics": [{**m, "params": params}]})
    # the same values of other types (1, 1.0 and True are equal in Python, not to the schema),
    # after the figure of the right type, one figure a family
    first = {b: m for (b, _), m in reversed(recorded.items())}
    for m in first.values():
        for p, v in m["params"].items():
            for w in (True, False, 0, 1, str(v), *((float(v),) if type(v) is int else ())):
                bent.append({**base, "metrics": [m, {**m, "params": {**m["params"], p: w}}]})
    accepted = 0
    for doc in docs + bent:
        said = not list(model._validator().iter_errors(doc))
        assert model._fast_accepts(doc) == said, json.dumps(doc)[:300]
        accepted += said
    assert 0 < accepted < len(docs) + len(bent)


def test_the_judgement_record_is_documented_whole() -> None:
    """docs/results.md's table of the judgement record names every field and every basis and
    mark the record allows (a field added without a row fails here)."""
    import dataclasses

    from hpcprobe.results.judgement import BASES, MARKS, Judgement

    doc = (ROOT / "docs" / "results.md").read_text()
    section = doc[doc.index("### Judgements"):doc.index("### References")]
    for f in dataclasses.fields(Judgement):
        assert f"`{f.name}`" in section, f.name
    for word in (*BASES, *MARKS):
        assert f"`{word}`" in section, word


def _facts_of_recorded_nodes(tmp: Path) -> list[dict]:
    """Each node fact as read from the recorded trees: DIMMs and EDAC, links, energy
    counters (with a reading, and on a node without any)."""
    from conftest import DATA
    from hpcprobe.machine import dimms, energy, links
    from test_energy import intel_2s

    meter = energy.Meter.of(intel_2s(tmp / "powercap"), poll_s=3600)
    meter.start()
    meter.take("memory")
    meter.stop()
    return [{"dram_ceiling": dimms.dram_ceiling(
                "AMD EPYC 7763 64-Core Processor", str(DATA / "smbios" / tree),
                str(DATA / "edac" / "epyc-7763-2s-full")).to_dict()}
            for tree in ("epyc-7763-2s-full", "qemu-guest")] + [
        {"links": links.read(DATA / "links" / tree)} for tree in ("hdr-node",
                                                                  "hdr-node-degraded")] + [
        {"energy": meter.provenance()}, {"energy": energy.fact(tmp / "none")}]


def test_every_fact_kept_passes_its_part_of_the_schema_and_a_wrong_one_is_refused(
        tmp_path: Path) -> None:
    """Each fact declares its part of the provenance's schema (machine/facts.py); what it
    reads from a recorded node passes, a mangled one does not."""
    from hpcprobe.machine import facts
    from hpcprobe.results import conditions

    whole = model.schema()["properties"]["provenance"]["properties"]
    assert {f.key for f in facts.FACTS} | set(conditions.SCHEMA) <= set(whole)
    for kept in _facts_of_recorded_nodes(tmp_path):
        [(key, stored)] = kept.items()
        jsonschema.validate(stored, whole[key])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"measured": True, "domains": []}, whole["energy"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"gbs": -1.0, "source": "x"}, whole["dram_ceiling"])


def test_a_run_read_from_its_document_is_checked_once_when_stored(tmp_path, monkeypatch) -> None:
    """A campaign reads each node's document under its own name for the node, then stores the
    run as read: checked once, as read (the name set before the check), stored whole. A run
    changed after it was read is stored as any other run, checked again, and refused where it
    breaks the schema."""
    path = _documents()[0]
    checked: list[str] = []
    real = model._validate
    monkeypatch.setattr(model, "_validate", lambda doc, source: (checked.append(source),
                                                                 real(doc, source)))
    run = model.read_json(path, host="n0001")
    assert run.host == "n0001"
    with Store.open(tmp_path / "r.sqlite") as st:
        assert st.save_all([run], checked=True) == []
        assert checked == [str(path)]
        assert st.load(run.run_id).to_dict() == run.to_dict()
        changed = model.read_json(path)
        changed.run_id, changed.metrics[0].unit = "0123456789ab", ""
        with pytest.raises(UserError, match="metrics/0/unit"):
            st.save(changed)
        assert checked == [str(path)] * 2 + ["result"] and not st.has("0123456789ab")


def test_params_read_are_shared_read_only_and_stored_as_their_text(tmp_path) -> None:
    """A document's and a store's params are one read-only object per distinct params (a
    fleet's thousand nodes repeat the same few hundred): its key and text are those of an
    ordinary dict of the same params, a change to it is refused (it would change every metric
    with those params), a copy or a pickle is an ordinary dict; params without a key (a list
    among the values, a negative zero) are each their own dict. Stored and read back, they
    are the same."""
    import copy
    import pickle

    from hpcprobe.common.jsondoc import text_key
    from hpcprobe.judge import peers
    from hpcprobe.results import sql

    doc = json.loads(_documents()[0].read_text())
    a, b = model.Run.from_dict(doc), model.Run.from_dict(json.loads(json.dumps(doc)))
    for ma, mb in zip(a.metrics, b.metrics, strict=True):
        assert ma.params is mb.params and type(ma.params) is model.Params
        plain = dict(ma.params)
        assert type(plain) is dict and plain == ma.params
        assert ma.params.key == text_key(plain)
        assert sql.params_text(ma.params) == ma.params.text == json.dumps(plain, sort_keys=True)
        assert peers.params_label(ma.benchmark, ma.name, ma.params, frozenset()) == \
            peers.params_label(ma.benchmark, ma.name, plain, frozenset())
    p = a.metrics[0].params
    for change in (lambda: p.__setitem__("x", 1), lambda: p.update(x=1), lambda: p.pop("x", 0),
                   lambda: p.setdefault("x", 1), p.clear, p.popitem,
                   lambda: p.__delitem__(next(iter(p)))):
        with pytest.raises(TypeError, match="shared"):
            change()
    assert len(p) == len(doc["metrics"][0]["params"])
    for other in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(other) is dict and other == p
        other["x"] = 1
    assert "x" not in p
    one = dict(doc["metrics"][0], params={"sizes": [1, 2]})
    zero = dict(doc["metrics"][0], params={"size": -0.0})
    for entry in (one, zero):
        m1, m2 = model.Metric.from_dict(entry), model.Metric.from_dict(entry)
        assert type(m1.params) is dict and m1.params is not m2.params and m1.params == m2.params
    assert sql.params_text(model.Metric.from_dict(zero).params) == '{"size": -0.0}'
    with Store.open(tmp_path / "r.sqlite") as st:
        st.save(a)
        back, again = st.load(a.run_id), st.load(a.run_id)
        assert back.to_dict() == a.to_dict()
        assert all(type(m.params) is model.Params and m.params is n.params
                   for m, n in zip(back.metrics, again.metrics, strict=True))


def test_a_document_that_is_not_utf8_is_refused_in_one_line(tmp_path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(_documents()[0].read_bytes().replace(b'"host"', b'"h\xffost"', 1))
    with pytest.raises(UserError, match=r"run.json: not text \(not UTF-8\)$"):
        model.read_json(path)
    with pytest.raises(UserError, match="run.json: cannot read it"):
        model.read_json(tmp_path / "missing" / "run.json")
