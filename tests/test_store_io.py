"""Moving runs in and out of both store backends (SQLite and a real PostgreSQL), concurrent
writers, and a writer killed mid-run. The runs are recorded documents (tests/data/compare) under
new ids, so every backend stores the same thing."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe.results import model as results
from hpcprobe.results.store import Selection, Store

BASE = results.read_json(DATA / "compare" / "nps1.json")


def copy_of(i: int, tag: str = "fleet", host: str = "vm", metrics: int = 1) -> results.Run:
    """The recorded run under a new id (and host, tag), its metrics repeated `metrics` times."""
    return replace(BASE, run_id=f"{i:012x}", host=host, tag=tag,
                   metrics=[replace(m, params={**m.params, "copy": k})
                            for k in range(metrics) for m in BASE.metrics])


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """A fresh store of each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite")
    return request.getfixturevalue("pg_url")


def write_docs(tmp_path, runs):
    paths = []
    for run in runs:
        p = tmp_path / f"{run.run_id}.json"
        results.write_json(run, p)
        paths.append(str(p))
    return paths


def test_import_is_idempotent_and_all_or_nothing(db, tmp_path):
    paths = write_docs(tmp_path, [copy_of(1), copy_of(2)])
    r = hpcprobe("import", *paths, "--db", db)
    assert r.code == 0 and "Imported 2 run(s)" in r.out
    again = hpcprobe("import", paths[0], "--db", db)
    assert again.code == 0 and "Imported 0 run(s)" in again.out and "stored already" in again.out
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"tool": "not hpcprobe"}))
    trunc = tmp_path / "trunc.json"
    trunc.write_text(open(paths[0]).read()[:100])
    third = write_docs(tmp_path, [copy_of(3)])[0]
    assert_user_error(hpcprobe("import", third, str(bad), "--db", db), "other.json")
    assert_user_error(hpcprobe("import", third, str(trunc), "--db", db), "not JSON")
    with Store.open(db, create=False) as st:
        assert sorted(i.run_id for i in st.runs()) == ["000000000001", "000000000002"]


def test_runs_loaded_by_id_are_whole_and_those_not_stored_left_out(db, monkeypatch):
    """`load_ids`: many runs by id in a few queries (here two at a time), each as `load`
    reads it; an id no run has is not in the answer."""
    from hpcprobe.results.sql import SqlStore

    monkeypatch.setattr(SqlStore, "CHUNK", 2)
    with Store.open(db) as st:
        st.save_all([copy_of(i, host=f"n{i}", metrics=2) for i in range(5)])
        got = st.load_ids([f"{i:012x}" for i in (4, 0, 2, 9)])
        assert sorted(got) == [f"{i:012x}" for i in (0, 2, 4)]
        for run_id, run in got.items():
            assert run.to_dict() == st.load(run_id).to_dict() and len(run.metrics) == \
                2 * len(BASE.metrics)
        assert st.load_ids([]) == {}


def test_an_interrupted_run_is_listed_as_such(db):
    cut = copy_of(2)
    cut.provenance = {**cut.provenance, "interrupted": {"benchmark": "hpl", "not_run": []}}
    with Store.open(db) as st:
        st.save(copy_of(1))
        st.save(cut)
        assert sorted((i.run_id, i.interrupted) for i in st.runs()) == [
            ("000000000001", False), ("000000000002", True)]


@pytest.mark.parametrize("key,value,needle", [
    ("created", "not a date", "at created: 'not a date' is not a UTC date-time"),
    ("created", "2026-11-01T12:00:00+02:00", "is not a UTC date-time"),  # stores order its text
    ("created", "2026-11-01T10:00:00", "is not a UTC date-time"),
    ("samples", [1.0, float("nan")], "at metrics/0/samples/1: nan is not a finite number"),
    ("samples", [float("inf")], "at metrics/0/samples/0: inf is not a finite number"),
])
def test_import_refuses_what_the_schema_cannot_say(tmp_path, key, value, needle):
    doc = copy_of(7).to_dict()
    if key == "samples":
        doc["metrics"][0]["samples"] = value  # Python's JSON writes and reads NaN and Infinity
    else:
        doc[key] = value
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    db = tmp_path / "r.sqlite"
    assert_user_error(hpcprobe("import", str(path), "--db", str(db)), needle)
    assert not db.exists()


