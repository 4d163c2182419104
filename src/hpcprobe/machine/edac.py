"""The memory controllers' own view of the DIMMs, from the kernel's EDAC sysfs
(/sys/devices/system/edac/mc/mcN, Documentation/ABI/testing/sysfs-devices-edac): each
populated DIMM (or rank, for drivers that count chip selects) with its label, location and size,
and the corrected and uncorrected error counts since the counters were last reset. It has no
speeds, so it gives no ceiling; it cross-checks SMBIOS (a DIMM the firmware lists and the
controller does not see) and says where the firmware hides the DIMMs (a VM has no EDAC)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.kernelfiles import read_text

ROOT = "/sys/devices/system/edac/mc"
#: A location's channel ("csrow 0 channel 3", "memory 0 channel 1 slot 0")
_CHANNEL = re.compile(r"\bchannel\s+(\d+)")


@dataclass(frozen=True)
class Module:
    """One DIMM (or rank) as its memory controller sees it."""

    mc: str  # mc0, mc1...
    label: str  # the board's slot name where the driver or edac-ctl set it
    location: str  # the controller's coordinates ("csrow 0 channel 3")
    size_mib: int
    ce: int  # corrected errors since the last reset
    ue: int  # uncorrected errors since the last reset

    @property
    def channel(self) -> tuple[str, str] | None:
        m = _CHANNEL.search(self.location)
        return (self.mc, m.group(1)) if m else None


@dataclass(frozen=True)
class Edac:
    """What the memory controllers report: their driver, modules and error totals (the
    controllers' own counts, with the errors they could not place on a module)."""

    driver: str
    modules: tuple[Module, ...]
    ranks: bool  # the driver lists ranks (chip selects), not DIMMs
    ce: int
    ue: int

    @property
    def channels(self) -> int:
        return len({m.channel for m in self.modules if m.channel is not None})

    def to_dict(self) -> dict[str, object]:
        return {"driver": self.driver, "modules": len(self.modules), "ranks": self.ranks,
                "channels": self.channels, "ce": self.ce, "ue": self.ue,
                "errors": {m.label: [m.ce, m.ue] for m in self.modules if m.ce or m.ue}}


def _int(path: Path) -> int:
    text = read_text(path)
    return int(text) if text and text.strip().isdigit() else 0


def read(root: str = ROOT) -> Edac | None:
    """The memory controllers' report, None where no EDAC driver has registered one (a VM, a
    kernel without the driver for this CPU)."""
    base = Path(root)
    mcs = sorted(base.glob("mc[0-9]*"), key=lambda p: int(p.name[2:]) if
                 p.name[2:].isdigit() else 0) if base.is_dir() else []
    if not mcs:
        return None
    modules, drivers, ranks, ce, ue = [], [], False, 0, 0
    for mc in mcs:
        drivers.append(read_text(mc / "mc_name") or mc.name)
        ce += _int(mc / "ce_count")
        ue += _int(mc / "ue_count")
        entries = sorted(mc.glob("dimm[0-9]*")) or sorted(mc.glob("rank[0-9]*"))
        ranks = ranks or any(e.name.startswith("rank") for e in entries)
        for e in entries:
            size = _int(e / "size")
            if size:
                modules.append(Module(mc.name, read_text(e / "dimm_label") or
                                      f"{mc.name}/{e.name}", read_text(e / "dimm_location") or "",
                                      size, _int(e / "dimm_ce_count"), _int(e / "dimm_ue_count")))
    return Edac(", ".join(dict.fromkeys(drivers)), tuple(modules), ranks, ce, ue)


def findings(e: Edac, smbios_dimms: int | None, smbios_channels: int | None) -> list[str]:
    """What the controllers' report says about the DIMMs: errors, and DIMMs or channels the
    firmware lists that the controllers do not see."""
    out = []
    worst = Counter({m.label: m.ue for m in e.modules if m.ue}) or \
        Counter({m.label: m.ce for m in e.modules if m.ce})
    where = (" (most on " + ", ".join(f"{k}: {v}" for k, v in worst.most_common(2)) + ")"
             if worst else "")
    if e.ue:
        out.append(f"{e.ue} uncorrected memory error(s) since the EDAC counters were reset"
                   f"{where}: replace the DIMM before it takes a job down")
    elif e.ce:
        out.append(f"{e.ce} corrected memory error(s) since the EDAC counters were reset"
                   f"{where}: a DIMM that corrects errors may be failing")
    if smbios_channels is not None and e.channels and e.channels < smbios_channels:
        out.append(f"the memory controllers see {e.channels} populated channel(s), the "
                   f"firmware lists {smbios_channels}: a DIMM they do not use")
    elif smbios_dimms is not None and not e.ranks and len(e.modules) < smbios_dimms:
        out.append(f"the memory controllers see {len(e.modules)} DIMM(s), the firmware lists "
                   f"{smbios_dimms}: a DIMM they do not use")
    return out
