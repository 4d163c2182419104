"""A figure's history: change points found in series with a known step and none in stationary
ones, disturbed runs left out, each change attributed to the configuration difference across
it; `hpcprobe history` on SQLite and PostgreSQL stores of node runs over 20 nights (made from
the recorded node probe of tests/data/cluster), its JSON and CSV, and its bad input."""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis.strategies import floats, lists

import clusterdata
from conftest import assert_user_error, hpcprobe
from hpcprobe.cli import main
from hpcprobe.history import changes as history
from hpcprobe.results.model import Run, read_json
from hpcprobe.results.store import Selection, Store

NIGHTS = 20
STEP_NIGHT = 12


def series(n: int, step_at: int | None = None, step: float = 0.0, noise: float = 0.01,
           seed: int = 0) -> list[history.Point]:
    rng = random.Random(seed)
    return [history.Point(f"r{i:02d}", f"2026-03-{i + 1:02d}T02:00:00+00:00", "n1", None,
                          100 * (1 + rng.gauss(0, noise)) *
                          (1 + step if step_at is not None and i >= step_at else 1), noise)
            for i in range(n)]


def test_a_step_is_found_with_its_size_its_ci_and_its_runs_either_side():
    [c] = history.change_points(series(24, 12, -0.08, seed=3))
    assert (c.before.run_id, c.after.run_id) == ("r11", "r12")
    assert c.ratio == pytest.approx(0.92, abs=0.02) and c.ratio_ci[0] < c.ratio < c.ratio_ci[1]
    assert c.p < history.ALPHA and c.runs_after == 12
    # the 95 % CI of the step holds the true step in most series (not in every one)
    covered = 0
    for seed in range(100):
        found = history.change_points(series(24, 12, -0.08, seed=seed))
        covered += any(f.ratio_ci[0] <= 0.92 <= f.ratio_ci[1] for f in found)
    assert covered >= 85


def test_stationary_series_have_no_change_points():
    found = sum(len(history.change_points(series(30, seed=s))) for s in range(60))
    assert found <= 2  # 1,800 runs: the benchmark measures the rate (docs/history.md)


def test_many_series_are_searched_on_the_cpus_with_the_same_change_points():
    """300 series: shared among the CPUs (two or more), the same steps as one by one."""
    many = [([p.median for p in pts], [p.rel_ci for p in pts])
            for pts in (series(40, 20 if i % 3 else None, -0.1, seed=i)
                        for i in range(3 * history.PARALLEL))]
    shared = history.steps_of(many)
    assert shared == history._steps_each(many)
    assert sum(1 for found in shared if found) >= 2 * history.PARALLEL - 5


def test_searches_ahead_run_on_workers_begun_before_them_with_the_same_steps():
    """A report's searches on workers begun before it reads its series (each imports ruptures
    meanwhile): the steps found one by one, and the workers gone after; none begun where no
    search is likely."""
    import os

    many = [([p.median for p in pts], [p.rel_ci for p in pts])
            for pts in (series(12, 6 if i % 2 else None, -0.1, seed=i) for i in range(40))]
    import multiprocessing

    with history.ahead():
        if len(os.sched_getaffinity(0)) > 1:  # begun, before any search
            assert history._ahead is not None and multiprocessing.active_children()
        got = history.steps_of(many)
        assert history.steps_of([]) == []
        # two figures' searches begun before either is asked for (the next read meanwhile)
        first, second = history.begun(many[:15]), history.begun(many[15:])
        assert second() + first() == history._steps_each(many[15:]) + history._steps_each(
            many[:15])
        assert history.begun([])() == []
    assert got == history._steps_each(many) and history._ahead is None
    assert sum(1 for found in got if found) >= 15
    with history.ahead(likely=False):  # a history too short to search: none begun
        assert history._ahead is None


@settings(deadline=None, max_examples=300)
@given(lists(floats(-5, 5), min_size=history.MIN_RUNS, max_size=60),
       floats(1e-4, 1.0))