def test_samples_near_the_largest_float_are_stored_with_a_finite_summary(tmp_path):
    """Finite samples whose sums pass the largest float (a corrupt or hand-made document) are
    stored, their median and mean finite (they ended `import` with a traceback)."""
    doc = copy_of(8).to_dict()
    doc["metrics"][0]["samples"] = [1.7e308, 1.5e308, 1.6e308, 1.7e308]
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    db = tmp_path / "r.sqlite"
    r = hpcprobe("import", str(path), "--db", str(db))
    assert r.code == 0 and "Traceback" not in r.err, r.err
    with Store.open(db) as st:
        [run] = st.load_all(Selection())
    s = run.metrics[0].summary
    assert s.median == pytest.approx(1.65e308) and s.mean == pytest.approx(1.625e308)


def test_export_selects_and_counts_every_sample(db, tmp_path):
    with Store.open(db) as st:
        for i, (tag, host) in enumerate([("a", "n1"), ("a", "n2"), ("b", "n1")]):
            st.save(copy_of(i, tag, host))
    runs = hpcprobe("export", "--what", "runs", "--format", "csv", "--tag", "a", "--db", db)
    assert runs.code == 0
    assert [r["host"] for r in csv.DictReader(io.StringIO(runs.out))] == ["n1", "n2"]
    samples = hpcprobe("export", "--what", "samples", "--host", "n1", "--db", db)
    lines = [json.loads(x) for x in samples.out.splitlines()]
    assert len(lines) == 2 * sum(len(m.samples) for m in BASE.metrics)
    metrics = hpcprobe("export", "--db", db, "--format", "csv", "--since", "2030-01-01")
    assert metrics.code == 0 and metrics.out.count("\n") == 1  # the header: no run that late
    out = tmp_path / "m.jsonl"
    assert hpcprobe("export", "--db", db, "-o", str(out)).code == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert first["n"] == len(BASE.metrics[0].samples) and first["params"]["kernel"]
    assert_user_error(hpcprobe("export", "--db", db, "-o", "/nonexistent/dir/x.csv"), "-o")


def test_a_store_this_command_created_and_left_empty_is_removed(tmp_path):
    path = tmp_path / "r.sqlite"
    with Store.open(path):
        assert path.exists()
    assert not path.exists()  # a command refused after opening it leaves nothing behind
    with Store.open(path) as st:
        st.save(copy_of(0))
    with Store.open(path):
        pass
    assert path.exists()  # a store with runs, or one that was there before, stays
    with Store.open(path) as st:
        st.delete([copy_of(0).run_id])
    assert path.exists()


def _writer(db: str, i: int) -> None:
    with Store.open(db) as st:
        st.save(copy_of(i, metrics=20))


@pytest.mark.parametrize("backend,writers", [("sqlite", 20), ("postgresql", 100)])
def test_concurrent_writers_lose_nothing(backend, writers, tmp_path, request):
    db = str(tmp_path / "r.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    Store.open(db).close()  # the schema exists before the writers race (they may create it too)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(db, i)) for i in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * writers
    want = copy_of(0, metrics=20)
    with Store.open(db, create=False) as st:
        infos = st.runs()
        assert len(infos) == writers and {i.metrics for i in infos} == {len(want.metrics)}
        for i in range(writers):
            back = st.load(f"{i:012x}")
            assert [m.samples for m in back.metrics] == [m.samples for m in want.metrics]


def _judged_writer(db: str, i: int, said: str) -> None:
    """What `hpcprobe run` does once it has measured, on a fleet store: open it (creating the
    schema where the database is empty), judge the run against the host's previous runs while
    others commit theirs, store it. A failure's traceback goes to `said`/i."""
    import traceback

    from hpcprobe.commands import output

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the verdict's screen, not wanted
    created = f"2026-11-28T00:{i // 60:02d}:{i % 60:02d}+00:00"
    try:
        store = Store.open(db)
        output.keep(replace(copy_of(i, host="n1"), created=created), output.Outputs(), store)
    except BaseException:  # noqa: BLE001 - every failure is the test's finding
        with open(os.path.join(said, str(i)), "w") as f:
            f.write(traceback.format_exc())
        os._exit(1)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_forty_judged_writers_on_an_empty_store_lose_no_run(backend, tmp_path, request):
    """Forty runs stored at once (a check in every node's prolog writing one fleet store), each
    judged against the previous runs others are committing, the first ones creating the
    schema: three times, every run stored, none refused."""
    from scipy import stats  # noqa: F401 - a reference's spread: imported once, not per writer

    from hpcprobe import registry
    from hpcprobe.commands import output  # noqa: F401 - the same
    registry.pickers()
    ctx = multiprocessing.get_context("fork")
    for attempt in range(3):
        db = str(tmp_path / f"r{attempt}.sqlite") if backend == "sqlite" else \
            request.getfixturevalue("pg_server").new_database()
        said = tmp_path / f"said{attempt}"
        said.mkdir()
        procs = [ctx.Process(target=_judged_writer, args=(db, i, str(said))) for i in range(40)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(180)
        failures = {f.name: f.read_text() for f in said.iterdir()}
        assert failures == {} and [p.exitcode for p in procs] == [0] * 40, failures
        with Store.open(db, create=False) as st:
            assert len(st.runs()) == 40


def _slow_writer(db: str, opened: str) -> None:
    with Store.open(db) as st:
        Path(opened).touch()
        st.save(copy_of(7, metrics=3000))


def _writing(db: str) -> bool:
    """Whether a write transaction is open on the store (rows inserted, not committed)."""
    if "://" not in db:
        return os.path.exists(db + "-journal")  # SQLite's rollback journal
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS "
                                 "NOT NULL AND datname = current_database()").fetchone()[0])


