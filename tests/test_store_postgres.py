"""The PostgreSQL backend against a real, throwaway PostgreSQL server started by the tests:
the same runs, read back whole; many concurrent writers; bad URLs and unreachable servers."""

from __future__ import annotations

import json

import pytest

from conftest import assert_user_error, hpcprobe, run_json
from hpcprobe.common.errors import UserError
from hpcprobe.results import model as results
from hpcprobe.results.store import Store


def test_a_run_stored_in_postgresql_reads_back_whole(pg_url, tmp_path):
    r, doc = run_json(tmp_path, "memory", "--kernel", "triad", "--threads", "1", "--size",
                      "96KiB", "--quick", "--db", pg_url, "--tag", "pg")
    assert r.code == 0, r.err
    with Store.open(pg_url, create=False) as st:
        back = st.load("pg")
        assert [i.run_id for i in st.runs()] == [doc["run_id"]]
    assert back.to_dict() == results.Run.from_dict(doc).to_dict()
    shown = hpcprobe("show", "pg", "--db", pg_url, "--json")
    assert shown.code == 0 and json.loads(shown.out)["run_id"] == doc["run_id"]
    listed = hpcprobe("list", "--db", pg_url)
    assert doc["run_id"] in listed.out


def test_the_same_runs_in_sqlite_and_postgresql_compare_alike(pg_url, tmp_path):
    from conftest import DATA

    runs = [results.read_json(DATA / "compare" / f) for f in ("nps1.json", "nps4.json")]
    sqlite_db = tmp_path / "r.sqlite"
    for db in (str(sqlite_db), pg_url):
        with Store.open(db) as st:
            for run in runs:
                st.save(run)
    a = hpcprobe("compare", runs[0].run_id, runs[1].run_id, "--db", str(sqlite_db), "--csv")
    b = hpcprobe("compare", runs[0].run_id, runs[1].run_id, "--db", pg_url, "--csv")
    assert a.code == 0 and a.out == b.out


def test_an_unreachable_server_is_one_line_before_anything_is_measured(tmp_path):
    from hpcprobe.tools import free_port

    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/none"
    out = tmp_path / "run.json"
    r = hpcprobe("run", "memory", "--kernel", "triad", "--threads", "1", "--size", "96KiB",
                 "--quick", "--db", url, "--json", str(out))
    assert_user_error(r, "cannot connect")
    assert "secret" not in r.err and "***" in r.err  # the password is never printed
    assert not out.exists()  # refused before measuring: nothing measured, nothing lost


def test_a_database_without_the_schema_is_refused_for_reading(pg_url):
    with pytest.raises(UserError, match="no hpcprobe store there yet"):
        Store.open(pg_url, create=False)


def test_a_wrong_password_or_a_malformed_url_is_one_line_without_the_password(pg_url, tmp_path):
    from hpcprobe.tools.pgserver import PASSWORD

    wrong = pg_url.replace(PASSWORD, "wrong-secret")
    r = hpcprobe("list", "--db", wrong)
    assert_user_error(r, "cannot connect")
    assert "wrong-secret" not in r.err and "password" in r.err
    for bad in ("postgresql://host:notaport/db", "postgresql://[::1/db"):
        r = hpcprobe("list", "--db", bad)
        assert_user_error(r, "--db")
    ok = hpcprobe("run", "memory", "--kernel", "triad", "--threads", "1", "--size", "96KiB",
                  "--quick", "--db", pg_url)
    assert ok.code == 0, ok.err
    assert PASSWORD not in ok.out + ok.err and "***" in ok.out  # shown redacted


def test_a_report_from_a_postgresql_store(pg_url, tmp_path):
    from conftest import DATA

    for f in ("nps1.json", "nps4.json"):
        assert hpcprobe("import", str(DATA / "compare" / f), "--db", pg_url).code == 0
    out = tmp_path / "r.html"
    r = hpcprobe("report", "nps1", "nps4", "--db", pg_url, "-o", str(out))
    assert r.code == 0, r.err
    assert "Comparison against" in out.read_text()


def test_hpcprobe_db_may_name_a_postgresql_store(pg_url, tmp_path):
    from conftest import DATA

    env = {"HPCPROBE_DB": pg_url}
    assert hpcprobe("import", str(DATA / "compare" / "nps1.json"), env=env).code == 0
    listed = hpcprobe("list", "--json", env=env)
    assert listed.code == 0 and [r["tag"] for r in json.loads(listed.out)] == ["nps1"]
    assert not (tmp_path / "postgresql:").exists()


def test_a_campaign_loads_whole_from_postgresql_and_sqlite_alike(pg_url, tmp_path):
    import clusterdata
    from hpcprobe.cluster import verdict
    from hpcprobe.results.store import Selection

    _, runs = clusterdata.campaign(6, slow_nodes={"n2": 0.7}, tag="pgc")
    docs = {}
    for db in (str(tmp_path / "r.sqlite"), pg_url):
        with Store.open(db) as st:
            for run in runs:
                st.save(run)
            back = st.load_all(Selection(tag="pgc"))
        docs[db] = [r.to_dict() for r in back]
        assert sorted(d["run_id"] for d in docs[db]) == sorted(r.run_id for r in runs)
        assert [(f.kind, f.item) for f in verdict.analyse(back, "pgc").findings] == \
            [("slow node", "n2")]
    assert docs[pg_url] == docs[str(tmp_path / "r.sqlite")]
    by_id = {r.run_id: r.to_dict() for r in runs}
    assert all(d == by_id[d["run_id"]] for d in docs[pg_url])  # every sample, in order
