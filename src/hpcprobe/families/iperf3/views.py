"""The iperf3 family's table: throughput and retransmits per server or link."""

from __future__ import annotations

from hpcprobe.results.model import Run
from hpcprobe.views.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    ms = [m for m in run.metrics if m.benchmark == "iperf3"]
    if not ms:
        return []
    t = Table(title="iperf3: TCP throughput received and the sender's retransmits, median ±95% "
                    "CI over the repetitions")
    for col, just in (("to", "left"), ("streams", "right"), ("direction", "left"),
                      ("Gbit/s", "right"), ("retransmits", "right")):
        t.add_column(col, just)
    retrans = {repr(m.params): m for m in ms if m.name == "retransmits"}
    for m in ms:
        if m.name != "throughput":
            continue
        p = m.params
        to = f"{p['from']} -> {p['to']}" if "from" in p else str(p.get("server"))
        t.add_row(to, str(p["streams"]), "reverse" if p["reverse"] else "forward", cell(m, 2),
                  cell(retrans.get(repr(p)), 0) if repr(p) in retrans else "-")
    return shown(t)