def test_a_writer_killed_mid_run_leaves_no_partial_run(db, tmp_path):
    # the writer makes the store, then says so, then stores a run: its transaction is the
    # run's, not the store's creation (a fresh store that holds no run is removed on close,
    # so the store made here before would not be there for it)
    opened = tmp_path / "opened"
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=_slow_writer, args=(db, str(opened)))
    p.start()
    deadline = time.monotonic() + 60
    while not (opened.exists() and _writing(db)) and p.is_alive() and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    assert p.is_alive(), "the writer ended before its transaction was seen"
    time.sleep(0.05)  # some rows in
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    with Store.open(db, create=False) as st:
        assert st.runs() == []  # killed inside its transaction: nothing of it is stored
    r = hpcprobe("list", "--db", db)
    assert r.code == 0


def test_list_selects_and_prune_removes_old_runs_whole(db, tmp_path):
    with Store.open(db) as st:
        for i, (tag, host, day) in enumerate([(None, "n1", "01-01"), ("keep", "n1", "01-02"),
                                              (None, "n2", "01-03"), (None, "n1", "12-01")]):
            st.save(replace(copy_of(i, tag or "", host), tag=tag,
                            created=f"2026-{day}T00:00:00+00:00"))
    listed = hpcprobe("list", "--db", db, "--host", "n1", "--until", "2026-06-01", "--json")
    assert sorted(r["run_id"] for r in json.loads(listed.out)) == ["000000000000",
                                                                   "000000000001"]
    dry = hpcprobe("prune", "--db", db, "--before", "2026-06-01", "--keep-tagged", "--dry-run")
    assert dry.code == 0 and "Would remove 2 run(s)" in dry.out
    r = hpcprobe("prune", "--db", db, "--before", "2026-06-01", "--keep-tagged")
    assert r.code == 0 and "Removed 2 run(s)" in r.out
    with Store.open(db, create=False) as st:
        assert sorted(i.run_id for i in st.runs()) == ["000000000001", "000000000003"]
    samples = hpcprobe("export", "--db", db, "--what", "samples")
    assert {json.loads(x)["run_id"] for x in samples.out.splitlines()} == {"000000000001",
                                                                            "000000000003"}
    assert_user_error(hpcprobe("prune", "--db", db), "--before")


def test_a_run_named_by_a_path_that_is_not_there(tmp_path):
    """A name ending in .json or holding a directory is read as a file; when there is none and
    no stored run has that name, the error says the file is missing. A tag with a slash still
    names its stored run."""
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(copy_of(1, tag="bios/nps4"))
    r = hpcprobe("show", "bios/nps4", "--db", str(db), "--json")
    assert r.code == 0 and json.loads(r.out)["run_id"] == f"{1:012x}"
    gone = str(tmp_path / "gone.json")
    assert_user_error(hpcprobe("show", gone, "--db", str(db)), f"{gone}: no such file")
    assert_user_error(hpcprobe("compare", "bios/nps4", "old/run", "--db", str(db)),
                      "old/run: no such file")
    assert_user_error(hpcprobe("report", gone, "--db", str(tmp_path / "none.sqlite"), "-o",
                               str(tmp_path / "r.html")), "no such file")
    assert_user_error(hpcprobe("show", "gone", "--db", str(db)), "no run id")