def test_the_search_loaded_alone_finds_what_kernelcpd_finds(logs, sigma):
    """ruptures' C search, loaded without ruptures (which imports SciPy's statistics for its
    other costs), gives KernelCPD's segments, every one: a release of ruptures that changes
    it fails here (and where it cannot be loaded, KernelCPD is used)."""
    import numpy as np
    import ruptures

    assert history._pelt_l2() is not None
    x = np.array(logs)
    scale = max(sigma, history.FLOOR / 4)
    pen = history.PENALTY * scale ** 2 * np.log(len(x))
    algo = ruptures.KernelCPD(kernel="linear", min_size=history.MIN_SEGMENT, jump=1)
    assert history._breaks(x, sigma) == [int(e) for e in algo.fit(x.reshape(-1, 1))
                                         .predict(pen=pen)[:-1]]


def test_a_search_needs_neither_ruptures_nor_scipy_stats_imported():
    """A report's search worker loads in a third of a second what importing ruptures took
    1.2 s for: its C search alone and SciPy's special functions; the steps found the same."""
    import subprocess
    import sys

    code = ("import sys; from hpcprobe.history import changes as h; h.searcher(); "
            "print(h.steps([1.0] * 8 + [1.3] * 8, [0.01] * 16)[0].cut, "
            "sorted(m for m in ('ruptures', 'scipy.stats', 'scipy.spatial') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    assert out == ["8", "[]\n"]


@settings(deadline=None, max_examples=300)
@given(lists(floats(-1e300, 1e300), min_size=1, max_size=40))  # logs: far inside
def test_the_searchs_median_is_numpys_every_bit(values):
    import numpy as np

    assert history.median(np.array(values)) == float(np.median(values))


def test_too_few_runs_are_not_searched_and_disturbed_runs_are_left_out():
    assert history.change_points(series(history.MIN_RUNS - 1, 3, -0.2)) == []
    pts = series(16, 8, -0.1, seed=1)
    # the runs after the step, all disturbed: left out, so nothing is left to see it
    marked = [p._replace(disturbed="node_changed") if i >= 8 else p for i, p in enumerate(pts)]
    assert history.change_points(marked) == []
    assert len(history.change_points(pts)) == 1


def test_a_groups_campaign_medians_take_a_reused_tag_by_day_and_leave_one_host_out():
    def pt(host: str, day: int, tag: str | None, median: float) -> history.Point:
        return history.Point(f"{host}{day}", f"2026-06-{day:02d}T02:00:00+00:00", host, tag,
                             median, 0.01)
    # "nightly" every night on both hosts: one campaign a day; c1 once on each: one campaign
    series = {"a": [pt("a", 1, "nightly", 10.0), pt("a", 2, "nightly", 12.0),
                    pt("a", 3, "c1", 20.0), pt("a", 4, None, 7.0)],
              "b": [pt("b", 1, "nightly", 14.0), pt("b", 2, "nightly", 16.0),
                    pt("b", 4, "c1", 30.0)]}
    got = history.campaign_medians(series, "g")
    assert [(p.tag, p.median, p.created[:10]) for p in got] == [
        ("nightly@2026-06-01", 12.0, "2026-06-01"), ("nightly@2026-06-02", 14.0, "2026-06-02"),
        ("c1", 25.0, "2026-06-03")]  # a's untagged run of day 4 is alone: left out
    assert all(p.host == "g" and p.rel_ci > 0 for p in got)


def test_a_sparkline_spans_its_values():
    assert history.sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert history.sparkline([5, 5]) == "▄▄" and history.sparkline([]) == ""


def _store(location: str) -> None:
    """n1 and n2 lose 10 % from night 12 on, when their kernel changed; n3 does not. Night 3
    of n3 ran while the node's sentinel moved: disturbed."""
    template = read_json(clusterdata.TEMPLATE)  # validated as it is read: stored unchecked
    rng = random.Random(5)
    with Store.open(location) as st, st.transaction():
        for night in range(NIGHTS):
            _store_night(st, template, rng, night)


def _store_night(st: Store, template: Run, rng: random.Random, night: int) -> None:
    for host in ("n1", "n2", "n3"):
        changed = host != "n3" and night >= STEP_NIGHT
        r = clusterdata.node_run(template, host, 0.9 if changed else 1.0, rng, 0.01, 0,
                                 f"nightly-{night:02d}")
        prov = {**r.provenance, "kernel": "Linux 6.9" if changed else "Linux 6.1"}
        findings = [{"benchmark": "memory", "kind": "node_changed", "message": "moved"}
                    ] if (host, night) == ("n3", 3) else []
        st.insert(replace(r, created=f"2026-03-{night + 1:02d}T02:00:00+00:00",
                          provenance=prov, findings=findings))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    db = tmp_path_factory.mktemp("history") / "r.sqlite"
    _store(str(db))
    return str(db)


def test_history_names_each_change_and_what_changed_across_it(stored, capsys):
    assert main(["history", "--db", stored, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    triad = {s["host"]: s for s in doc["series"] if s["figure"] == "DRAM triad, 2 cores"}
    assert set(triad) == {"n1", "n2", "n3"} and triad["n3"]["changes"] == []
    for host in ("n1", "n2"):
        [c] = triad[host]["changes"]
        assert c["date"].startswith(f"2026-03-{STEP_NIGHT + 1:02d}")
        assert c["ratio_ci95"][0] < 0.9 < c["ratio_ci95"][1]
        assert {"what": "kernel", "values": ["Linux 6.1", "Linux 6.9"]} in c["differences"]
    n3 = triad["n3"]["points"]
    assert [p["disturbed"] for p in n3].count("node_changed") == 1 and len(n3) == NIGHTS
    lat = [s for s in doc["series"] if s["figure"].startswith("L1 latency") and
           s["host"] == "n1"]
    assert lat[0]["changes"][0]["ratio"] > 1.05  # a latency rises (lower is better)
    # each change point is a judgement record: the level after against the level before,
    # below where the figure moved the worse way (the triad fell, the latency rose)
    judged = {(j["figure"], j["subject"]): j for j in doc["judgements"]}
    for key in (("DRAM triad, 2 cores", "n1"), (lat[0]["figure"], "n1")):
        j = judged[key]
        assert (j["basis"], j["mark"]) == ("history", "below")
        assert j["expected"] == pytest.approx(
            next(c["level_before"] for s in doc["series"] if (s["figure"], s["host"]) == key
                 for c in s["changes"]))


def test_history_of_one_metric_one_host_and_its_terminal_table(stored, capsys):
    assert main(["history", "--db", stored, "--metric", "memory.bandwidth", "--param",
                 "kernel=triad", "--param", "level=DRAM", "--param", "threads=2", "--param",
                 "phase=stream", "--param", "stores=regular", "--host", "n1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "memory.bandwidth (GB/s, higher is better): 1 series" in out
    assert "2026-03-13 -" in out and "kernel Linux 6.1 -> Linux 6.9" in out


def test_a_tag_prefix_selects_the_later_nights_and_csv_has_a_row_per_run(stored, tmp_path):
    out = tmp_path / "h.csv"
    r = hpcprobe("history", "--db", stored, "--metric", "memory.bandwidth", "--param",
                 "kernel=triad", "--param", "level=DRAM", "--param", "threads=1", "--param",
                 "phase=stream", "--param", "stores=regular", "--tag-prefix", "nightly-1",
                 "--csv", str(out))
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 3 * 10 and {row["tag"][:9] for row in rows} == {"nightly-1"}
    assert "too few runs" not in r.out  # 10 runs a host: searched


def test_history_bad_input_is_one_line(stored, tmp_path):
    cases = [(("--metric", "memory.nosuch"), "memory has no metric 'nosuch'"),
             (("--param", "kernel=triad"), "add --metric"),
             (("--host", "nowhere"), "no stored run matches the selection"),
             (("--metric", "memory.bandwidth", "--param", "kernel=nosuch"),
              "no figure of memory.bandwidth with kernel=nosuch"),
             (("--metric", "memory.bandwidth"), "narrow with --param")]
    for args, said in cases:
        assert_user_error(hpcprobe("history", "--db", stored, *args), said)
    assert_user_error(hpcprobe("history", "--db", str(tmp_path / "none.sqlite")), "")


def test_too_few_runs_are_said_plainly(stored):
    r = hpcprobe("history", "--db", stored, "--tag-prefix", "nightly-00")
    assert r.code == 0, r.err
    assert "too few runs to search (1 < 6)" in " ".join(r.out.split())


def test_each_series_search_is_kept_and_reused_only_for_the_same_values(stored, tmp_path,
                                                                          capsys):
    """A second read reuses each series' kept search, and its hardware group's campaign
    medians' (a kept result altered while its values stay is what the second read shows); a
    run stored since changes the values: searched again."""
    db = tmp_path / "r.sqlite"
    shutil.copy(stored, db)
    args = ["history", "--db", str(db), "--metric", "memory.bandwidth", "--param",
            "kernel=triad", "--param", "level=DRAM", "--param", "threads=2", "--param",
            "phase=stream", "--param", "stores=regular", "--json"]

    def changes() -> tuple[dict[str, int], int]:
        assert main(args) == 0
        doc = json.loads(capsys.readouterr().out)
        return {x["host"]: len(x["changes"]) for x in doc["series"]}, len(doc["groups"])

    first = changes()
    assert first == ({"n1": 1, "n2": 1, "n3": 0}, 1) and changes() == first
    with Store.open(db, create=False) as st, st.transaction():  # type: ignore[attr-defined]
        st._execute("UPDATE kept_results SET value = '[]'")  # type: ignore[attr-defined]
    assert changes() == ({"n1": 0, "n2": 0, "n3": 0}, 0)
    with Store.open(db, create=False) as st, st.transaction():  # type: ignore[attr-defined]
        _store_night(st, read_json(clusterdata.TEMPLATE), random.Random(9), NIGHTS)
    assert changes() == first
    found = history.steps([100.0 * (0.9 if i > 9 else 1) for i in range(20)], [0.01] * 20)
    assert found and history.steps_from(history.steps_text(found)) == found


def test_postgresql_gives_the_same_history(pg_url, stored):
    _store(pg_url)
    with Store.open(pg_url, create=False) as pg, Store.open(stored, create=False) as lite:
        for st in (pg, lite):
            assert len(st.runs(where=Selection(tag_prefix="nightly-1"))) == 30
            assert sum(1 for f, _ in st.disturbances().values() if f) == 1
    docs = []
    for db in (pg_url, stored):
        r = hpcprobe("history", "--db", db, "--host", "n2", "--json")
        assert r.code == 0, r.err
        docs.append([(s["figure"], len(s["changes"])) for s in json.loads(r.out)["series"]])
    assert docs[0] == docs[1] and ("DRAM triad, 2 cores", 1) in docs[0]


def test_node_changes_at_about_the_same_time_the_same_way_are_one_fleet_change():
    def change(host: str, day: int, ratio: float, kernel: str) -> history.Change:
        before = history.Point("b", f"2026-05-{day - 1:02d}T00:00:00+00:00", host, None, 1.0,
                               0.01)
        after = before._replace(run_id="a", created=f"2026-05-{day:02d}T00:00:00+00:00")
        return history.Change(before, after, 1.0, ratio, ratio, (ratio, ratio), 1e-6, 5, 5,
                              [("kernel", ["6.1", kernel])])
    changes = {"n1": [change("n1", 14, 0.91, "6.9")], "n2": [change("n2", 15, 0.90, "6.9")],
               "n3": [change("n3", 14, 0.92, "6.8")], "n4": [change("n4", 14, 1.1, "6.9")],
               "n5": [change("n5", 25, 0.9, "6.9")]}
    first, up, late = history.fleet(changes, hosts=6)
    assert first.nodes == ["n1", "n2", "n3"] and first.of == 6
    assert first.change == pytest.approx(-0.09) and first.date.startswith("2026-05-14")
    assert first.causes[0] == ("kernel", "6.1 -> 6.9", 2)
    assert up.nodes == ["n4"] and late.nodes == ["n5"]  # the other way; eleven days later


def test_the_groups_change_names_how_many_nodes_moved_and_what_most_of_them_changed(stored,
                                                                                   capsys):
    assert main(["history", "--db", stored, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [f] = [f for f in doc["fleet"] if f["figure"] == "DRAM triad, 2 cores"]
    assert f["nodes"] == ["n1", "n2"] and f["of"] == 3 and f["change"] < -0.05
    assert {"what": "kernel", "values": "Linux 6.1 -> Linux 6.9", "nodes": 2} in f["causes"]
    # the campaign medians of the three nodes (one hardware group) step down with them
    [g] = [g for g in doc["groups"] if g["figure"] == "DRAM triad, 2 cores"]
    assert g["date"].startswith(f"2026-03-{STEP_NIGHT + 1:02d}") and g["ratio"] < 0.95
    assert (g["hosts"], g["moved"]) == (3, 2)
    assert {"what": "kernel", "values": "Linux 6.1 -> Linux 6.9", "hosts": 2} in g["causes"]
    assert main(["history", "--db", stored]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "change points of each hardware group's campaign medians" in out
    # the nodes' change together is the group's: not a table of its own
    assert "nodes that changed together" not in out


def _fleet(location: str) -> None:
    """21 nodes of one CPU, of which a21 alone loses 10 % from night 5 (nothing in its
    configuration changed), and 3 of another CPU that all lose 9 % then with a BIOS update."""
    template = read_json(clusterdata.TEMPLATE)
    rng = random.Random(7)
    with Store.open(location) as st, st.transaction():
        for night in range(10):
            for host in [f"a{i:02d}" for i in range(1, 22)] + ["b1", "b2", "b3"]:
                late = night >= 5
                factor = 0.9 if host == "a21" and late else 0.91 if host[0] == "b" and late \
                    else 1.0
                r = clusterdata.node_run(template, host, factor, rng, 0.005, 0,
                                         f"nightly-{night:02d}")
                dmi = {**r.provenance.get("dmi", {}),
                       "bios_version": "2.4" if host[0] == "b" and late else "2.3"}
                prov = {**r.provenance, "dmi": dmi, "cpu_model": f"CPU {host[0].upper()}"}
                st.insert(replace(r, created=f"2026-04-{night + 1:02d}T02:00:00+00:00",
                                  provenance=prov))


def test_hardware_groups_apart_and_a_large_fleet_shows_who_changed_alone(tmp_path, capsys):
    db = str(tmp_path / "fleet.sqlite")
    _fleet(db)
    triad = ["--metric", "memory.bandwidth", "--param", "kernel=triad", "--param", "level=DRAM",
             "--param", "threads=2", "--param", "phase=stream", "--param", "stores=regular"]
    assert main(["history", "--db", db, *triad, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {h: g.split(",")[0] for h, g in doc["hardware"].items()} == \
        {**{f"a{i:02d}": "CPU A" for i in range(1, 22)}, **{f"b{i}": "CPU B" for i in (1, 2, 3)}}
    [g] = doc["groups"]  # group A's median does not move for one node
    assert g["group"].startswith("CPU B") and (g["hosts"], g["moved"]) == (3, 3)
    assert g["causes"][0] == {"what": "BIOS", "values": "2.3 -> 2.4", "hosts": 3}
    assert main(["history", "--db", db, *triad]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines() if line.strip().startswith(("a", "b"))]
    assert rows == ["a21"]  # past 20 hosts: those that changed alone
    assert "24 hosts: 1 changed alone, 3 with others (above), 20 without a change point" in \
        " ".join(out.split())
    assert main(["history", "--db", db, *triad, "--details"]) == 0
    assert sum(line.strip().startswith(("a", "b")) for line in
               capsys.readouterr().out.splitlines()) >= 24
    assert main(["history", "--db", db, *triad, "--group", "cpu b", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted({s["host"] for s in doc["series"]}) == ["b1", "b2", "b3"]
    assert_user_error(hpcprobe("history", "--db", db, *triad, "--group", "EPYC"),
                      "--group EPYC: no host selected is of such hardware; their groups: CPU A")


def test_a_runs_verdict_names_a_recent_change_in_its_hosts_history(stored):
    r = hpcprobe("show", "n1", "--db", stored)
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert "History: since 2026-03-13 (kernel Linux 6.1 -> Linux 6.9): DRAM triad, 1 core -" in out
    assert "`hpcprobe history --host n1`" in out
    quiet = hpcprobe("show", "n3", "--db", stored)
    assert quiet.code == 0 and "History:" not in quiet.out
    # a run from before the step: nothing to name
    assert "History:" not in hpcprobe("show", "nightly-05", "--db", stored).out


def test_the_html_page_has_each_figures_tables_and_plot(stored, tmp_path):
    out = tmp_path / "h.html"
    r = hpcprobe("history", "--db", stored, "--host", "n1", "-o", str(out))
    assert r.code == 0, r.err
    html = out.read_text()
    figures = html.count("(GB/s, higher is better)") + html.count("(ns, lower is better)")
    assert html.count('<img class="plot"') >= 9 and figures >= 6
    assert "nodes that changed together" not in html  # one host: no fleet
    both = hpcprobe("history", "--db", stored, "-o", str(out))
    assert both.code == 0 and "change points of each hardware group" in out.read_text()
    assert_user_error(hpcprobe("history", "--db", stored, "--json", "-", "-o", "-"),
                      "each would write to standard output")
