"""The app family's table: each application's figure of merit, median ±95 % CI."""

from __future__ import annotations

import shlex

from hpcprobe.results.model import Run
from hpcprobe.views.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    ms = [m for m in run.metrics if m.benchmark == "app"]
    if not ms:
        return []
    apps = run.provenance.get("app", {})
    t = Table(title="Applications: figure of merit per repetition, median ±95% CI")
    for col, just in (("application", "left"), ("figure", "left"), ("median", "right"),
                      ("unit", "left"), ("better", "left"), ("n", "right"), ("command", "left")):
        t.add_column(col, just)
    for m in ms:
        name = m.name.removeprefix("app:")
        info = apps.get(name, {})
        t.add_row(name, info.get("figure", ""), cell(m, 3), m.unit, m.better, str(len(m.samples)),
                  shlex.join(info.get("command", [])))
    return shown(t)