def test_one_metric_across_the_fleet_in_one_query(db):
    with Store.open(db) as st:
        for i, host in enumerate(["n1", "n2", "n3"]):
            st.save(copy_of(i, "campaign", host))
        st.save(copy_of(9, "other", "n4"))
        got = st.metric_across("memory", "bandwidth", Selection(tag="campaign"))
    want = [m for m in BASE.metrics if (m.benchmark, m.name) == ("memory", "bandwidth")]
    assert [h["host"] for h, _ in got] == [h for h in ("n1", "n2", "n3") for _ in want]
    assert [m.samples for _, m in got] == [m.samples for m in want] * 3
    r = hpcprobe("export", "--db", db, "--metric", "memory.bandwidth", "--tag", "campaign",
                 "--format", "csv")
    assert r.code == 0 and r.out.count("\n") == 1 + 3 * len(want)
    triad = hpcprobe("export", "--db", db, "--metric", "memory.bandwidth", "--param",
                     "kernel=triad", "--param", "threads=128", "--tag", "campaign")
    assert [json.loads(x)["host"] for x in triad.out.splitlines()] == ["n1", "n2", "n3"]
    assert_user_error(hpcprobe("export", "--db", db, "--metric", "bandwidth"), "BENCHMARK.NAME")
    assert_user_error(hpcprobe("export", "--db", db, "--param", "kernel=triad"), "--metric")
    # a typo in the metric or a param is a mistake said with what there is; an empty
    # selection (no run of that tag) is an empty export
    assert_user_error(hpcprobe("export", "--db", db, "--metric", "memory.bandwdith"),
                      "memory has no metric 'bandwdith'; its metrics: bandwidth, "
                      "bandwidth_write_allocate")
    assert_user_error(hpcprobe("export", "--db", db, "--metric", "memory.bandwidth", "--param",
                               "kernal=triad", "--tag", "campaign"),
                      "--param kernal=triad: no figure of memory.bandwidth in the runs selected "
                      "has it; their params: ", "kernel: ", "triad")
    r = hpcprobe("export", "--db", db, "--metric", "memory.bandwidth", "--param",
                 "kernel=triad", "--tag", "nosuch")
    assert r.code == 0 and r.out == ""


def test_a_figures_summaries_across_the_fleet_and_runs_without_metrics(db):
    """figures_across gives each run's stored summary of the figure (as its samples make it),
    one host's the same, and headers the runs themselves without their metrics."""
    with Store.open(db) as st:
        for i, host in enumerate(["n1", "n2"]):
            st.save(copy_of(i, "campaign", host))
        st.save(copy_of(9, "other", "n3"))
        got = st.figures_across("memory", "bandwidth", Selection(tag="campaign"),
                                {"kernel": "triad"})
        # one host's: its runs first, their rows read whole (another query, the same figures)
        assert st.figures_across("memory", "bandwidth", Selection(tag="campaign", host="n2"),
                                 {"kernel": "triad"}) == [f for f in got if f.host == "n2"]
        heads = st.headers([f"{9:012x}", f"{0:012x}", "nosuch"])
    want = [m for m in BASE.metrics if (m.benchmark, m.name) == ("memory", "bandwidth")
            and m.params["kernel"] == "triad"]
    assert want and [f.host for f in got] == [h for h in ("n1", "n2") for _ in want]
    for f, m in zip(got, want * 2, strict=True):
        assert (f.median, (f.ci_low, f.ci_high), f.params) == (m.summary.median, m.summary.ci95,
                                                              {**m.params, "copy": 0})
        assert f.rel_ci == m.summary.rel_ci_halfwidth and f.tag == "campaign"
    assert sorted(heads) == [f"{0:012x}", f"{9:012x}"]
    assert heads[f"{9:012x}"].host == "n3" and heads[f"{9:012x}"].metrics == []
    assert heads[f"{9:012x}"].provenance == BASE.provenance


def test_a_full_store_is_one_clear_error_and_loses_nothing_stored(tmp_path):
    """The disk fills while a run is stored (a file-size limit on the writer): the run is not
    stored, the error says so in one line, earlier runs read back, and its document is kept."""
    import resource
    import subprocess
    import sys

    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(copy_of(1))
    big = write_docs(tmp_path, [copy_of(2, metrics=400)])[0]
    limit = db.stat().st_size + 64 * 1024  # far less than the big run needs

    def cap() -> None:  # Python ignores SIGXFSZ, so the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    exe = os.path.join(os.path.dirname(sys.executable), "hpcprobe")
    p = subprocess.run([exe, "import", big, "--db", str(db)], capture_output=True, text=True,
                       preexec_fn=cap, timeout=120)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "nothing of it was stored" in p.stderr
    with Store.open(db, create=False) as st:
        assert [i.run_id for i in st.runs()] == [f"{1:012x}"]
        assert st.load(f"{1:012x}").to_dict() == copy_of(1).to_dict()


