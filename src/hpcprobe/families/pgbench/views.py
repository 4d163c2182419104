"""The pgbench family's table: TPS and average latency."""

from __future__ import annotations

from hpcprobe.results.model import Run
from hpcprobe.tools import VERSIONS
from hpcprobe.viewkit.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    tps = run.select("pgbench", "tps")
    if not tps:
        return []
    lat = {m.params["mode"]: m for m in run.select("pgbench", "latency")}
    tools = VERSIONS.each(run.provenance)
    t = Table(title=f"pgbench {tools.get('pgbench', '')} against PostgreSQL "
                    f"{tools.get('postgresql', '(the database given)')}: median ±95% CI over the "
                    "repetitions")
    for col, just in (("script", "left"), ("scale", "right"), ("clients", "right"),
                      ("TPS", "right"), ("latency ms", "right")):
        t.add_column(col, just)
    for m in tps:
        p = m.params
        t.add_row(p["mode"], str(p["scale"]), str(p["clients"]), cell(m, 1),
                  cell(lat.get(p["mode"]), 3))
    return shown(t)
