"""A proxy beside the benchmark it stands for (a family that declares `Predicts`: the CG proxy
and HPCG's rating), where one run holds both: each figure with its layout, and how far apart
they are. Central: it names no family; the registry hands it the families that declare it."""

from __future__ import annotations

from collections.abc import Sequence

from hpcprobe.analysis.verdict import Picker
from hpcprobe.measure.family import Predicts
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Block, Table, cell

#: A family that predicts another's figure: its name, its headline picker, what it predicts
Proxy = tuple[str, Picker, Predicts]


def _layout(m: Metric) -> str:
    p = m.params
    known = "ranks" in p or "threads" in p
    return f"{p.get('ranks', 1)} x {p.get('threads', 1)}" if known else "-"


def _target(run: Run, p: Predicts) -> Metric | None:
    return next((m for m in run.metrics if m.benchmark == p.benchmark and m.name == p.name
                 and m.samples and all(str(m.params.get(k)) == v for k, v in p.params.items())),
                None)


def tables(proxies: Sequence[Proxy], run: Run) -> list[Block]:
    out: list[Block] = []
    for name, pick, p in proxies:
        real, heads = _target(run, p), pick(run)
        if real is None or not heads:
            continue
        proxy = heads[0]
        t = Table(title=f"{p.what} and its proxy in this run: how far the {name} proxy is from "
                        "it", caption="each runs its own layout and problem: the ratio holds "
                                      "for this node and these settings")
        for col, just in (("figure", "left"), ("median", "right"), ("unit", "left"),
                          ("ranks x threads", "right")):
            t.add_column(col, just)
        t.add_row(p.what, cell(real, 3), real.unit, _layout(real))
        t.add_row(f"{name} proxy: {proxy.label}", cell(proxy.metric, 3), proxy.metric.unit,
                  _layout(proxy.metric))
        med = real.summary.median
        t.add_row("proxy / real", f"{proxy.metric.summary.median / med:.2f}" if med else "-",
                  "x", "")
        out.append(t)
    return out
