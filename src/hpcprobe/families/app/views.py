"""The app family's tables: each application's figures, median ±95 % CI (a known
application's several, each named), the ranks it ran on, HPCG's rating beside the rate of its
proxy (the cg family) where the run holds both, and the commands run."""

from __future__ import annotations

import shlex

from hpcprobe.analysis.verdict import Headline
from hpcprobe.families.cg import views as cg_views
from hpcprobe.results.model import Metric, Run
from hpcprobe.views.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    ms = [m for m in run.metrics if m.benchmark == "app"]
    if not ms:
        return []
    apps = run.provenance.get("app", {})
    t = Table(title="Applications: figures per repetition, median ±95% CI")
    for col, just in (("application", "left"), ("figure", "left"), ("median", "right"),
                      ("unit", "left"), ("better", "left"), ("n", "right"), ("ranks", "right")):
        t.add_column(col, just)
    for m in ms:
        name = m.name.removeprefix("app:")
        p = m.params
        ranks = f"{p['ranks']} ({p['layout']}, {p['nodes']} node(s))" if "ranks" in p else "-"
        t.add_row(name, str(p.get("figure") or apps.get(name, {}).get("figure", "")), cell(m, 3),
                  m.unit, m.better, str(len(m.samples)), ranks)
    c = Table(title="Commands run")
    proxy = _beside_proxy(run)
    for col in ("application", "command", "read"):
        c.add_column(col, "left")
    for name, info in apps.items():
        c.add_row(name, shlex.join(info.get("command", [])), info.get("figure", ""))
    return shown(t, proxy, c)


def _layout(m: Metric) -> str:
    p = m.params
    return f"{p['ranks']} x {p['threads']}" if "ranks" in p else "1 (not launched)"


def _beside_proxy(run: Run) -> Table | None:
    """HPCG's rating and the CG proxy's headline rate from the same run (`app hpcg --with
    cg`), and how far the proxy is from it; None where the run lacks either."""
    rating = [m for m in run.metrics if m.benchmark == "app" and m.name == "app:hpcg"
              and m.params.get("figure") == "rating" and m.samples]
    proxy = cg_views.headlines(run)
    if not rating or not proxy:
        return None
    hpcg, cg = rating[0], proxy[0].metric
    grid = run.provenance.get("app", {}).get("hpcg", {}).get("input", {}).get("grid", "-")
    t = Table(title="HPCG and its proxy in this run: how far the CG proxy's rate is from "
                    "HPCG's rating",
              caption="the proxy has no multigrid preconditioner and its own layout: the "
                      "ratio holds for this node and these layouts")
    for col, just in (("figure", "left"), ("median", "right"), ("unit", "left"),
                      ("ranks x threads", "right"), ("grid a rank", "left")):
        t.add_column(col, just)
    t.add_row("HPCG rating", cell(hpcg, 3), hpcg.unit, _layout(hpcg), str(grid))
    t.add_row("CG proxy", cell(cg, 3), cg.unit, f"{cg.params.get('ranks', 1)} x "
              f"{cg.params.get('threads', 1)}", str(cg.params.get("grid", "-")))
    ratio = cg.summary.median / hpcg.summary.median if hpcg.summary.median else float("nan")
    t.add_row("proxy / HPCG", f"{ratio:.2f}", "x", "", "")
    return t


def headlines(run: Run) -> list[Headline]:
    """Each application's figure users quote (its figure of merit, LAMMPS's first figure,
    HPCG's rating), on the most ranks it ran on."""
    first: dict[str, Metric] = {}
    for m in run.metrics:
        if m.benchmark != "app" or not m.samples:
            continue
        had = first.get(m.name)
        if had is None or (m.params.get("figure") == had.params.get("figure")
                           and m.params.get("ranks", 1) > had.params.get("ranks", 1)):
            first[m.name] = m
    return [Headline(name, f"{name.removeprefix('app:')} {m.params.get('figure', '')}".strip(),
                     m) for name, m in first.items()]
