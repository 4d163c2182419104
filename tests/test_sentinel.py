"""The node sentinel: a short DRAM triad read before the first benchmark and after each, kept
with the run, and a warning for a benchmark around which it moved."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe import cli, native
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import MeasurementError
from hpcprobe.families import FAMILIES
from hpcprobe.machine import sentinel, sizing, topology
from hpcprobe.measure.family import OtherDevice
from hpcprobe.results import conditions
from hpcprobe.results.model import read_json

STEADY = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9]


def scaled(by: float) -> list[float]:
    return [x * by for x in STEADY]


def test_readings_that_move_by_15_percent_with_their_cis_apart_are_a_change():
    assert sentinel.moved(STEADY, STEADY) is None
    assert sentinel.moved(STEADY, scaled(0.6)) == pytest.approx(0.6)
    assert sentinel.moved(STEADY, scaled(1.3)) == pytest.approx(1.3)
    assert sentinel.moved(STEADY, scaled(0.88)) is None  # apart, but by less than MOVE
    wide = [40.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 60.0, 50.0]  # median 80, CI 50-140
    assert sentinel.moved(STEADY, wide) is None  # 0.8 of it, but the CIs overlap
    got = sentinel.finding("hpl", STEADY, scaled(0.5))
    assert got is not None
    found = got.to_dict()
    assert found["kind"] == "node_changed" and found["benchmark"] == "hpl"
    assert (found["before"], found["after"], found["ratio"]) == (100.0, 50.0, 0.5)
    assert "went from 100.0 to 50.0 GB/s (x0.50) while it ran" in found["message"]


def test_the_probe_streams_past_the_last_level_cache_on_one_cpu_a_core(nps4):
    p = sentinel.probe(nps4)
    assert len(p.cpus) == 128 and len({nps4.pu(c).core for c in p.cpus}) == 128
    llc = sizing.llc_bytes(nps4, p.cpus)
    assert llc > 900 * 2 ** 20  # every L3 of both packages
    assert abs(p.size_bytes - sentinel.LLC_FACTOR * llc) < 0.01 * p.size_bytes
    assert p.describe()["cpus"] == format_cpulist(p.cpus)


def test_a_reading_on_this_machine_is_validated_bandwidth():
    p = sentinel.probe(topology.discover())
    got = sentinel.read(p, native.best_isa())
    assert len(got) == sentinel.SAMPLES and all(x > 0 for x in got)


def test_arrays_that_do_not_validate_are_no_reading(monkeypatch):
    monkeypatch.setattr(native.Team, "stream_check", lambda self, kernel_id, elems: 1.0)
    with pytest.raises(sentinel.HpcprobeError, match="did not validate"):
        sentinel.read(sentinel.probe(topology.discover()), native.best_isa())


def script(*readings: list[float] | Exception) -> Iterator[list[float]]:
    for r in readings:
        if isinstance(r, Exception):
            raise r
        yield r


def run_toys(monkeypatch, tmp_path, *readings: list[float] | Exception) -> dict:
    seq = script(*readings)
    monkeypatch.setattr(sentinel, "read", lambda p, isa: next(seq))
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "toy2", "--no-store", "--json", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.usefixtures("toy_family")
def test_the_benchmark_during_which_the_node_changed_is_named(monkeypatch, tmp_path):
    doc = run_toys(monkeypatch, tmp_path, STEADY, STEADY, scaled(0.55))
    read = doc["provenance"]["sentinel"]
    assert [r["after"] for r in read["readings"]] == [None, "toy", "toy2"]
    assert read["readings"][2]["samples"] == scaled(0.55)
    assert read["kernel"] == "triad" and read["unit"] == "GB/s"
    found = [f for f in doc["findings"] if f["kind"] == "node_changed"]
    assert [(f["benchmark"], f["ratio"]) for f in found] == [("toy2", 0.55)]
    assert [w for w in doc["warnings"] if "sentinel" in w] == \
        [f"toy2: {found[0]['message']} [HP104 re-measure]"]


@pytest.mark.usefixtures("toy_family")
def test_a_benchmark_that_measured_nothing_is_not_said_to_have_mixed_states(monkeypatch,
                                                                              tmp_path):
    """A skipped family (no GPU, a 1x1 NUMA matrix left out) has no figure to mix up."""
    monkeypatch.setitem(FAMILIES, "toy2", dataclasses.replace(FAMILIES["toy2"],
                                                              run=lambda ctx, opts: None))
    doc = run_toys(monkeypatch, tmp_path, STEADY, STEADY, scaled(0.55))
    assert len(doc["provenance"]["sentinel"]["readings"]) == 3  # still read, and kept
    assert not [f for f in doc["findings"] if f["kind"] == "node_changed"]


@pytest.mark.usefixtures("toy_family")
def test_a_family_of_another_device_is_not_judged_by_the_hosts_dram(monkeypatch, tmp_path):
    """The GPU family's figures (HBM, tensor cores, PCIe) do not depend on the host's DRAM: a
    move of the sentinel around it is no finding on them (on a lent H100 node the sentinel
    read 124.0 then 100.4 GB/s around `hpcprobe gpu`), but the reading after it is still
    taken, to bracket the next family."""
    monkeypatch.setitem(FAMILIES, "toy", dataclasses.replace(
        FAMILIES["toy"], capabilities=(OtherDevice("a toy device"),)))
    doc = run_toys(monkeypatch, tmp_path, STEADY, scaled(0.55), scaled(0.55))
    assert [r["after"] for r in doc["provenance"]["sentinel"]["readings"]] == [None, "toy", "toy2"]
    assert not [f for f in doc["findings"] if f["kind"] == "node_changed"]
    doc = run_toys(monkeypatch, tmp_path, STEADY, STEADY, scaled(0.55))
    assert [f["benchmark"] for f in doc["findings"] if f["kind"] == "node_changed"] == ["toy2"]
    assert FAMILIES["gpu"].capability(OtherDevice) is not None


@pytest.mark.usefixtures("toy_family")
def test_a_steady_node_is_no_warning(monkeypatch, tmp_path):
    doc = run_toys(monkeypatch, tmp_path, STEADY, scaled(1.02), STEADY)
    assert len(doc["provenance"]["sentinel"]["readings"]) == 3
    assert not [f for f in doc["findings"] if f["kind"] == "node_changed"]
    assert not [w for w in doc["warnings"] if "sentinel" in w]


@pytest.mark.usefixtures("toy_family")
def test_a_sentinel_that_fails_leaves_the_benchmarks_and_says_so(monkeypatch, tmp_path):
    doc = run_toys(monkeypatch, tmp_path, STEADY, MeasurementError("no memory for the arrays"))
    assert {m["benchmark"] for m in doc["metrics"]} == {"toy", "toy2"}
    assert [r["after"] for r in doc["provenance"]["sentinel"]["readings"]] == [None]
    assert ("node sentinel: not read (no memory for the arrays); changes of the node during "
            "the run go unseen") in doc["warnings"]


def test_the_run_header_line_gives_the_first_and_the_last_reading():
    kept = {"cpus": "0-127", "size_bytes": 2 << 30, "readings": [
        {"after": None, "samples": STEADY}, {"after": "memory", "samples": scaled(0.9)},
        {"after": "hpl", "samples": scaled(0.5)}]}
    assert sentinel.line(conditions.sentinel(kept)) == (
        "Node sentinel (DRAM triad on CPUs 0-127, 2 GiB): 100.0 GB/s before the first "
        "benchmark, 50.0 after the last")
    kept["readings"] = kept["readings"][:1]
    assert sentinel.line(conditions.sentinel(kept)).endswith(
        "100.0 GB/s before the first benchmark")
    assert sentinel.line(conditions.sentinel({})) is None
    assert sentinel.line(None) is None


def test_a_runs_conditions_read_by_attribute_and_written_back_whole():
    """The conditions a run keeps read as typed records and write back as they were stored;
    a part set to nothing leaves the provenance."""
    stored = {"seconds": {"memory": 12.5}, "steal_percent": {"memory": 3.25},
              "others_percent": {}, "sentinel": {"cpus": "0-1", "size_bytes": 1 << 30,
                                                 "readings": [{"after": None,
                                                               "samples": [10.0, 11.0]}]},
              "interrupted": {"benchmark": "memory", "not_run": ["latency"]}, "host": "n1"}
    got = conditions.Conditions.of(stored)
    assert got.interrupted == conditions.Stop("memory", ("latency",))
    assert got.steal == {"memory": 3.25} and got.sentinel is not None
    assert got.sentinel.first() == (10.0, 11.0) and got.sentinel.about["cpus"] == "0-1"
    again = dict(stored)
    got.into(again)
    assert again == {k: v for k, v in stored.items() if k != "others_percent"}
    conditions.update(again, interrupted=None)
    assert "interrupted" not in again and again["host"] == "n1"
    assert conditions.Conditions.of({}) == conditions.Conditions()


@pytest.mark.usefixtures("toy_family")
def test_a_real_run_is_bracketed(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "--no-store", "--json", str(out)]) == 0
    assert "Node sentinel (DRAM triad on CPUs" in capsys.readouterr().out
    run = read_json(out)  # the schema holds
    read = run.provenance["sentinel"]
    assert [r["after"] for r in read["readings"]] == [None, "toy"]
    assert all(len(r["samples"]) == sentinel.SAMPLES and min(r["samples"]) > 0
               for r in read["readings"])
    assert read["size_bytes"] >= sentinel.FLOOR


def test_a_document_with_a_malformed_sentinel_is_refused(tmp_path):
    run = read_json(DATA / "compare" / "nps1.json")
    for bad in ({"readings": [{"after": None, "samples": []}]},
                {"readings": [{"after": 3, "samples": [50.0]}]},
                {"readings": [{"after": None, "samples": [-1.0]}]}):
        run.provenance["sentinel"] = bad
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(run.to_dict()))
        assert_user_error(hpcprobe("import", str(path), "--db", str(tmp_path / "r.db")),
                          "not an hpcprobe result")