def test_a_store_that_fails_after_the_measurement_keeps_the_runs_document(tmp_path):
    """The store cannot grow when the run is saved: the error says where the figures are, and
    the --json document (written first) holds the run, which `hpcprobe import` stores later."""
    import resource
    import subprocess
    import sys

    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(copy_of(1, metrics=10))  # a store of some size, so the document fits the cap
    limit = db.stat().st_size

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = tmp_path / "run.json"
    exe = os.path.join(os.path.dirname(sys.executable), "hpcprobe")
    p = subprocess.run([exe, "run", "memory", "--kernel", "triad", "--threads", "1", "--size",
                        "96KiB", "--quick", "--db", str(db), "--json", str(out)],
                       capture_output=True, text=True, preexec_fn=cap, timeout=300)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert f"the run is in {out}" in p.stderr and "hpcprobe import" in p.stderr
    doc = json.loads(out.read_text())
    r = hpcprobe("import", str(out), "--db", str(db))
    assert r.code == 0 and "Imported 1 run(s)" in r.out
    with Store.open(db, create=False) as st:
        assert st.load(doc["run_id"]).to_dict() == results.Run.from_dict(doc).to_dict()


def test_runs_stored_together_are_stored_whole_and_those_stored_skipped(db):
    """`save_all` (a campaign's nodes that ended in one poll): every run whole in one
    transaction, a run stored already skipped and named, each figure's samples kept."""
    first, second, third = (copy_of(i, metrics=3) for i in range(3))
    with Store.open(db) as st:
        st.save(second)
        assert st.save_all([first, second, third]) == [second.run_id]
        assert st.save_all([]) == []
        back = {r.run_id: r for r in st.load_all(Selection(tag="fleet"))}
    assert set(back) == {first.run_id, second.run_id, third.run_id}
    assert [m.samples for m in back[third.run_id].metrics] == [m.samples for m in third.metrics]


def test_disturbances_of_some_kinds_read_only_the_runs_that_name_them(db):
    """A history asks for the runs disturbed (a moved sentinel, steal, other processes) or
    interrupted: the runs whose findings are of other kinds alone are not read, a run that
    names a kind only in a message may be (its caller reads each finding's kind), and without
    kinds every run with findings or interrupted is."""
    def found(kind: str, message: str = "m") -> dict[str, str]:
        return {"benchmark": "memory", "kind": kind, "message": message}

    runs = {"sampling": [found("sampling")], "moved": [found("node_changed"), found("sampling")],
            "said": [found("sampling", 'see "steal" and "node_changed"')], "clean": [],
            "like": [found("nodexchanged")]}
    with Store.open(db) as st:
        for i, (name, found_there) in enumerate(runs.items()):
            st.save(replace(copy_of(i, host=name), findings=found_there))
        st.save(replace(copy_of(9, host="cut"), provenance={
            **BASE.provenance, "interrupted": {"benchmark": "memory", "not_run": []}}))
        hosts = {r.run_id: r.host for r in st.runs()}
        some = {hosts[i] for i in st.disturbances(None, ["node_changed", "steal"])}
        every = {hosts[i] for i in st.disturbances()}
    # "_" is no wildcard ("nodexchanged" is not read); a message's words may be
    assert {"moved", "cut"} <= some <= {"moved", "cut", "said"}
    assert every == {"sampling", "moved", "said", "like", "cut"}


def test_each_hosts_runs_before_a_time_newest_first_a_few_hundred_hosts_a_query(db):
    """`before`: per (host, time, profile) the ids of that host's runs of that profile made
    before that time, newest first (those of one second in the order stored), up to the
    limit; the same host asked twice answered twice; more asks than one query takes."""
    from hpcprobe.results.sql import SqlStore

    runs = [replace(copy_of(i, host=f"h{i % 3}"), profile="quick" if i % 2 else "default",
                    created=f"2026-01-{1 + i // 12:02d}T00:00:00+00:00") for i in range(60)]
    with Store.open(db) as st:
        st.save_all(runs)
        asks = [(f"h{k % 3}", f"2026-01-{2 + k % 5:02d}T00:00:00+00:00",
                 "quick" if k % 2 else "default") for k in range(SqlStore.CHUNK // 4 + 7)]
        got = st.before([*asks, ("nowhere", "2027-01-01", "quick")], 4)  # type: ignore[attr-defined]
    assert got[-1] == []
    for (host, until, profile), ids in zip(asks, got, strict=False):
        want = [r.run_id for r in sorted(
            (r for r in runs if r.host == host and r.created < until and r.profile == profile),
            key=lambda r: (r.created, r.run_id), reverse=True)][:4]
        assert ids == want, (host, until, profile)
    assert any(len(ids) == 4 for ids in got) and any(0 < len(ids) < 4 for ids in got)
