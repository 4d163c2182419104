"""The series a store keeps beside the figures (store version 6, results/series.py) always
read as the figures themselves give them, on SQLite and PostgreSQL: built on the first read,
brought up to date with the runs stored since (appended as parts and joined with the last
parts no larger, written again whole when an older run is imported), built again when its
count does not add up or a run is deleted, and read right when the store will not take the
write."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import replace

import pytest

import clusterdata
from hpcprobe.results import series
from hpcprobe.results.model import read_json
from hpcprobe.results.store import Columns, Selection, Store

TEMPLATE = read_json(clusterdata.TEMPLATE)
HOSTS = ("n1", "n2", "n3")
#: a figure with several params texts (the DRAM triad on 1 and 2 threads...) and one that a
#: headline picks
FIGURES = (("memory", "bandwidth", {"kernel": "triad", "level": "DRAM"}),
           ("latency", "latency", {}))


def _night(st: Store, night: int, rng: random.Random, day: int | None = None) -> None:
    with st.transaction():  # type: ignore[attr-defined]
        _runs(st, night, rng, day)


def _runs(st: Store, night: int, rng: random.Random, day: int | None) -> None:
    for host in HOSTS:
        r = clusterdata.node_run(TEMPLATE, host, 1.0, rng, 0.01, 0,
                                 f"nightly-{night:02d}" if night % 4 else "weekly")
        st.insert(replace(r, created=f"2026-03-{(day or night) + 1:02d}T02:00:00+00:00"))


def _by_figure(cols: list[Columns]) -> dict[tuple[str, str], Columns]:
    return {(c.host, json.dumps(c.params, sort_keys=True)): c for c in cols}


def _same_as_the_figures(st: Store, where: Selection | None = None) -> None:
    """The kept series (read twice: built, then as kept) hold what the figures give."""
    for bench, name, params in FIGURES:
        want = _by_figure(Store.series_across(st, bench, name, where, params))
        for _ in range(2):
            got = _by_figure(st.series_across(bench, name, where, params))
            assert got == want and got


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite")
    return str(request.getfixturevalue("pg_url"))


def _parts(st: Store) -> int:
    return int(st._execute("SELECT max(part) FROM series_rows").fetchone()[0] or 0)  # type: ignore[attr-defined]


def test_the_kept_series_are_the_figures_as_runs_arrive_and_go(location):
    rng = random.Random(6)
    with Store.open(location) as st:
        for night in range(4):
            _night(st, night, rng)
        _same_as_the_figures(st)
        for night in range(4, 7):  # each read after a night adds a part a host, joined with
            _night(st, night, rng)  # the last ones no larger: runs [4, 1], [4, 2], [4, 2, 1]
            _same_as_the_figures(st)
        assert _parts(st) == 2
        _night(st, 40, rng, day=2)  # an older run imported late: the host written again
        _same_as_the_figures(st)
        for sel in (Selection(since="2026-03-03", until="2026-03-06"), Selection(tag="weekly"),
                    Selection(tag_prefix="nightly-0"), Selection(tag_prefix="")):
            _same_as_the_figures(st, sel)
        # a count that does not add up (a writer that committed late): built again
        with st.transaction():  # type: ignore[attr-defined]
            st._execute("UPDATE series_kept SET n = n - 1")  # type: ignore[attr-defined]
        _same_as_the_figures(st)
        assert _parts(st) == 0
        [gone] = st.runs(limit=1)
        assert st.delete([gone.run_id]) == 1
        assert st._execute("SELECT count(*) FROM series_rows").fetchone()[0] == 0  # type: ignore[attr-defined]
        _same_as_the_figures(st)


def test_a_hosts_series_is_kept_in_a_few_parts_as_nights_arrive(tmp_path):
    """Read after each night, a host's series of n nights is kept in parts of the sizes of n's
    binary digits (a night joins the last parts no larger than what follows them): a part a
    night was read as sixteen parts before it was written again whole."""
    rng = random.Random(7)
    with Store.open(tmp_path / "r.sqlite") as st:
        for night in range(19):
            _night(st, night, rng)
            _same_as_the_figures(st)
            sizes = {tuple(len(runs.split(series.SEP)) for (runs,) in st._execute(  # type: ignore[attr-defined]
                "SELECT runs FROM series_rows WHERE figure = ? AND host = ? ORDER BY part",
                [figure, host])) for (figure, host) in st._execute(  # type: ignore[attr-defined]
                "SELECT DISTINCT figure, host FROM series_rows")}
            n = night + 1
            assert sizes == {tuple(1 << b for b in reversed(range(n.bit_length()))
                                   if n >> b & 1)}, (n, sizes)
    assert series._tail([4, 2, 1], 1) == 0 and series._tail([4, 2], 1) == 2
    assert series._tail([1, 1, 1], 5) == 0 and series._tail([8], 3) == 1


def test_a_store_that_will_not_take_the_write_still_reads_right(tmp_path):
    """Another writer holds SQLite's lock: the read waits 0.2 s for it, not 30, keeps nothing
    and gives the figures."""
    db = tmp_path / "r.sqlite"
    rng = random.Random(8)
    with Store.open(db) as st:
        for night in range(3):
            _night(st, night, rng)
    other = sqlite3.connect(db)
    other.execute("BEGIN IMMEDIATE")
    try:
        with Store.open(db, create=False) as st:
            _same_as_the_figures(st)
            assert st._execute("SELECT count(*) FROM series_kept").fetchone()[0] == 0  # type: ignore[attr-defined]
    finally:
        other.rollback()
        other.close()


def test_what_a_block_keeps_is_written_once_at_its_end(location):
    """A report keeps its figures' series and their searches at the end of its block, in one
    transaction (two syncs, not two a figure): nothing of it before, all of it after, and the
    next read takes it as kept; a block that fails keeps nothing, and reads right next time."""
    rng = random.Random(9)
    with Store.open(location) as st:
        for night in range(3):
            _night(st, night, rng)
        want = {f[:2]: _by_figure(Store.series_across(st, f[0], f[1], None, f[2])) for f in FIGURES}
        writes: list[int] = []
        real = st.briefly  # type: ignore[attr-defined]
        st.briefly = lambda: (writes.append(1), real())[1]  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError):
            with st.keeping():
                st.series_across(*FIGURES[0][:2], None, FIGURES[0][2])
                raise RuntimeError("the report failed")
        assert writes == [] and st._execute("SELECT count(*) FROM series_kept").fetchone()[0] == 0  # type: ignore[attr-defined]
        with st.keeping():
            for f in FIGURES:
                assert _by_figure(st.series_across(f[0], f[1], None, f[2])) == want[f[:2]]
            st.keep("steps", {"k": ("d", "[]")})
            with st.keeping():  # within it: the outer block's
                st.keep("steps", {"j": ("d", "[]")})
            assert writes == [] and st.kept("steps", ["k", "j"]) == {}
            assert st._execute("SELECT count(*) FROM series_kept").fetchone()[0] == 0  # type: ignore[attr-defined]
        assert writes == [1] and set(st.kept("steps", ["k", "j"])) == {"k", "j"}
        kept = st._execute("SELECT count(*) FROM series_kept").fetchone()[0]  # type: ignore[attr-defined]
        assert kept >= len(FIGURES)
        made: list[str] = []
        st._figures_between = lambda *a: made.append(a[0]) or []  # type: ignore[attr-defined]
        for f in FIGURES:  # as kept: no figure read to build them
            assert _by_figure(st.series_across(f[0], f[1], None, f[2])) == want[f[:2]]
        assert made == []
