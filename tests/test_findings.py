"""Findings as a type: kinds declared once, the stored shape, the one place a finding's warning
comes from, and no finding left as a hand-made dict anywhere in the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hpcprobe
from hpcprobe import registry  # noqa: F401  (imports every family, so every kind is declared)
from hpcprobe.analysis import health  # noqa: F401  (the check's kinds, declared before any test)
from hpcprobe.cluster import verdict  # the campaign's kinds, declared before any test runs
from hpcprobe.machine import sentinel
from hpcprobe.measure.family import RunContext
from hpcprobe.results.findings import HEALTH, KINDS, Finding, Kind, kind, of_kind

SRC = Path(hpcprobe.__file__).parent
#: A kind the tests declare: outside the package's (which docs/findings.md lists), so that it is
#: declared in a copy of the registry of kinds that each test drops (`declared`)
NOTE = Kind("test_note", "a finding declared by the test", "note", "nowhere", "HP999", "none")


@pytest.fixture(autouse=True)
def declared(monkeypatch):
    """The kinds declared during a test are gone after it."""
    from hpcprobe.results import findings

    monkeypatch.setattr(findings, "KINDS", dict(findings.KINDS))


def test_a_kind_is_declared_once_and_alike():
    assert kind("test_note", "a finding declared by the test", "note", "nowhere",
                code="HP999", action="none") is not None
    with pytest.raises(AssertionError, match="declared twice"):
        kind("test_note", "says something else", "note", "nowhere", code="HP999",
             action="none")
    with pytest.raises(AssertionError, match="severity"):
        kind("test_loud", "a finding", "panic", code="HP998", action="none")
    with pytest.raises(AssertionError, match="action"):
        kind("test_loud", "a finding", code="HP998", action="pray")


#: Every code ever given, the ledger that keeps a code from being given twice: a kind removed
#: without its code moving to findings.RETIRED, or a code given without a line here, fails
ISSUED = {*(f"HP10{i}" for i in range(1, 7)), *(f"HP2{i:02d}" for i in range(1, 11)),
          "HP301", "HP302", *(f"HP31{i}" for i in range(1, 6)), "HP401", "HP402", "HP403",
          "HP404"}


def test_every_code_ever_issued_is_a_kind_or_retired():
    from hpcprobe.results import findings

    assert {k.code for k in KINDS.values()} | set(findings.RETIRED) == ISSUED


def test_every_kind_has_its_own_code_never_reused_and_an_action(monkeypatch):
    """A code is HPnnn, one kind's alone, never a retired one's; every kind has an action;
    the campaign's kinds are among them, and their drain reason names the code."""
    from hpcprobe.results import findings

    codes = [k.code for k in KINDS.values()]
    assert len(codes) == len(set(codes)) and all(c.startswith("HP") for c in codes)
    assert {k.action for k in KINDS.values()} <= set(findings.ACTIONS)
    assert {verdict.SLOW_NODE, verdict.SLOW_ENDPOINT, verdict.SLOW_LINK} <= set(KINDS)
    assert KINDS[verdict.SLOW_NODE].action == "drain"
    with pytest.raises(AssertionError, match="another kind's"):
        kind("test_thief", "a finding", code=KINDS["steal"].code, action="none")
    monkeypatch.setitem(findings.RETIRED, "HP997", "a kind that is gone")
    with pytest.raises(AssertionError, match="retired"):
        kind("test_revenant", "a finding", code="HP997", action="none")
    f = verdict.PeerFinding(verdict.SLOW_NODE, "n5", ("n5",), [], True)
    assert f.to_dict()["code"] == "HP401" and f.to_dict()["action"] == "drain"
    assert verdict.drain_reason("c1", f) == "hpcprobe c1: HP401 slow node"


def test_a_warning_line_keeps_its_code_and_action_when_folded():
    """The terminal folds a run's warnings to 100 columns; the code and action a finding's
    line ends in are kept whole, the words before them cut."""
    from hpcprobe.views.verdict import fold

    long = "memory triad 2T: " + "the figure moved " * 12 + "[HP104 re-measure]"
    plain = "memory: a warning of no finding, " + "long " * 30
    kept, cut = fold([long, plain])
    assert len(kept) <= 91 and kept.endswith("... [HP104 re-measure]"), kept
    assert len(cut) <= 91 and cut.endswith("..."), cut
    assert Finding("mpi", HEALTH, "x").warning_line() == "mpi: x [HP301 drain]"


def test_a_finding_is_stored_as_the_documents_dict_and_gives_its_warning(tiny):
    ctx = RunContext(tiny, None, "scalar")  # type: ignore[arg-type]
    ctx.find(Finding("memory", HEALTH, "GPU3 is due for a reset", {"item": "GPU3"}))
    ctx.find(Finding("memory", NOTE, "a note, no warning", {"n": 1}))
    ctx.find(Finding("memory", NOTE, "seen here", severity="warning", where="memory triad 2T"))
    ctx.find(Finding("hpl", HEALTH, "short", warning="the longer warning"))
    assert ctx.findings[0] == {"benchmark": "memory", "kind": "health", "code": "HP301",
                               "action": "drain", "item": "GPU3",
                               "message": "GPU3 is due for a reset"}
    assert ctx.warnings == ["memory: GPU3 is due for a reset [HP301 drain]",
                            f"memory triad 2T: seen here {NOTE.tag}",
                            "hpl: the longer warning [HP301 drain]"]
    assert [f["message"] for f in of_kind(ctx.findings, NOTE)] == ["a note, no warning",
                                                                   "seen here"]
    assert of_kind([*ctx.findings, "not a finding"], HEALTH, "hpl")[0]["message"] == "short"


def test_every_kind_the_package_makes_is_declared():
    made = {"sampling", "steal", "node_changed", "cache_level", "microarchitecture",
            "above_model", "clock_bracket", "blas_below_isa", "above_peak", "above_base",
            "health", "slower than its siblings", "protocol_switch", "collective_switch",
            "cpufreq", "skipped"}
    assert made <= set(KINDS)
    assert all(k.says and k.view for k in KINDS.values())
    got = sentinel.finding("memory", [100.0] * 9, [50.0] * 9)
    assert got is not None and got.kind is sentinel.NODE_CHANGED


def test_no_module_makes_a_finding_by_hand():
    """A dict with a `kind` and a `benchmark` is a finding that skipped the type (its warning
    copied by hand beside it, its kind undeclared)."""
    by_hand = []
    for path in set(SRC.rglob("*.py")) - {SRC / "results" / "findings.py"}:  # the one maker
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.Dict):
                keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
                if {"kind", "benchmark"} <= keys:
                    by_hand.append(f"{path.relative_to(SRC)}:{n.lineno}")
    assert by_hand == []
