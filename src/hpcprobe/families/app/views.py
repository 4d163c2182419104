"""The app family's tables: each application's figures, median ±95 % CI (a known
application's several, each named), the ranks it ran on, and the commands run."""

from __future__ import annotations

import shlex

from hpcprobe.results.model import Run
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
    for col in ("application", "command", "read"):
        c.add_column(col, "left")
    for name, info in apps.items():
        c.add_row(name, shlex.join(info.get("command", [])), info.get("figure", ""))
    return shown(t, c)
