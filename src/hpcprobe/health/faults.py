"""Every fault a check reads without a figure."""

from __future__ import annotations

import shutil

from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import Reference
from hpcprobe.common.units import format_bytes
from hpcprobe.results.model import Run


def faults(run: Run, ref: Reference | None, rose: list[str], devices: list[str], tmp: str,
           tmp_free: tuple[int, str]) -> list[str]:
    """The state against the reference's, counters that rose, the devices' health, the
    temporary directory's space (`tmp_free`: the least it needs, and where that is set), the
    families' errors."""
    out = health.differences(health.state_of(run), ref.state) if ref is not None else []
    out += rose
    out += devices
    free = shutil.disk_usage(tmp).free
    need, where = tmp_free
    if free < need:
        out.append(f"{tmp}: {format_bytes(free)} free, less than the {format_bytes(need)} a job "
                   f"needs ({where})")
    return out + run.errors
