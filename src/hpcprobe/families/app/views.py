"""The app family's tables: each application's figures, median ±95 % CI (a known
application's several, each named), the ranks it ran on, and the commands run; its headline
figures."""

from __future__ import annotations

import shlex

from hpcprobe.analysis.verdict import Headline
from hpcprobe.families.app import bench
from hpcprobe.measure.family import energy_figure
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    ms = [m for m in run.metrics if m.benchmark == "app"]
    if not ms:
        return []
    apps = bench.APPS.each(run.provenance)
    t = Table(title="Applications: figures per repetition, median ±95% CI")
    for col, just in (("application", "left"), ("figure", "left"), ("median", "right"),
                      ("unit", "left"), ("better", "left"), ("n", "right"), ("ranks", "right")):
        t.add_column(col, just)
    for m in ms:
        name = m.name.removeprefix("app:")
        p = m.params
        ranks = f"{p['ranks']} ({p['layout']}, {p['nodes']} node(s))" if "ranks" in p else "-"
        kept = apps.get(name)
        t.add_row(name, str(p.get("figure") or (kept.figure if kept else None) or ""), cell(m, 3),
                  m.unit, m.better, str(len(m.samples)), ranks)
    c = Table(title="Commands run")
    for col in ("application", "command", "read"):
        c.add_column(col, "left")
    for name, info in apps.items():
        c.add_row(name, shlex.join(info.command), info.figure or "")
    return shown(t, c)


def headlines(run: Run) -> list[Headline]:
    """Each application's figure users quote (its figure of merit, LAMMPS's first figure,
    HPCG's rating), on the most ranks it ran on."""
    first: dict[str, Metric] = {}
    for m in run.metrics:
        if m.benchmark != "app" or not m.samples or not m.name.startswith(bench.PREFIX) \
                or energy_figure(m.name):
            continue  # the power and energy of its repetitions are beside it, not headlines
        had = first.get(m.name)
        if had is None or (m.params.get("figure") == had.params.get("figure")
                           and m.params.get("ranks", 1) > had.params.get("ranks", 1)):
            first[m.name] = m
    return [Headline(name, f"{name.removeprefix('app:')} {m.params.get('figure', '')}".strip(),
                     m) for name, m in first.items()]
