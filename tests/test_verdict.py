"""The verdict: headline figures judged against a reference and their ceilings; references
made from runs, written and read as TOML; run and show open with the verdict."""

import json
import re
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis.strategies import floats, lists

from conftest import assert_user_error, hpcprobe
from hpcprobe import registry
from hpcprobe.analysis import reference
from hpcprobe.analysis.verdict import DISTURBED, FLOOR, Expected, Headline, Reference
from hpcprobe.common.errors import UserError
from hpcprobe.judge.run import judge, verdict
from hpcprobe.results.model import Metric, Run
from hpcprobe.views import verdict as verdict_view


def _metric(samples, better="higher", benchmark="memory"):
    return Metric(benchmark, "bandwidth", "GB/s", {}, list(samples), better)


def _expected(value, tolerance=0.05, better="higher"):
    return Expected("k", "a figure", "GB/s", better, value, tolerance, 3)


TIGHT = [99.0, 99.5, 100.0, 100.5, 101.0, 100.2, 99.8, 100.1, 99.9, 100.0]


def test_a_figure_within_its_tolerance_is_ok_and_one_past_it_with_its_ci_apart_is_below():
    h = Headline("k", "a figure", _metric(TIGHT))
    assert judge(h, _expected(102.0), None).mark == "ok"  # 2 % under: within 5 %
    row = judge(h, _expected(110.0), None)  # 9 % under, the whole CI past 104.5
    assert row.mark == "below" and row.change == pytest.approx(100.0 / 110.0 - 1)
    # lower is better (a latency): above the reference is worse
    lat = Headline("k", "latency", _metric(TIGHT, "lower"))
    assert judge(lat, _expected(90.0, better="lower"), None).mark == "below"
    assert judge(lat, _expected(110.0, better="lower"), None).mark == "ok"


def test_a_figure_too_noisy_or_disturbed_is_not_judged():
    wide = Headline("k", "a figure", _metric([60, 140, 80, 120, 100, 70, 130]))
    row = judge(wide, _expected(100.0), None)
    assert (row.mark, row.why.split()[0]) == ("not judged", "noisy")
    tight = Headline("k", "a figure", _metric(TIGHT))
    assert judge(tight, _expected(130.0), "node moved").why == "node moved"
    assert judge(tight, None, None).why == "no reference"
    assert judge(Headline("k", "x", _metric([100.0, 99.0])), _expected(130.0), None).why == "n=2"
    # a median past the threshold whose CI reaches back over it: not judged, not below
    edge = Headline("k", "a figure", _metric([90, 97, 93, 99, 94, 96, 92, 98, 91, 95]))
    assert judge(edge, _expected(100.0, 0.05), None).mark == "not judged"


def test_above_its_ceiling_is_a_finding_about_the_ceiling():
    h = Headline("k", "a figure", _metric(TIGHT), ceiling=90.0, ceiling_source="test")
    assert h.of_ceiling == pytest.approx(100.0 / 90.0)
    assert judge(h, None, None).mark == "above ceiling"
    assert judge(Headline("k", "x", _metric(TIGHT), 200.0), None, None).mark == "not judged"


def test_a_median_above_its_ceiling_whose_ci_reaches_it_is_judged_as_any_figure():
    """A shared host's 1-core peak at 105.6 % ±7.5 % of its model: the low end of its CI is
    under the ceiling, so nothing says the ceiling or the figure is wrong. It is judged against
    its reference as any figure; its ceiling judgement is not judged."""
    noisy = [90.0, 98.0, 104.0, 105.0, 105.6, 106.0, 107.0, 110.0, 112.0, 120.0]
    h = Headline("k", "a peak", _metric(noisy), ceiling=100.0, ceiling_source="model")
    assert h.of_ceiling > 1.05 and h.metric.summary.ci95[0] < 100.0
    assert not h.above_ceiling and h.near_ceiling
    row = judge(h, _expected(105.0, 0.05), None)
    assert row.mark != "above ceiling"
    ceiling, ref = row.judgements()
    assert (ceiling.mark, ref.basis) == ("not judged", "reference")
    assert ceiling.why.startswith("its CI reaches back to its ceiling")
    # its whole CI above: a finding about the ceiling
    assert judge(Headline("k", "a peak", _metric(noisy), 85.0), None, None).mark == \
        "above ceiling"


