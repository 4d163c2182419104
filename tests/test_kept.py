"""A fleet's figures kept in the store (hpcprobe.judge.kept): read back exactly as they are made,
made again where they were made otherwise, gone with their run; a campaign's report the same
from kept figures as from its metrics, on both backends."""

from __future__ import annotations

import hashlib
import json

import pytest

import clusterdata
from hpcprobe import registry
from hpcprobe.analysis.compare import NotJoined
from hpcprobe.cli import main
from hpcprobe.judge import kept
from hpcprobe.judge.kept import KeptFigures
from hpcprobe.judge.peers import figures
from hpcprobe.results.model import read_json
from hpcprobe.results.store import Store


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
