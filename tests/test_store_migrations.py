"""Stores written by every older hpcprobe (kept fixtures: tests/data/stores/v*.*) are brought to
the current version in place, in one transaction, with every run intact; a newer store is
refused; a store that cannot be upgraded changes nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import struct

import pytest
from hypothesis import example, given
from hypothesis.strategies import (
    booleans,
    dictionaries,
    floats,
    integers,
    lists,
    none,
    one_of,
    sampled_from,
    text,
)

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe.common.errors import UserError
from hpcprobe.results import model as results
from hpcprobe.results import sql
from hpcprobe.results.sql import STORE_VERSION
from hpcprobe.results.store import Selection, Store

STORES = DATA / "stores"
RUNS = [results.read_json(DATA / "compare" / f) for f in ("nps1.json", "nps4.json")]
#: every store version the project has shipped before this one, with its fixture
SHIPPED = [1, 2, 3, 4, 5, 6, 7]


def _load_pg_dump(url: str, version: int) -> None:
    """A plain pg_dump of a store of that version into an empty database (psql's backslash
    commands left out)."""
    import psycopg

    text = (STORES / f"v{version}.postgresql.sql").read_text()
    sql = "\n".join(line for line in text.splitlines() if not line.startswith("\\"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def _old_store(backend: str, version: int, tmp_path, request) -> str:
    if backend == "sqlite":
        db = tmp_path / "old.sqlite"
        shutil.copy(STORES / f"v{version}.sqlite", db)
        return str(db)
    url = request.getfixturevalue("pg_url")
    _load_pg_dump(url, version)
    return url


def test_every_shipped_version_has_its_fixtures():
    assert SHIPPED == list(range(1, STORE_VERSION))
    for v in SHIPPED:
        assert (STORES / f"v{v}.sqlite").exists() and (STORES / f"v{v}.postgresql.sql").exists()


@pytest.mark.parametrize("version", SHIPPED)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_older_store_is_upgraded_in_place_with_every_run_intact(backend, version, tmp_path,
                                                                   request):
    db = _old_store(backend, version, tmp_path, request)
    with Store.open(db, create=False) as st:
        assert st._version() == STORE_VERSION  # type: ignore[attr-defined]
        for run in RUNS:
            assert st.load(run.run_id).to_dict() == run.to_dict()
            # stored without summaries before version 4: summarised from the samples
            m = run.metrics[0]
            fig = next(f for f in st.figures_across(m.benchmark, m.name,
                                                    Selection(host=run.host))
                       if f.run_id == run.run_id and f.params == m.params)
            assert (fig.median, (fig.ci_low, fig.ci_high)) == (m.summary.median, m.summary.ci95)
    r = hpcprobe("compare", RUNS[0].run_id, RUNS[1].run_id, "--db", db, "--json")
    assert r.code == 0


def test_an_upgrade_says_so_before_it_starts_and_once(tmp_path):
    db = tmp_path / "old.sqlite"
    shutil.copy(STORES / "v6.sqlite", db)
    first = hpcprobe("list", "--db", str(db))
    assert first.code == 0 and first.err.count("Bringing the result store") == 1
    assert f"from version 6 to {STORE_VERSION}" in first.err
    again = hpcprobe("list", "--db", str(db))
    assert again.code == 0 and "Bringing" not in again.err


def test_a_newer_store_is_refused(tmp_path):
    db = tmp_path / "r.sqlite"
    Store.open(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {STORE_VERSION + 1}")
    conn.commit()
    conn.close()
    assert_user_error(hpcprobe("list", "--db", str(db)), "written by a newer hpcprobe")


def test_an_upgrade_that_fails_changes_nothing(tmp_path, monkeypatch):
    db = tmp_path / "old.sqlite"
    shutil.copy(STORES / "v1.sqlite", db)
    broken = {**sql.MIGRATIONS, STORE_VERSION: (*sql.MIGRATIONS[STORE_VERSION],
                                                "CREATE INDEX nope ON no_such_table(x)")}
    monkeypatch.setattr(sql, "MIGRATIONS", broken)
    with pytest.raises(UserError, match="nothing was changed"):
        Store.open(db)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "metrics_name" not in names  # the first statements of the step were rolled back too


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_campaign_record_of_version_2_becomes_its_own_kind(backend, tmp_path, request):
    """Versions 1-2 stored a campaign driver's record with a topology of zero cores; version 3
    keeps it as a `campaign` run without one, and the node runs stay nodes."""
    db = _old_store(backend, 2, tmp_path, request)
    with Store.open(db, create=False) as st:
        record = st.load("c0ffee000001")
        nodes = [st.load(run.run_id) for run in RUNS]
    assert (record.kind, record.topology, record.tag) == ("campaign", {}, "c1")
    assert record.to_dict()["kind"] == "campaign"
    assert all(n.kind == "node" and n.topology["counts"]["cores"] > 0 for n in nodes)
    r = hpcprobe("show", "c0ffee000001", "--db", db)
    assert r.code == 0 and "A campaign record" in r.out, r.err


def test_the_schema_keeps_a_topology_to_node_runs():
    doc = RUNS[0].to_dict()
    results.validate({**doc, "kind": "campaign", "topology": {}})
    with pytest.raises(UserError, match="topology"):
        results.validate({**doc, "topology": {}})  # a node run measured a machine
    with pytest.raises(UserError):
        results.validate({**doc, "kind": "campaign"})  # a record has no topology


def _query(st: Store, text: str, args: list[object] | None = None) -> list[tuple]:
    """Rows of SQL on an open store."""
    assert isinstance(st, sql.SqlStore)
    return list(st._execute(text, args or []))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_version_7_keys_every_figure_by_the_md5_of_its_params(backend, tmp_path, request):
    """SQLite writes the digest of a figure's params beside them (and the rows of a version-6
    store get theirs as it is brought up), as PostgreSQL generates it: the same digest both
    ways, and a figure's history found by it."""
    db = _old_store(backend, 6, tmp_path, request)
    fresh = str(tmp_path / "new.sqlite") if backend == "sqlite" else db
    with Store.open(db, create=False) as old, Store.open(fresh) as new:
        if fresh != db:
            new.save(RUNS[1])
        for st in (old, new):
            pairs = _query(st, "SELECT params, params_md5 FROM metrics")
            assert pairs and all(hashlib.md5(ps.encode()).hexdigest() == digest
                                 for ps, digest in pairs)
            m = RUNS[1].metrics[0]
            hosts = {c.host for c in st.series_across(m.benchmark, m.name)}
            assert RUNS[1].host in hosts