def test_steal_and_a_moved_sentinel_leave_only_their_benchmark_unjudged():
    run = Run("r1", "2026-11-01T00:00:00+00:00", "n1", "quick", ["memory"], {}, {},
              [_metric(TIGHT), _metric(TIGHT, benchmark="cg")],
              [{"benchmark": "cg", "kind": "node_changed", "ratio": 0.8, "message": "m"}])

    def pick(r):
        return [Headline(f"{m.benchmark}.x", m.benchmark, m) for m in r.metrics]

    ref = Reference("test", {"memory.x": _expected(100.0), "cg.x": _expected(100.0)})
    v = verdict(run, [pick], ref)
    assert [(r.headline.key, r.mark, r.why) for r in v.rows] == [
        ("memory.x", "ok", ""), ("cg.x", "not judged", "node moved")]
    assert not v.failed


def test_a_reference_takes_the_median_and_a_tolerance_from_the_spread_never_under_its_floor():
    def head(median):
        s = _metric([median * x / 100 for x in TIGHT]).summary
        return reference.Given("k", "f", "GB/s", "higher", FLOOR, s.median, s.rel_ci_halfwidth)

    steady = reference.expected([head(100.0), head(100.5), head(99.5), head(100.2)])
    assert steady.value == pytest.approx(100.1, abs=0.2) and steady.tolerance == 0.05
    spread = reference.expected([head(100.0), head(90.0), head(110.0), head(104.0),
                                 head(96.0)])
    assert spread.tolerance > 0.05 and spread.spread is not None
    assert spread.tolerance >= 3 * spread.spread - 0.005
    assert reference.expected([head(100.0)]).runs == 1


def _flat(text):
    """The text with its lines joined (the verdict folds long lines at 100 columns)."""
    return " ".join(text.split())


