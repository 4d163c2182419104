"""Every fault a check reads without a figure."""

from __future__ import annotations

import shutil

from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import Reference
from hpcprobe.common.units import format_bytes
from hpcprobe.results.findings import HEALTH
from hpcprobe.results.model import Run


def faults(run: Run, ref: Reference | None, rose: list[str], devices: list[str], tmp: str,
           tmp_free: tuple[int, str]) -> list[health.Fault]:
    """The state against the reference's, counters that rose, the devices' health, the
    temporary directory's space (`tmp_free`: the least it needs, and where that is set), the
    families' errors: each with its kind (its code and action)."""
    out: list[health.Fault] = [(health.STATE, x) for x in (
        health.differences(health.state_of(run), ref.state) if ref is not None else [])]
    out += [(health.COUNTER, x) for x in rose]
    out += [(HEALTH, x) for x in devices]
    free = shutil.disk_usage(tmp).free
    need, where = tmp_free
    if free < need:
        out.append((health.SCRATCH, f"{tmp}: {format_bytes(free)} free, less than the "
                    f"{format_bytes(need)} a job needs ({where})"))
    return out + [(health.FAILED, x) for x in run.errors]
