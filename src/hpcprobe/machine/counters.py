"""The error counters a health check watches rise from one check to the next: each InfiniBand
port's (symbol errors, link downed, link error recovery, receive errors, transmit discards:
`/sys/class/infiniband/*/ports/*/counters/`) and the memory controllers' corrected and
uncorrected totals (EDAC), and the machine-check interrupts the kernel counts per CPU in
`/proc/interrupts` outside EDAC (exceptions, the corrected-error threshold's, AMD's deferred
errors: a machine check the EDAC driver does not decode, or where no EDAC driver is loaded,
shows there). A counter's value means little alone (it counts since the driver
loaded or the counters were cleared); one that rose since the last check is a fault now."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hpcprobe.common.kernelfiles import read_text
from hpcprobe.machine import edac

SYSFS = Path("/sys")
INTERRUPTS = Path("/proc/interrupts")
#: The machine-check rows of /proc/interrupts whose rise is a fault (MCP, the polls, and TRM,
#: thermal events, rise on a healthy node)
MCE_ROWS = {"MCE": "machine check exceptions", "THR": "machine check threshold interrupts",
            "DFR": "deferred machine check errors"}
#: The InfiniBand port counters whose rise is a fault (the IBTA's PortCounters an
#: administrator acts on: a bad cable or port, a flapping link, a congested or broken fabric)
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
               "port_xmit_discards")


def _int(path: Path) -> int | None:
    text = (read_text(path) or "").strip()
    return int(text) if text.isdigit() else None


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
    uncorrected", "machine check exceptions"); those it cannot read are absent (the
    interrupts' too where `interrupts` is None: a recorded /sys has no /proc)."""
    out: dict[str, int] = {}
    base = sysfs / "class" / "infiniband"
    for hca in sorted(base.iterdir()) if base.is_dir() else []:
        for port in sorted((hca / "ports").iterdir()) if (hca / "ports").is_dir() else []:
            for name in IB_COUNTERS:
                if (value := _int(port / "counters" / name)) is not None:
                    out[f"{hca.name}/{port.name} {name}"] = value
    mc = edac.read(str(sysfs / "devices" / "system" / "edac" / "mc"))
    if mc is not None:
        out["EDAC corrected"] = mc.ce
        out["EDAC uncorrected"] = mc.ue
    if interrupts is not None:
        out.update(machine_checks(read_text(interrupts) or ""))
    return out


def rising(before: Mapping[str, int], now: Mapping[str, int]) -> list[str]:
    """One line per counter that rose since `before` (a counter cleared since reads lower:
    not a rise)."""
    return [f"{name} rose by {now[name] - was} since the last check ({was} -> {now[name]})"
            for name, was in before.items() if name in now and now[name] > was]