def _doc_run(path):
    from hpcprobe.results import model

    return model.read_json(path)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Two real runs of the latency family (an L2 working set) in one store."""
    tmp = tmp_path_factory.mktemp("verdict")
    db = tmp / "r.sqlite"
    runs = []
    for i in (1, 2):
        # a run's time is to the second, and a run of the same second is not before it
        time.sleep(1.0 if runs else 0.0)
        runs.append(hpcprobe("run", "latency", "--size", "64KiB", "--quick", "--db", str(db),
                             "--json", str(tmp / f"run{i}.json")))
    return tmp, db, runs


def test_a_run_opens_with_its_verdict_and_the_next_is_judged_against_the_previous(measured):
    tmp, db, (first, second) = measured
    assert first.code == 0, first.err
    assert first.out.startswith("Run ") and "Verdict: no reference" in first.out
    assert "L2 latency" in first.out and "Memory latency, ns per dependent load" not in first.out
    assert "Against this host's 1 previous quick run(s) in the store" in _flat(second.out)
    for line in (first.out + second.out).splitlines()[:40]:
        assert len(line.rstrip()) <= 100, line
    shown = hpcprobe("show", "latest", "--db", str(db), "--details")
    assert "Memory latency, ns per dependent load" in _flat(shown.out)  # tables: --details
    assert "Against this host's 1 previous quick run(s)" in _flat(shown.out)


def _quiet(src: Path, dst: Path, like: Path | None = None) -> None:
    """The run's document as a quiet node would have measured it: each figure's samples
    within 0.1 % of the median it measured (`like`: of that run's median for the figure: two
    quiet runs that agree), and no finding that says the node was disturbed (this busy guest's
    sentinel moves and its latency's CI can be 60 % wide, and two of its runs' medians differ
    by a third under the suite's load, which leaves a figure out of a reference or unjudged:
    that is tested on its own)."""
    import statistics

    from hpcprobe.results.model import write_json

    def key(m: Metric) -> str:
        return json.dumps([m.benchmark, m.name, m.params], sort_keys=True)

    run = _doc_run(src)
    medians = {key(m): statistics.median(m.samples) for m in _doc_run(like or src).metrics}
    write_json(replace(run, metrics=[replace(m, samples=[
        medians.get(key(m), statistics.median(m.samples)) * (1 + 0.001 * (j % 3 - 1))
        for j in range(len(m.samples))]) for m in run.metrics],
        findings=[f for f in run.findings if f["kind"] not in DISTURBED]), dst)


def test_reference_make_writes_a_readable_file_that_judges_a_run(measured):
    tmp, _, _ = measured
    for i in (1, 2):
        _quiet(tmp / f"run{i}.json", tmp / f"quiet{i}.json", tmp / "run1.json")
    db = tmp / "quiet.sqlite"
    assert hpcprobe("import", str(tmp / "quiet1.json"), str(tmp / "quiet2.json"), "--db",
                    str(db)).code == 0
    ref = tmp / "ref.toml"
    r = hpcprobe("reference", "make", "--host", _doc_run(tmp / "run1.json").host, "--db",
                 str(db), "-o", str(ref))
    assert r.code == 0, r.err
    doc = tomllib.loads(ref.read_text())
    [hw] = doc["hardware"]
    assert len(hw["runs"]) == 2 and "latency.l2" in hw["figures"]
    l2 = hw["figures"]["latency.l2"]
    assert l2["better"] == "lower" and l2["tolerance"] >= 0.10 and l2["runs"] == 2
    shown = hpcprobe("show", str(tmp / "run2.json"), "--against", str(ref))
    assert shown.code in (0, 1) and f"Against {ref}" in _flat(shown.out)
    # a reference that expects half the latency: the run is below it, named, exit 1
    for fig in hw["figures"].values():
        fig["expected"] = fig["expected"] / 2 if fig["better"] == "lower" else fig["expected"]
        fig["tolerance"] = 0.1
    import tomli_w

    fast = tmp / "fast.toml"
    fast.write_text(tomli_w.dumps(doc))
    quiet = tmp / "quiet2.json"
    judged = hpcprobe("show", str(quiet), "--against", str(fast))
    assert judged.code == 1, (judged.out, judged.err)
    assert "Verdict: BELOW the reference: L2 latency" in judged.out
    listed = hpcprobe("reference", "show", str(fast))
    assert listed.code == 0 and "latency.l2" in listed.out
    compared = hpcprobe("compare", str(tmp / "quiet1.json"), str(quiet), "--against", str(fast))
    assert compared.code == 1 and "BELOW the reference: L2 latency" in compared.out
    page = tmp / "page.html"
    r = hpcprobe("report", str(quiet), "-o", str(page), "--against", str(fast))
    assert r.code == 1, r.err  # the exit policy of every command that shows a verdict
    html = page.read_text()
    assert '<div class="verdict">' in html and "BELOW the reference: L2 latency" in html


def test_a_disturbed_run_counts_in_a_reference_only_where_no_quiet_run_measured(measured):
    """A run the sentinel, the hypervisor's steal or other processes disturbed has wide CIs
    that would loosen the tolerance: its figures count only where every run was disturbed."""
    from hpcprobe.machine.steal import BUSY
    from hpcprobe.results.findings import Finding

    tmp, _, _ = measured
    _quiet(tmp / "run1.json", tmp / "calm.json")
    calm = _doc_run(tmp / "calm.json")
    busy = replace(calm, run_id="b" * 12, findings=[Finding("latency", BUSY, "x", {
        "percent": 80.0}).to_dict()], metrics=[replace(m, samples=[1.05 * x for x in m.samples])
                                                for m in calm.metrics])
    [g] = reference.make([calm, busy], registry.pickers(), registry.hardware_labels)
    [alone] = reference.make([calm], registry.pickers(), registry.hardware_labels)
    l2 = g.figures["latency.l2"]
    assert l2.runs == 1 and l2.value == alone.figures["latency.l2"].value
    [both] = reference.make([replace(calm, findings=busy.findings), busy], registry.pickers(),
                            registry.hardware_labels)
    assert both.figures["latency.l2"].runs == 2  # every run disturbed: all of them count
    assert both.figures["latency.l2"].value > l2.value


def test_a_reference_of_other_hardware_judges_nothing(measured, tmp_path):
    tmp, _, _ = measured
    run = _doc_run(tmp / "run1.json")
    groups = reference.make([run], registry.pickers(), registry.hardware_labels)
    groups[0].hardware["cores"] += 64
    path = tmp_path / "other.toml"
    reference.write(groups, "test", str(path))
    got = reference.for_run(reference.load(str(path)), run, registry.hardware_labels, "x")
    assert not got.figures and "no figures for this hardware" in got.source
    groups[0].hardware["cores"] -= 64
    groups[0].profile = "thorough"
    got = reference.for_run(groups, run, registry.hardware_labels, "x")
    assert not got.figures and "from profile(s) thorough only, not quick" in got.source
    r = hpcprobe("show", str(tmp / "run1.json"), "--against", str(path))
    assert r.code == 3 and "no figures for this hardware" in _flat(r.out)  # judged nothing
    assert "judged nothing" in _flat(r.err)


@pytest.mark.parametrize("text, needle", [
    ("not toml [", "not TOML"),
    ('format = "other"\nversion = 1\n', "not an hpcprobe reference"),
    ('format = "hpcprobe-reference"\nversion = 1\n[[hardware]]\ncpu = "x"\nsockets = 1\n'
     'cores = 2\n[hardware.figures.k]\nlabel = "f"\nunit = "GB/s"\nbetter = "higher"\n'
     'expected = 10.0\ntolerance = 5\n', "tolerance a fraction"),
    ('format = "hpcprobe-reference"\nversion = 1\n[[hardware]]\ncpu = "x"\nsockets = 1\n'
     'cores = 2\n[hardware.figures.k]\nlabel = "f"\n', "needs label, unit"),
    ('format = "hpcprobe-reference"\nversion = 1\nhardware = [1]\n', "a table with cpu"),
])
def test_a_bad_reference_file_is_one_line_before_anything_is_measured(tmp_path, text, needle):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(UserError, match=needle):
        reference.load(str(bad))
    db = tmp_path / "r.sqlite"
    assert_user_error(hpcprobe("run", "latency", "--size", "64KiB", "--db", str(db),
                               "--against", str(bad)), needle)
    assert not db.exists()


def test_reference_make_refuses_what_it_cannot_use(tmp_path):
    out = tmp_path / "ref.toml"
    assert_user_error(hpcprobe("reference", "make", "-o", str(out)), "which runs?")
    assert_user_error(hpcprobe("reference", "make", "--tag", "x", "--db",
                               str(tmp_path / "none.sqlite"), "-o", str(out)), "no result store")
    assert not out.exists()


def test_warnings_fold_one_line_per_kind_with_a_count():
    warnings = [
        "memory: 6 figure(s) stopped at the time budget before the CI target of ±2 %",
        "latency: 17 figure(s) stopped at the time budget before the CI target of ±2 %",
        "cg: the node's DRAM triad (the sentinel read around each benchmark) went from 1 to 2",
        "memory triad 1T: L1: 91.9 GB/s plateau ends near 361.7 KiB per thread",
    ]
    folded = verdict_view.fold(warnings)
    assert folded[0].startswith("2x memory, latency: 6 figure(s) stopped")
    assert folded[2].startswith("memory triad 1T: L1:")
    assert len(folded) == 3 and all(len(f) + len("warning: ") <= 100 for f in folded)
    assert len(verdict_view.fold(["x: " + "y" * 300])[0]) == 100 - len("warning: ")


def test_a_run_document_judged_in_json_round_trip_keeps_its_figures(measured):
    tmp, _, _ = measured
    doc = json.loads((tmp / "run1.json").read_text())
    run = _doc_run(tmp / "run1.json")
    v = verdict(run, registry.pickers(), None)
    stored = {(m["benchmark"], m["name"], json.dumps(m["params"], sort_keys=True)):
              m["summary"]["median"] for m in doc["metrics"]}
    assert v.rows  # its L2 latency at least
    for r in v.rows:  # each headline is a figure of the document, unchanged
        m = r.headline.metric
        assert stored[(m.benchmark, m.name, json.dumps(m.params, sort_keys=True))] \
            == m.summary.median


def test_the_dry_run_says_how_long_each_family_took_here(measured):
    _, db, _ = measured
    r = hpcprobe("run", "latency", "--quick", "--dry-run", "--db", str(db))
    assert r.code == 0, r.err
    assert re.search(r"^latency: \d+ measurement\(s\), about \d+ s$", r.out, re.M), r.out
    assert "In all about" in r.out
    fresh = hpcprobe("run", "latency", "--dry-run", "--db", str(db))  # no default run here
    assert "not known until this host has run this profile once" in fresh.out


def test_a_row_is_judged_in_the_one_judgement_record():
    """A headline with a ceiling and a reference is two records (basis ceiling, then
    reference); above its ceiling, its reference is not judged; a record of an unknown basis
    or mark is refused."""
    from hpcprobe.results.judgement import Judgement

    m = Metric("memory", "bandwidth", "GB/s", {}, [90.0, 91.0, 92.0, 93.0, 94.0])
    e = Expected("k", "triad", "GB/s", "higher", 100.0, 0.05, 3)
    [ceiling, ref] = judge(Headline("k", "triad", m, 120.0, "DIMMs"), e, None).judgements()
    assert (ceiling.basis, ceiling.mark, ceiling.expected, ceiling.why) == \
        ("ceiling", "ok", 120.0, "DIMMs")
    assert (ref.basis, ref.mark, ref.expected, ref.tolerance, ref.value) == \
        ("reference", "below", 100.0, 0.05, 92.0)
    assert ref.ci == m.summary.ci95 and ref.to_dict()["ci"] == list(m.summary.ci95)
    over, unasked = judge(Headline("k", "triad", m, 80.0, "DIMMs"), e, None).judgements()
    assert (over.basis, over.mark) == ("ceiling", "above ceiling")
    assert (unasked.basis, unasked.mark, unasked.expected) == ("reference", "not judged", 100.0)
    with pytest.raises(ValueError):
        Judgement("k", "hunch", "ok")


def test_every_ceiling_bounds_a_declared_figure():
    """A ceiling source bounds figures some family declares (a bound on a misspelt figure would
    bound nothing, silently), and every source of the issue's list declares one."""
    from hpcprobe.families import FAMILIES

    declared = {(f.name, s.name) for f in FAMILIES.values() for s in f.metrics.specs}
    bounds = registry.bounds()
    assert {(b.benchmark, b.name) for b in bounds} <= declared
    assert {(b.benchmark, b.name) for b in bounds} >= {
        ("memory", "bandwidth"), ("compute", "peak"), ("hpl", "rmax"), ("hpl", "dgemm"),
        ("gpu", "bandwidth"), ("gpu", "gemm")}


