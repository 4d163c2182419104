"""The error counters a health check watches rise from one check to the next: each InfiniBand
port's (symbol errors, link downed, link error recovery, receive errors, transmit discards:
`/sys/class/infiniband/*/ports/*/counters/`, the links fact's) and the memory controllers'
corrected and uncorrected totals (EDAC, the DIMMs fact's), each declared by its node fact
(`machine/facts.py`), and the machine-check interrupts the kernel counts per CPU in
`/proc/interrupts` outside EDAC (exceptions, the corrected-error threshold's, AMD's deferred
errors: a machine check the EDAC driver does not decode, or where no EDAC driver is loaded,
shows there). A counter's value means little alone (it counts since the driver
loaded or the counters were cleared); one that rose since the last check is a fault now."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hpcprobe.common.kernelfiles import read_text
from hpcprobe.machine import facts

SYSFS = Path("/sys")
INTERRUPTS = Path("/proc/interrupts")
#: The machine-check rows of /proc/interrupts whose rise is a fault (MCP, the polls, and TRM,
#: thermal events, rise on a healthy node)
MCE_ROWS = {"MCE": "machine check exceptions", "THR": "machine check threshold interrupts",
            "DFR": "deferred machine check errors"}


def machine_checks(text: str) -> dict[str, int]:
    """The machine-check rows of /proc/interrupts, each summed over the CPUs."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        row, _, rest = line.strip().partition(":")
        if row in MCE_ROWS:
            counts = [int(x) for x in rest.split() if x.isdigit()]
            out[MCE_ROWS[row]] = sum(counts)
    return out


def read(sysfs: Path = SYSFS, interrupts: Path | None = INTERRUPTS) -> dict[str, int]:
    """Every watched counter of this node by name ("mlx5_0/1 symbol_error", "EDAC
    uncorrected", "machine check exceptions"): each node fact's (`facts.Fact.counters`) and
    the machine checks'; those it cannot read are absent (the interrupts' too where
    `interrupts` is None: a recorded /sys has no /proc)."""
    out = facts.counters(sysfs)
    if interrupts is not None:
        out.update(machine_checks(read_text(interrupts) or ""))
    return out


def rising(before: Mapping[str, int], now: Mapping[str, int]) -> list[str]:
    """One line per counter that rose since `before` (a counter cleared since reads lower:
    not a rise)."""
    return [f"{name} rose by {now[name] - was} since the last check ({was} -> {now[name]})"
            for name, was in before.items() if name in now and now[name] > was]
