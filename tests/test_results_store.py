"""The result document, its schema, and the SQLite store."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from hpcprobe import native, registry
from hpcprobe.common.errors import HpcprobeError, UserError
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.results import model as results
from hpcprobe.results.model import Metric
from hpcprobe.results.sql import STORE_VERSION, unpack
from hpcprobe.results.store import Store


@pytest.fixture(scope="module")
def measured_run(tiny_module):
    """A real, small run: triad and load on one thread at an L2-sized working set."""
    opts = MemoryOptions(kernels=("triad", "load"), threads=(1,), size_bytes=96 << 10)
    return registry.execute(tiny_module, profiles.get("quick"), ["memory"], native.best_isa(),
                          {"memory": opts}, NoProgress(), tag="unit")


@pytest.fixture(scope="module")
def tiny_module():
    from conftest import DATA
    from hpcprobe.machine import topology
    return topology.load_xml(DATA / "tiny-2c.xml")


def test_document_validates_against_shipped_schema(measured_run):
    doc = measured_run.to_dict()
    results.validate(doc)
    assert doc["schema_version"] == results.SCHEMA_VERSION
    names = {(m["name"], m["params"]["kernel"], m["params"]["stores"]) for m in doc["metrics"]}
    assert ("bandwidth", "triad", "regular") in names and ("bandwidth", "load", "regular") in names
    assert ("bandwidth_write_allocate", "triad", "nt") in names
    for m in doc["metrics"]:
        assert m["summary"]["n"] == len(m["samples"]) >= 3
        assert m["params"]["level"] == "L2" and m["unit"] == "GB/s"
    prov = doc["provenance"]
    for key in ("host", "cpu_model", "kernel", "smt", "numa_nodes", "thp", "compiler", "isa",
                "hpcprobe_version", "environment"):
        assert key in prov
    assert "flags:" in prov["compiler"]


def test_schema_rejects_broken_documents(measured_run):
    doc = measured_run.to_dict()
    bad = json.loads(json.dumps(doc))
    bad["metrics"][0]["summary"].pop("ci95")
    with pytest.raises(UserError, match="ci95"):
        results.validate(bad)
    bad = json.loads(json.dumps(doc))
    bad["metrics"][0]["params"]["level"] = "L9"
    with pytest.raises(UserError):
        results.validate(bad)
    bad = dict(doc, schema_version=99)
    with pytest.raises(UserError, match="schema version 99"):
        results.validate(bad)


def test_json_round_trip(measured_run, tmp_path):
    path = tmp_path / "run.json"
    results.write_json(measured_run, path)
    back = results.read_json(path)
    assert back.to_dict() == measured_run.to_dict()


def test_read_json_errors(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{nope")
    with pytest.raises(UserError, match="not JSON"):
        results.read_json(p)
    p.write_text('{"a": 1}')
    with pytest.raises(UserError, match="not an hpcprobe result"):
        results.read_json(p)


def test_store_round_trip_keeps_every_sample(measured_run, tmp_path):
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(measured_run)
        back = st.load(measured_run.run_id[:6])
        assert back.to_dict() == measured_run.to_dict()
        assert st.resolve("latest") == measured_run.run_id
        assert st.resolve("unit") == measured_run.run_id  # by tag
        [info] = st.runs()
        assert info.metrics == len(measured_run.metrics) and info.tag == "unit"
    packed = sqlite3.connect(db).execute("SELECT samples FROM metrics ORDER BY seq").fetchall()
    assert [unpack(p) for p, in packed] == [m.samples for m in measured_run.metrics]
    assert all(len(p) == 8 * len(m.samples) for (p,), m in zip(packed, measured_run.metrics,
                                                                   strict=True))


def test_store_resolve_errors(tmp_path, measured_run):
    with Store.open(tmp_path / "r.sqlite") as st:
        with pytest.raises(UserError, match="holds no runs"):
            st.resolve("latest")
        st.save(measured_run)
        with pytest.raises(UserError, match="hpcprobe list"):
            st.resolve("nosuchrun")


def test_failed_save_leaves_no_partial_run(measured_run, tmp_path):
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st:
        st.save(measured_run)
        broken = results.Run.from_dict(measured_run.to_dict())
        broken.run_id = "0123456789ab"
        # a sample SQLite cannot store (NaN becomes NULL) fails the insert half-way through
        broken.metrics.append(Metric("memory", "bandwidth", "GB/s",
                                     dict(measured_run.metrics[0].params), [float("nan")]))
        with pytest.raises((HpcprobeError, UserError)):
            st.save(broken)
        assert [r.run_id for r in st.runs()] == [measured_run.run_id]
        rows = st.conn.execute("SELECT count(*) FROM metrics WHERE run_id = ?",
                               ("0123456789ab",)).fetchone()[0]
        assert rows == 0


def _execute(db, sql: str) -> None:
    """Change an SQLite file behind the store's back."""
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_store_version_is_checked(tmp_path):
    db = tmp_path / "r.sqlite"
    Store.open(db).close()
    _execute(db, f"PRAGMA user_version = {STORE_VERSION + 1}")
    with pytest.raises(UserError, match="store version"):
        Store.open(db)


def test_store_refuses_foreign_sqlite(tmp_path):
    db = tmp_path / "other.sqlite"
    _execute(db, "CREATE TABLE t(x)")
    with pytest.raises(UserError, match="not an hpcprobe store"):
        Store.open(db)


def test_store_unwritable_path(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(UserError, match="^db "):  # <db>: the CLI shows --db
            Store.open(ro / "sub" / "r.sqlite")
    finally:
        ro.chmod(0o700)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root")
def test_a_store_that_cannot_be_made_on_a_full_disk_leaves_no_file(tmp_path):
    """A full file system (a 16 KiB tmpfs, filled): one line, and no empty file left where the
    store would have been (it was left, 0 bytes)."""
    import subprocess

    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with open(full / "fill", "wb") as f, pytest.raises(OSError):
            f.write(bytes(1 << 20))
        with pytest.raises(UserError, match="disk is full"):
            Store.open(full / "r.sqlite")
        assert not (full / "r.sqlite").exists()
    finally:
        subprocess.run(["umount", "--lazy", str(full)], check=True)  # even with a file open


def test_store_path_that_is_a_directory(tmp_path):
    with pytest.raises(UserError, match="^db "):  # <db>: the CLI shows --db
        Store.open(tmp_path)


def test_missing_store_for_reading(tmp_path):
    with pytest.raises(UserError, match="no result store"):
        Store.open(tmp_path / "none.sqlite", create=False)


def test_store_under_a_file_is_refused(tmp_path):
    """Unwritable even for root: the parent is a regular file."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="^db "):  # <db>: the CLI shows --db
        Store.open(tmp_path / "file" / "r.sqlite")


def test_a_url_picks_its_backend_and_an_unknown_one_is_refused(tmp_path, monkeypatch):
    from conftest import assert_user_error, hpcprobe
    from hpcprobe.results.sqlite import SqliteStore
    from hpcprobe.results.store import BACKENDS

    assert BACKENDS["sqlite"] is SqliteStore
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"no result store backend for nosuch:// here; backends: "
                                        r"postgres, postgresql, sqlite"):
        Store.open("nosuch://host/db")
    assert_user_error(hpcprobe("list", "--db", "nosuch://host/db"),
                      "no result store backend")
    assert list(tmp_path.iterdir()) == []  # not taken as a path: no nosuch: directory