def _cache_run(ceiling_gbs: float) -> Run:
    params = {"level": "L1", "threads": 2, "kernel": "triad", "stores": "regular",
              "size_bytes": 32768, "isa": "avx2", "placement": "one-per-core"}
    return Run("r1", "2026-11-29T00:00:00+00:00", "h", "default", ["memory"], {}, {}, [
        Metric("memory", "bandwidth", "GB/s", dict(params), [300.0, 301.0, 302.0]),
        Metric("roofline", "port_ceiling", "GB/s",
               {**params, "bytes_per_cycle": 64.0, "source": "a test's ports"},
               [ceiling_gbs * 0.99, ceiling_gbs])])


def test_a_cache_figure_above_its_ports_is_a_row_of_the_verdict():
    """The roofline's port ceilings are judged like every ceiling: an L1 figure above its
    load/store ports (the fastest clock's) is a row of the run's verdict marked above ceiling,
    with the ports named; below them it is no row (it is no headline)."""
    v = registry.judge(_cache_run(250.0), None)
    [row] = v.marked("above ceiling")
    assert row.headline.metric.params["level"] == "L1" and "L1" in row.headline.label
    assert row.headline.ceiling == 250.0 and "a test's ports" in row.headline.ceiling_source
    assert "the ceiling or the figure is wrong" in row.why
    assert not registry.judge(_cache_run(400.0), None).rows


@settings(deadline=None)  # SciPy's import in the first example
@given(lists(floats(1e-3, 1e6), min_size=3, max_size=40))
def test_a_references_spread_is_scipys_median_absolute_deviation_every_bit(values):
    """`reference.mad` stands in for SciPy's `median_abs_deviation(scale="normal")` (a
    millisecond a call: a fleet's 9,000 figures' references took 8 s): the same float."""
    import statistics

    from scipy import stats

    want = float(stats.median_abs_deviation(values, scale="normal"))
    assert reference.mad(values, statistics.median(values)) == want
