#!/usr/bin/env python3
"""The cluster report at fleet scale: a synthetic campaign of NODES nodes, each node run the
recorded default node probe (tests/data/cluster/probe-quick.json: memory, compute, latency,
frequency, numa; 177 figures, 822 samples) with its figures scaled per node and 1 % noise, a few
slow nodes, slow endpoints and slow links injected, and the links of the pair schedule (ring and
three random matchings: 2.5 pairs per node). Stored in an SQLite file with each node run's
figures and headlines kept beside it, as the campaign's driver keeps them (not timed), then
timed, best of 3: loading the campaign from the store, the verdict (its node runs' figures as
kept, and made again from their metrics: a campaign whose driver did not keep them, such as one
imported), the terminal blocks, the JSON document and the HTML page with its figures (heat map,
link matrices, scaling curve); then `hpcprobe cluster report CAMPAIGN -o report.html` itself,
start (imports) to end, twice: the first report of the store builds the kept series of its
nodes' history (once for a store: later campaigns extend them), the second is a campaign's
report; then each week later's campaign of the same nodes (`--weeks`: 2, the first and the next)
is stored and its first report timed (each node judged against its previous runs, its kept
series extended by one run, and searched for change points from the sixth campaign on). Goal of
issues 13 and 64: those reports <= 5 s at 1,000 nodes (each timed once the store just
written is on disk: os.sync first).
It checks that the injected faults, and nothing else, are found.

Usage: benchmarks/cluster_scale.py [--nodes 1000] [--weeks 2] [--pg URL] [--keep FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import clusterdata  # noqa: E402
from hpcprobe import registry  # noqa: E402
from hpcprobe.analysis.compare import NotJoined  # noqa: E402
from hpcprobe.cluster import views  # noqa: E402
from hpcprobe.cluster.verdict import analyse  # noqa: E402
from hpcprobe.judge import peers  # noqa: E402
from hpcprobe.judge.kept import KeptFigures, KeptHeadlines  # noqa: E402
from hpcprobe.results.model import Run  # noqa: E402
from hpcprobe.results.store import Selection, Store  # noqa: E402
from hpcprobe.schedulers.slurm import Slurm  # noqa: E402
from hpcprobe.views import html, terminal  # noqa: E402


def timed(what: str, f: Callable[[], object], n: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(n):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    print(f"  {what:<34} {best:7.3f} s")
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--weeks", type=int, default=2, help="campaigns of the same nodes, a week "
                    "apart, each one's first report timed (default 2)")
    ap.add_argument("--pg", metavar="URL", help="a PostgreSQL store instead of SQLite")
    ap.add_argument("--keep", metavar="FILE", help="the SQLite store here, kept (to profile "
                    "the command: python -m cProfile -m hpcprobe cluster report scale --db FILE)")
    a = ap.parse_args()
    n = a.nodes
    slow = {f"n{n // 7}": 0.85, f"n{n // 3}": 0.7}
    endpoints = {f"n{n // 2}": 0.5}
    t0 = time.perf_counter()
    nodes, runs = clusterdata.campaign(n, slow_nodes=slow, slow_endpoints=endpoints, seed=7,
                                       tag="scale")
    pairs = [(k["a"], k["b"]) for r in runs[-1:] for m in r.metrics if m.name == "latency"
             for k in [m.params]]
    bad = next(p for p in pairs if not set(p) & {*slow, *endpoints})
    runs[-1] = clusterdata.campaign_run(nodes, random.Random(7), 0.01, "scale", 1,
                                        {bad: 0.5}, endpoints, {})
    with tempfile.TemporaryDirectory() as tmp:
        location = a.pg or a.keep or str(Path(tmp) / "scale.sqlite")
        ignore = registry.not_joined()
        _store(location, runs, ignore)
        figures = sum(len(r.metrics) for r in runs)
        samples = sum(len(m.samples) for r in runs for m in r.metrics)
        print(f"{n} nodes, {figures} figures, {samples} samples stored in "
              f"{time.perf_counter() - t0:.1f} s ({location.split('@')[-1]}); timed, best of 3:")
        with Store.open(location) as st:
            t_load, loaded = timed("load the campaign", lambda: st.load_all(Selection(tag="scale")))
            assert isinstance(loaded, list)
            ids = [r.run_id for r in loaded if r.kind == "node"]
            t_verdict, v = timed("verdict (figures as kept)", lambda: analyse(
                loaded, "scale", ignore=ignore, made=KeptFigures(st, ignore).read(ids)))
        # once: a second pass would find each metric's summary made by the first
        timed("verdict (figures made again)", lambda: analyse(loaded, "scale", ignore=ignore),
              n=1)
        drain = Slurm().drain_argv
        t_blocks, blocks = timed("terminal blocks + rendering", lambda: _terminal(v, drain))
        t_json, _ = timed("JSON document", lambda: json.dumps(views.document(v, drain)))
        t_html, page = timed("HTML page with figures",
                             lambda: html.page("scale", views.blocks(v, drain), views.figures(v)),
                             n=1)
        cli = [sys.executable, "-m", "hpcprobe", "cluster", "report", "scale", "--db", location,
               "-o", str(Path(tmp) / "scale.html")]
        for what in ("the command, start to end, first", "the command, start to end, again"):
            # what was just stored written back first: a real campaign's runs were stored
            # over its minutes, and the kernel writes dirty pages back within 30 s
            # (vm.dirty_expire_centisecs), so its report does not meet that write-back; here
            # it would, at once after a 5 s store
            os.sync()
            t_cli, rc = timed(what, lambda: subprocess.run(
                cli, stdout=subprocess.DEVNULL).returncode, n=1)
            assert rc == 1, f"{' '.join(cli)}: exit status {rc}, not 1 (flagged)"
        # each week later, the next campaign of the same nodes: its first report judges each
        # node against its previous runs, extends each node's kept series by a run and
        # searches them (from changes.MIN_RUNS runs on)
        t_next = 0.0
        for week in range(2, a.weeks + 1):
            day = (date(2026, 1, 1) + timedelta(days=7 * (week - 1))).isoformat()
            _, later = clusterdata.campaign(n, slow_nodes=slow, slow_endpoints=endpoints,
                                            seed=6 + week, tag=f"scale{week}")
            _store(location, [replace(r, created=r.created.replace("2026-01-01", day))
                              for r in later], ignore)
            cli[cli.index("--db") - 1] = f"scale{week}"
            os.sync()  # as above
            t, rc = timed(f"campaign {week}'s first report", lambda: subprocess.run(
                cli, stdout=subprocess.DEVNULL).returncode, n=1)
            assert rc == 1, f"{' '.join(cli)}: exit status {rc}, not 1 (flagged)"
            t_next = max(t_next, t)
    total = t_load + t_verdict + t_blocks + t_json + t_html
    found = sorted((f.kind, f.item) for f in v.findings)  # type: ignore[attr-defined]
    want = sorted([("slow node", h) for h in slow] + [("slow network endpoint", h)
                                                      for h in endpoints]
                  + [("slow link", f"{bad[0]} - {bad[1]}")])
    print(f"  {'sum of the parts':<34} {total:7.3f} s")
    print(f"  goal: `hpcprobe cluster report -o` <= 5 s, once its history is kept: {t_cli:.3f} s;"
          f" a later campaign's first (the slowest): {t_next:.3f} s")
    print(f"  HTML page: {len(str(page)) / 1e6:.1f} MB; found {found}")
    if found != want:
        print(f"  MISSED: expected {want}")
        return 1
    return 0 if max(t_cli, t_next) <= 5 else 1


def _store(location: str, runs: list[Run], ignore: NotJoined) -> None:
    """The runs stored, each node run's figures and headlines kept beside it as the campaign
    driver keeps them."""
    with Store.open(location) as st:
        st.save_all(runs)
        nodes = [r for r in runs if r.kind == "node"]
        KeptFigures(st, ignore).keep({r.run_id: peers.figures(r.metrics, ignore) for r in nodes})
        KeptHeadlines(st, registry.declared()).of(nodes, keep=True)


def _terminal(v: object, drain: Callable[[str, str], list[str]]) -> object:
    from rich.console import Console

    blocks = views.blocks(v, drain)  # type: ignore[arg-type]
    terminal.print_blocks(blocks, Console(file=io.StringIO(), width=160))
    return blocks


if __name__ == "__main__":
    sys.exit(main())
