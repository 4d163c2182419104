"""Work done in a forked child (hpcprobe.common.background): its result handed back as it
would be made here; made here where the child fails, hangs or cannot be made. And a campaign's
report page the same, byte for byte, with its figures drawn by a child or here."""

from __future__ import annotations

import os
import time

from hpcprobe.cli import main
from hpcprobe.commands import cluster as cluster_cmd
from hpcprobe.common import background


def test_the_childs_result_is_handed_back():
    here = os.getpid()
    got = background.start(lambda: {"pid": os.getpid(), "data": [1.5, b"\x00png"] * 3})()
    assert got["data"] == [1.5, b"\x00png"] * 3
    assert got["pid"] != here  # made by the child


def test_work_is_done_here_where_the_child_fails_hangs_or_cannot_be_made(monkeypatch):
    here = os.getpid()

    def fails_in_a_child() -> int:
        if os.getpid() != here:
            raise RuntimeError("the child fails")
        return os.getpid()

    def hangs_in_a_child() -> int:
        if os.getpid() != here:
            time.sleep(60)
        return os.getpid()

    assert background.start(fails_in_a_child)() == here
    t0 = time.monotonic()
    assert background.start(hangs_in_a_child, timeout_s=0.5)() == here
    assert time.monotonic() - t0 < 30  # killed at the deadline, not waited for

    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert background.start(os.getpid)() == here


def test_a_report_page_is_the_same_with_its_figures_drawn_by_a_child(tmp_path, monkeypatch,
                                                                    capsys):
    import clusterdata
    from hpcprobe.results.store import Store

    db = tmp_path / "r.sqlite"
    _, runs = clusterdata.campaign(8, slow_nodes={"n5": 0.8}, tag="c1", seed=5)
    with Store.open(db) as st, st.transaction():
        for r in runs:
            st.insert(r)
    drawn, here = cluster_cmd._drawn, os.getpid()

    def noted(v):  # which process drew them
        (tmp_path / f"drawn-by-{os.getpid()}").touch()
        return drawn(v)

    monkeypatch.setattr(cluster_cmd, "_drawn", noted)
    pages = []
    for drawn_by in ("a child", "this process"):
        if drawn_by == "this process":
            monkeypatch.setattr(cluster_cmd.background, "start", lambda work: work)
        out = tmp_path / f"{drawn_by}.html"
        assert main(["cluster", "report", "c1", "--db", str(db), "-o", str(out)]) == 1
        pages.append(out.read_bytes())
    capsys.readouterr()
    assert pages[0] == pages[1] and pages[0].count(b'<img class="plot"') == 5
    by = {int(p.name.rsplit("-", 1)[1]) for p in tmp_path.glob("drawn-by-*")}
    assert here in by and len(by) == 2  # a child drew the first page's, this process the second's
