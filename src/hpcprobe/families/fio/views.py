"""The fio family's table: per job and direction, IOPS, bandwidth and completion latency."""

from __future__ import annotations

from hpcprobe.results.model import Run
from hpcprobe.viewkit.table import Block, Table, cell, shown


def tables(run: Run) -> list[Block]:
    rows: dict[tuple[str, str], dict[str, object]] = {}
    for m in run.metrics:
        if m.benchmark != "fio":
            continue
        p = m.params
        key = (str(p.get("job")), str(p.get("direction")))
        row = rows.setdefault(key, {"what": " ".join(
            f"{k} {p[k]}" for k in ("rw", "bs", "iodepth", "numjobs") if k in p)})
        row[m.name if m.name != "clat" else f"p{p['percentile']:g}"] = m
    if not rows:
        return []
    t = Table(title="fio: per job and direction, median ±95% CI over the repetitions; "
                    "completion latency (clat) percentiles in µs")
    cols = ("iops", "bandwidth", "p50", "p99", "p99.9")
    for col, just in (("job", "left"), ("direction", "left"), ("options", "left"),
                      ("IOPS", "right"), ("MB/s", "right"), ("clat p50", "right"),
                      ("clat p99", "right"), ("clat p99.9", "right")):
        t.add_column(col, just)
    for (job, direction), row in rows.items():
        t.add_row(job, direction, str(row["what"]),
                  *(cell(row.get(c), 1) if c in row else "-" for c in cols))  # type: ignore[arg-type]
    return shown(t)