def test_a_fleet_figure_is_read_from_the_digest_index_alone(tmp_path):
    """SQLite reads a figure's history (its count, the rows stored since) from the index
    keyed by the params' digest, never the metrics table's rows; the old index is gone."""
    db = tmp_path / "old.sqlite"
    shutil.copy(STORES / "v6.sqlite", db)
    match = sql.SqlStore.FIGURE_MATCH
    m = RUNS[0].metrics[0]
    figure = [m.benchmark, m.name, json.dumps(m.params, sort_keys=True)]
    with Store.open(db, create=False) as st:
        names = {r[0] for r in _query(st, "SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "metrics_figure_md5" in names and "metrics_figure" not in names
        for query, args in (
                ("SELECT count(*), max(m.metric_id) FROM metrics m WHERE m.benchmark = ? AND "
                 f"m.name = ? AND {match}", figure),
                ("SELECT m.median, m.ci_low, m.ci_high, m.unit, m.better, m.run_id, m.seq FROM "
                 f"metrics m WHERE m.benchmark = ? AND m.name = ? AND {match} AND "
                 "m.metric_id > ?", [*figure, 0])):
            plan = " ".join(r[-1] for r in _query(st, f"EXPLAIN QUERY PLAN {query}", args))
            assert "COVERING INDEX metrics_figure_md5" in plan, plan


def test_version_7_moves_every_sample_into_its_metrics_row(tmp_path):
    """A version-6 store's sample rows become each metric's packed samples, every bit kept,
    and their table is gone."""
    db = tmp_path / "old.sqlite"
    shutil.copy(STORES / "v6.sqlite", db)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT m.run_id, m.seq, s.value FROM samples s JOIN metrics m ON "
                              "m.metric_id = s.metric_id ORDER BY m.run_id, m.seq, s.seq"
                              ).fetchall()
    conn.close()
    with Store.open(db, create=False) as st:
        after = [(run_id, seq, x) for run_id, seq, packed in _query(
            st, "SELECT run_id, seq, samples FROM metrics ORDER BY run_id, seq")
            for x in sql.unpack(packed)]
        tables = {r[0] for r in _query(st, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert after == before and len(before) > 30
    assert "samples" not in tables


@given(lists(floats(), max_size=40))
def test_samples_are_packed_bit_for_bit(xs):
    """Big-endian doubles, as PostgreSQL's float8send writes them, every bit back (NaN's
    payload, -0.0 and subnormals too)."""
    bits = [struct.pack(">d", x) for x in xs]
    assert sql.pack(xs) == b"".join(bits)
    assert [struct.pack(">d", x) for x in sql.unpack(sql.pack(xs))] == bits


_VALUES = one_of(text(max_size=4), integers(-2, 2), booleans(), floats(-2, 2), none(),
                 lists(integers(0, 2), max_size=2))


@given(lists(dictionaries(sampled_from("abc"), _VALUES, max_size=3), max_size=12))
@example([{"a": 0.0}, {"a": -0.0}, {"a": 1}, {"a": 1.0}, {"a": True}])
def test_a_params_text_is_its_sorted_json_each_time(params):
    """The text kept for params equal in Python but not in JSON (1, 1.0, True; 0.0, -0.0) is
    never another's: each text is json.dumps with sorted keys, found again or made."""
    for _ in range(2):
        assert [sql.params_text(p) for p in params] == [json.dumps(p, sort_keys=True)
                                                         for p in params]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_version_8_drops_the_index_that_the_figure_index_covers(backend, tmp_path, request):
    """A version-7 store loses version 2's index of (benchmark, name), which the figure index
    begins with; a figure across the runs is found all the same, and in SQLite by that index."""
    db = _old_store(backend, 7, tmp_path, request)
    m = RUNS[1].metrics[0]
    with Store.open(db, create=False) as st:
        names = {r[0] for r in _query(
            st, "SELECT name FROM sqlite_master WHERE type = 'index'" if backend == "sqlite"
            else "SELECT indexname FROM pg_indexes WHERE tablename = 'metrics'")}
        assert "metrics_figure_md5" in names and "metrics_name" not in names, names
        found = st.metric_across(m.benchmark, m.name)
        assert [(info["run_id"], got.samples) for info, got in found
                if got.params == m.params] == [(RUNS[1].run_id, m.samples)]
        if backend == "sqlite":
            plan = " ".join(r[-1] for r in _query(
                st, "EXPLAIN QUERY PLAN SELECT m.samples FROM metrics m WHERE m.benchmark = ? "
                "AND m.name = ?", [m.benchmark, m.name]))
            assert "INDEX metrics_figure_md5" in plan, plan
