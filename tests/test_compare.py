"""Comparing runs: the statistics, the join, golden outputs on a stored pair of runs (NPS1 vs
NPS4), the CLI by file, id, tag and host, and bad input."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe import registry
from hpcprobe.analysis import compare
from hpcprobe.common import stats
from hpcprobe.common.errors import UserError
from hpcprobe.results import model as results
from hpcprobe.results.model import Metric
from hpcprobe.results.store import Store

IGNORE = registry.not_joined()

PAIR = DATA / "compare"
BASE, NPS4 = str(PAIR / "nps1.json"), str(PAIR / "nps4.json")


def test_mann_whitney_and_ratio_ci():
    a, b = [10.0, 10.1, 9.9, 10.2, 10.0], [11.0, 11.2, 10.9, 11.1, 11.3]
    assert stats.mann_whitney_p(a, b) == pytest.approx(0.0119, abs=1e-3)
    assert stats.mann_whitney_p(a, a) > 0.5
    lo, hi = stats.median_ratio_ci(a, b)
    assert lo <= 11.1 / 10.0 <= hi and hi - lo < 0.1
    assert stats.median_ratio_ci(a, b) == (lo, hi)  # seeded: the same every time
    # too few samples or no spread: the point ratio, and no evidence of a difference
    assert stats.median_ratio_ci([2.0], [3.0]) == (1.5, 1.5)
    assert stats.mann_whitney_p([1.0], [2.0]) == 1.0


def test_golden_csv_and_json():
    r = hpcprobe("compare", BASE, NPS4, "--csv")
    assert r.code == 0, r.err
    got = list(csv.DictReader(io.StringIO(r.out)))
    want = list(csv.DictReader((PAIR / "golden.csv").open()))
    assert [row["params"] for row in got] == [row["params"] for row in want]
    for g, w in zip(got, want, strict=True):
        for k in w:
            try:
                # the bootstrap CI may move in the last digits between scipy versions
                tol = 1e-3 if k.startswith("ratio_ci") else 1e-9
                assert float(g[k]) == pytest.approx(float(w[k]), rel=tol, abs=1e-12), k
            except ValueError:
                assert g[k] == w[k], k
    r = hpcprobe("compare", BASE, NPS4, "--json")
    doc, gold = json.loads(r.out), json.loads((PAIR / "golden.json").read_text())
    assert doc["differences"] == gold["differences"]
    assert [x["verdict"] for x in doc["rows"]] == [x["verdict"] for x in gold["rows"]]


def test_nps4_reads_as_the_field_states_it():
    c = compare.compare([results.read_json(BASE), results.read_json(NPS4)], IGNORE)
    assert ("NUMA domains per socket", ["1", "4"]) in c.differences
    top = c.rows[0]  # the largest effect first
    assert (top.benchmark, top.name, top.verdict) == ("memory", "bandwidth", "better")
    assert "kernel=triad" in top.params and "cpus" not in top.params  # binding is not joined
    assert top.change_pct == pytest.approx(100 * (678.5 / 600.5 - 1))
    lat = next(r for r in c.rows if r.name == "latency")
    assert lat.verdict == "~" and lat.few_samples  # n = 3: not significant, flagged
    same = next(r for r in c.rows if "kernel=copy" in r.params)
    assert same.verdict == "~" and same.ratio == 1.0
    assert c.only_in == {"b0000000000b (nps4)": 1}
    assert [r.effect for r in c.rows] == sorted((r.effect for r in c.rows), reverse=True)


def test_lower_is_better_verdicts():
    run_a, run_b = results.read_json(BASE), results.read_json(BASE)
    run_b.run_id = "c" * 12
    run_b.metrics = [Metric(m.benchmark, m.name, m.unit, m.params, [x * 0.8 for x in m.samples],
                            m.better) for m in run_a.metrics]
    rows = {r.name: r for r in compare.compare([run_a, run_b], IGNORE).rows}
    assert rows["latency"].ratio == pytest.approx(0.8)
    assert rows["bandwidth"].verdict == "worse"
    assert math.isclose(rows["latency"].effect, abs(math.log(0.8)))


def test_runs_with_nothing_in_common_are_refused():
    a = results.read_json(BASE)
    b = results.read_json(NPS4)
    b.metrics = [m for m in b.metrics if m.params.get("threads") == 8]
    with pytest.raises(UserError, match="no metric in common"):
        compare.compare([a, b], IGNORE)
    with pytest.raises(UserError, match="at least two runs"):
        compare.compare([a], IGNORE)


def test_compare_from_the_store_by_id_tag_and_host(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        for f in (BASE, NPS4):
            st.save(results.read_json(f))
    r = hpcprobe("compare", "nps1", "b0000", "--db", str(db))
    assert r.code == 0, r.err
    assert "NUMA domains per socket" in r.out and "+13.0 %" in r.out
    assert "Joined metrics by effect size (all " in r.out
    r = hpcprobe("compare", "nps1", "b0000", "--db", str(db), "--limit", "1")
    assert "(the 1 largest of " in r.out and "--limit 0 for all" in r.out
    host = results.read_json(BASE).host  # the latest run of that host: nps4
    r = hpcprobe("compare", "a000", host, "--db", str(db), "--json")
    assert json.loads(r.out)["runs"][1].startswith("b0000000000b")


def test_bad_references_and_files(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(results.read_json(BASE))
    assert_user_error(hpcprobe("compare", "nps1", "nosuchrun", "--db", str(db)),
                      "nosuchrun", "no run id")
    old = json.loads((PAIR / "nps4.json").read_text())
    old["schema_version"] = 99
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert_user_error(hpcprobe("compare", BASE, str(tmp_path / "old.json")),
                      "schema version 99")
    (tmp_path / "bad.json").write_text("{not json")
    assert_user_error(hpcprobe("compare", BASE, str(tmp_path / "bad.json")), "not JSON")
    # one run named twice (by tag and by id, or its file and its stored copy)
    run_id = results.read_json(BASE).run_id
    assert_user_error(hpcprobe("compare", "nps1", run_id[:6], "--db", str(db)),
                      f"nps1 and {run_id[:6]} are the same run ({run_id})")
    assert_user_error(hpcprobe("compare", str(BASE), "nps1", "--db", str(db)), "same run")


def strict(text: str) -> object:
    """JSON as RFC 8259 has it: NaN and Infinity refused (Python's json reads them)."""
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_an_unbounded_ratio_ci_is_null_in_json(tmp_path):
    """A baseline with zeros among its samples (retransmits, errors): its resampled medians can
    be 0, so the ratio's CI has no upper end; the document says null, not Infinity."""
    assert stats.median_ratio_ci([0, 0, 1, 1, 2], [1, 1, 1, 2, 2])[1] == math.inf
    paths = []
    for name, samples in (("a", [0.0, 0.0, 1.0, 1.0, 2.0]), ("b", [1.0, 1.0, 1.0, 2.0, 2.0])):
        run = results.read_json(BASE)
        run.run_id = name * 12
        run.metrics = [Metric("iperf3", "retransmits", "count", {"protocol": "tcp"}, samples,
                              "lower")]
        paths.append(tmp_path / f"{name}.json")
        results.write_json(run, paths[-1])
    r = hpcprobe("compare", *map(str, paths), "--json")
    assert r.code == 0, r.err
    row = strict(r.out)["rows"][0]  # type: ignore[index]
    assert row["ratio_ci_high"] is None and row["ratio"] == 1.0


def test_an_interrupted_run_is_said_to_lack_its_later_figures(tmp_path):
    """Its figures from the benchmark it stopped in on are missing, not unjoined: say so."""
    run = results.read_json(NPS4)
    run.provenance["interrupted"] = {"benchmark": "latency", "not_run": ["numa"]}
    cut = tmp_path / "cut.json"
    results.write_json(run, cut)
    r = hpcprobe("compare", BASE, str(cut))
    assert r.code == 0, r.err
    assert f"Run {compare.label(run)} was interrupted during latency: the figures it would " \
        "have measured from there on are missing from it." in " ".join(r.out.split())
    assert "was interrupted" not in hpcprobe("compare", BASE, NPS4).out
    r = hpcprobe("compare", BASE, str(cut), "--json")
    assert json.loads(r.out)["interrupted"] == {compare.label(run): "latency"}


def test_a_run_during_which_the_host_took_cpu_time_is_said_to(tmp_path):
    """Steal time of a benchmark from 1 % on is named: a change there may be the host's."""
    run = results.read_json(NPS4)
    run.provenance["steal_percent"] = {"memory": 4.25, "latency": 0.3, "numa": 1.0}
    stolen = tmp_path / "stolen.json"
    results.write_json(run, stolen)
    r = hpcprobe("compare", BASE, str(stolen))
    assert r.code == 0, r.err
    assert f"Run {compare.label(run)}: the hypervisor took CPU time while memory ran (4.2 %), " \
        "numa ran (1.0 %) (steal time): those figures carry the host's load too." in \
        " ".join(r.out.split())
    assert "steal time" not in hpcprobe("compare", BASE, NPS4).out
    r = hpcprobe("compare", BASE, str(stolen), "--json")
    assert json.loads(r.out)["steal_percent"] == {compare.label(run): {"memory": 4.25,
                                                                       "numa": 1.0}}


def test_runs_whose_node_sentinel_moved_or_started_elsewhere_are_said_to(tmp_path):
    """A benchmark around which the sentinel moved is named; a run whose node streamed
    differently from the baseline's before its first benchmark is named with both figures."""
    steady = [50.0, 50.5, 49.5, 50.2, 49.8, 50.1, 49.9, 50.3, 49.7]

    def with_sentinel(path, first: list[float], moved_in: str | None = None):
        run = results.read_json(path)
        run.provenance["sentinel"] = {"kernel": "triad", "readings": [
            {"after": None, "samples": first}]}
        if moved_in:
            run.findings.append({"benchmark": moved_in, "kind": "node_changed", "ratio": 0.61,
                                 "message": "moved"})
        out = tmp_path / f"{run.run_id}-{len(first)}-{moved_in}.json"
        results.write_json(run, out)
        return run, str(out)

    _, base = with_sentinel(BASE, steady)
    run, slow = with_sentinel(NPS4, [x * 0.7 for x in steady], "memory")
    r = hpcprobe("compare", base, slow)
    assert r.code == 0, r.err
    said = " ".join(r.out.split())
    assert (f"Run {compare.label(run)}: the node's DRAM triad (its sentinel) moved while memory "
            "ran (x0.61): those figures may mix two states of the node.") in said
    assert (f"Run {compare.label(run)}: before its first benchmark its node streamed 35.0 GB/s "
            "against the baseline's 50.0 (x0.70, the sentinel's DRAM triad)") in said
    doc = json.loads(hpcprobe("compare", base, slow, "--json").out)
    assert doc["node_changed"] == {compare.label(run): {"memory": 0.61}}
    assert doc["sentinel_start"] == {compare.label(run): {"baseline": 50.0,
                                                          "run": pytest.approx(35.0)}}
    _, same = with_sentinel(NPS4, [x * 1.01 for x in steady])
    said = " ".join(hpcprobe("compare", base, same).out.split())
    assert "sentinel" not in said
