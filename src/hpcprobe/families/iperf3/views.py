"""The iperf3 family's tables: TCP throughput and retransmits, UDP throughput, jitter and loss,
per server or link."""

from __future__ import annotations

from hpcprobe.results.model import Run
from hpcprobe.viewkit.table import Block, Table, cell, shown

#: per protocol: the title, the parameter columns after the direction, and the figures beside
#: the throughput (name, column, digits)
PROTOCOLS = {
    "tcp": ("iperf3: TCP throughput received and the sender's retransmits", (),
            (("retransmits", "retransmits", 0),)),
    "udp": ("iperf3: UDP throughput received, the receiver's jitter and the datagrams lost",
            ("rate",), (("jitter", "jitter ms", 3), ("lost", "lost %", 2)))}


def tables(run: Run) -> list[Block]:
    ms = [m for m in run.metrics if m.benchmark == "iperf3"]
    out = []
    for proto, (title, shown_params, beside) in PROTOCOLS.items():
        mine = [m for m in ms if m.params.get("protocol", "tcp") == proto]
        if not mine:
            continue
        t = Table(title=f"{title}, median ±95% CI over the repetitions")
        for col, just in (("to", "left"), ("streams", "right"), ("direction", "left"),
                          *((k, "right") for k in shown_params), ("Gbit/s", "right"),
                          *((c, "right") for _, c, _ in beside)):
            t.add_column(col, just)
        by = {(m.name, repr(m.params)): m for m in mine}
        for m in mine:
            if m.name != "throughput":
                continue
            p = m.params
            to = f"{p['from']} -> {p['to']}" if "from" in p else str(p.get("server"))
            t.add_row(to, str(p["streams"]), "reverse" if p["reverse"] else "forward",
                      *(str(p[k]) for k in shown_params), cell(m, 2),
                      *(cell(by.get((name, repr(p))), digits) for name, _, digits in beside))
        out += shown(t)
    return out
