"""A fleet's figures and headlines kept in the store (hpcprobe.judge.kept): read back exactly as
they are made, made again where they were made otherwise, gone with their run; a campaign's
report the same from kept figures and headlines as from its metrics (and, with both kept,
reading no node run whole), on both backends."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

import clusterdata
from hpcprobe import registry
from hpcprobe.analysis.compare import NotJoined
from hpcprobe.cli import main
from hpcprobe.judge import kept
from hpcprobe.judge.kept import KeptFigures, KeptHeadlines
from hpcprobe.judge.peers import figures
from hpcprobe.judge.run import bounded_all
from hpcprobe.results.model import read_json
from hpcprobe.results.sql import SqlStore
from hpcprobe.results.store import Selection, Store


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def campaign(location):
    """A stored campaign of eight nodes, n5 20 % slow: its store and node runs."""
    _, runs = clusterdata.campaign(8, slow_nodes={"n5": 0.8}, tag="c1", seed=5)
    with Store.open(location) as st, st.transaction():  # the recorded run, validated once
        for r in runs:
            st.insert(r)
    return location, [r for r in runs if r.kind == "node"]


def test_kept_figures_read_back_exactly_as_they_are_made(campaign):
    db, runs = campaign
    ignore = registry.not_joined()
    made = {r.run_id: figures(r.metrics, ignore) for r in runs}
    with Store.open(db, create=False) as st:
        KeptFigures(st, ignore).keep(dict(list(made.items())[:6]))
        back = KeptFigures(st, ignore).read(made)
    assert sorted(back) == sorted(list(made)[:6])  # those kept, and no other
    for run_id, figs in back.items():
        assert list(figs.items()) == list(made[run_id].items())  # labels, order, every bit


def test_figures_kept_otherwise_are_made_again_and_go_with_their_run(campaign, monkeypatch):
    db, runs = campaign
    ignore = registry.not_joined()
    with Store.open(db, create=False) as st:
        KeptFigures(st, ignore).keep({r.run_id: figures(r.metrics, ignore) for r in runs})
        assert len(KeptFigures(st, ignore).read(r.run_id for r in runs)) == len(runs)
        # joined otherwise, or kept by another format: none of them read back
        assert KeptFigures(st, ignore | frozenset({"threads"})).read(r.run_id for r in runs) \
            == {}
        monkeypatch.setattr(kept, "FORMAT", kept.FORMAT + 1)
        assert KeptFigures(st, ignore).read(r.run_id for r in runs) == {}
        monkeypatch.undo()
        assert st.delete([runs[0].run_id]) == 1
        assert sorted(KeptFigures(st, ignore).read(r.run_id for r in runs)) == \
            sorted(r.run_id for r in runs[1:])
        # damaged: not whole doubles, not base64, no labels' key: those made again
        held = st.kept(kept.FIGURES, [runs[1].run_id])[runs[1].run_id]
        key, packed = held[1].split(" ")
        damaged = {runs[1].run_id: f"{key} {packed[:-8]}", runs[2].run_id: f"{key} *not base64*",
                   runs[3].run_id: packed}
        st.keep(kept.FIGURES, {r: (held[0], v) for r, v in damaged.items()})
        assert sorted(KeptFigures(st, ignore).read(r.run_id for r in runs)) == \
            sorted(r.run_id for r in runs[4:])
        st.keep(kept.LABELS, {key: (held[0], '[["a", "GB/s"]]')})  # not a list of three
        assert KeptFigures(st, ignore).read(r.run_id for r in runs) == {}


def test_a_campaigns_report_is_the_same_from_kept_figures(campaign, capsys):
    """The first report makes the node runs' figures and keeps them, the second reads them;
    with a kept list of labels gone, the figures are made again. Each time the same."""
    db, runs = campaign
    docs = []
    for _ in range(2):
        assert main(["cluster", "report", "c1", "--db", db, "--json"]) == 1
        docs.append(json.loads(capsys.readouterr().out))
        with Store.open(db, create=False) as st:
            assert len(st.kept(kept.FIGURES, [r.run_id for r in runs])) == len(runs)
    with Store.open(db, create=False) as st:
        st._execute("DELETE FROM kept_results WHERE kind = ?", [kept.LABELS])  # type: ignore[attr-defined]
    assert main(["cluster", "report", "c1", "--db", db, "--json"]) == 1
    docs.append(json.loads(capsys.readouterr().out))
    assert docs[0] == docs[1] == docs[2]
    assert [(f["kind"], f["item"]) for f in docs[0]["findings"]] == [("slow node", "n5")]


def test_the_kept_format_is_raised_where_the_figures_change():
    """The figures `peers.figures` makes of a recorded node, at kept.FORMAT: where `label` or
    `figure` change them, raise kept.FORMAT (figures kept before are then made again) and give
    the new digest here."""
    run = read_json(clusterdata.TEMPLATE)
    made = figures(run.metrics, NotJoined())
    digest = hashlib.sha256(json.dumps(list(made.items())).encode()).hexdigest()
    assert (kept.FORMAT, len(made), digest) == (
        1, 177, "9588005e46e5d41fc7d0b99357a8a9e22bc543f78ad2a189547b8818d3096378")


def _hot(run):
    """The run as if its peak figures read 100 times what they measured: above their FLOP
    model."""
    return replace(run, run_id=f"{run.run_id}-hot", metrics=[
        replace(m, samples=[100 * x for x in m.samples]) if m.name == "peak" else m
        for m in run.metrics])


def test_kept_headlines_read_back_as_they_are_made(campaign, monkeypatch):
    """A run's headlines and its figures above their ceilings: kept, read back equal (every
    sample, params, ceiling); kept by another format or for other pickers or ceilings, or
    not what `keep` writes: made again; made from a run given whole, else read whole."""
    db, runs = campaign
    known = registry.declared()
    hot = _hot(runs[0])
    made = {r.run_id: bounded_all(r, known.pickers, known.bounds) for r in [*runs, hot]}
    assert made[hot.run_id].above and not made[runs[0].run_id].above
    assert len(made[runs[0].run_id].shown) >= 5
    with Store.open(db, create=False) as st:
        KeptHeadlines(st, known).keep(made)
        assert KeptHeadlines(st, known).read(made) == made
        assert KeptHeadlines(st, replace(known, bounds=known.bounds[1:])).read(made) == {}
        assert KeptHeadlines(st, replace(known, pickers=known.pickers[1:])).read(made) == {}
        monkeypatch.setattr(kept, "HEADLINES_FORMAT", kept.HEADLINES_FORMAT + 1)
        assert KeptHeadlines(st, known).read(made) == {}
        monkeypatch.undo()
        held = st.kept(kept.HEADLINES, [runs[1].run_id])[runs[1].run_id]
        st.keep(kept.HEADLINES, {runs[1].run_id: (held[0], held[1][:-9]),
                                 runs[2].run_id: (held[0], '{"shown": [[1, 2]], "above": []}')})
        assert sorted(KeptHeadlines(st, known).read(made)) == \
            sorted(r.run_id for r in [runs[0], *runs[3:], hot])
        assert st.delete([runs[3].run_id]) == 1
        assert runs[3].run_id not in KeptHeadlines(st, known).read(made)
        # neither kept nor given whole: read whole from the store (stored runs only)
        heads = st.headers([r.run_id for r in runs[1:3]])
        assert KeptHeadlines(st, known).of([*heads.values(), hot], keep=True) == {
            r: made[r] for r in [*heads, hot.run_id]}
        assert sorted(KeptHeadlines(st, known).read(made)) == \
            sorted(r.run_id for r in [*runs[:3], *runs[4:], hot])


def test_kept_reference_entries_give_the_reference_the_runs_give(campaign, monkeypatch):
    """What each node run gives a reference (its hardware, state, headline medians and CIs,
    which of them were disturbed): kept, read back equal, and the reference made of them the
    one made of the runs, every bit; kept by another format or for other pickers or labels, or
    not what `keep_entries` writes: made again from the run read whole; none for a campaign's
    own run."""
    from hpcprobe.analysis import reference
    from hpcprobe.analysis.verdict import headlines
    from hpcprobe.machine.steal import BUSY
    from hpcprobe.results.findings import Finding

    db, runs = campaign
    known = registry.declared()
    busy = replace(runs[1], run_id=f"{runs[1].run_id}-busy", findings=[
        Finding("latency", BUSY, "x", {"percent": 80.0}).to_dict()])
    given = [*runs, busy]
    made = {r.run_id: reference.entry(r, headlines(r, known.pickers), known.labels)
            for r in given}
    assert any(f.noisy for f in made[busy.run_id].figures)
    with Store.open(db, create=False) as st:
        held = KeptHeadlines(st, known)
        held.keep_entries(made)
        back = held.read_entries(made)
        assert back == made
        assert reference.grouped([back[r.run_id] for r in given]) == \
            reference.make(given, known.pickers, known.labels)
        assert KeptHeadlines(st, replace(known, pickers=known.pickers[1:])).read_entries(
            made) == {}
        assert KeptHeadlines(st, replace(known, labels=lambda _: [])).read_entries(made) == {}
        monkeypatch.setattr(kept, "ENTRIES_FORMAT", kept.ENTRIES_FORMAT + 1)
        assert KeptHeadlines(st, known).read_entries(made) == {}
        monkeypatch.undo()
        text = st.kept(kept.ENTRIES, [runs[2].run_id])[runs[2].run_id]
        st.keep(kept.ENTRIES, {runs[2].run_id: (text[0], text[1][:-9]),
                               runs[3].run_id: (text[0], '["a", "b"]')})
        assert sorted(held.read_entries(made)) == sorted(
            r.run_id for r in given if r not in runs[2:4])
        campaign_run = st.runs(limit=1, where=Selection(tag="c1"))[0].run_id
        assert held.entries([runs[2].run_id, runs[3].run_id, campaign_run], keep=True) == {
            r.run_id: made[r.run_id] for r in runs[2:4]}
        assert sorted(held.read_entries(made)) == sorted(made)


@pytest.fixture
def two_campaigns(location):
    """Two weekly campaigns of eight nodes (n5 20 % slow in the second: below its own past
    runs): the store, the second's node runs and its campaign run's id."""
    _, first = clusterdata.campaign(8, tag="c1", seed=5)
    _, second = clusterdata.campaign(8, slow_nodes={"n5": 0.8}, tag="c2", seed=6)
    second = [replace(r, created=r.created.replace("2026-01-01", "2026-01-08")) for r in second]
    with Store.open(location) as st, st.transaction():
        for r in [*first, *second]:
            st.insert(r)
    return location, [r for r in second if r.kind == "node"], second[-1].run_id


def test_a_campaigns_node_verdicts_are_the_same_from_kept_headlines(two_campaigns, capsys,
                                                                    monkeypatch):
    """Each node judged against its previous run: the same whether the headlines were made
    from the runs, kept by a report, or kept damaged (made again); with its figures and
    headlines kept, the report reads no node run whole."""
    db, runs, links = two_campaigns
    outs = []
    for _ in range(2):
        assert main(["cluster", "report", "c2", "--db", db, "--details"]) == 1
        outs.append(capsys.readouterr().out)
    read: list[str] = []
    load_ids = SqlStore.load_ids
    monkeypatch.setattr(SqlStore, "load_ids", lambda st, ids: read.extend(ids) or load_ids(st, ids))
    assert main(["cluster", "report", "c2", "--db", db, "--details"]) == 1
    outs.append(capsys.readouterr().out)
    assert set(read) == {links}  # the campaign run (its links): no node run, nor a previous one
    with Store.open(db, create=False) as st:
        assert len(st.kept(kept.HEADLINES, [r.run_id for r in runs])) == len(runs)
        st._execute("UPDATE kept_results SET value = '[' WHERE kind IN (?, ?)",  # type: ignore[attr-defined]
                    [kept.HEADLINES, kept.ENTRIES])
    assert main(["cluster", "report", "c2", "--db", db, "--details"]) == 1
    outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert "below" in outs[0] and "n5" in outs[0]
