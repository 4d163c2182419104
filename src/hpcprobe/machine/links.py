"""The node's links as sysfs states them, read before anything is measured: each NIC, HCA and
NVMe drive's PCIe link (the speed and width it trained at against the most it and its slot
allow) and each network port's rate and state (`/sys/class/net/*/speed` and `operstate`,
`/sys/class/infiniband/*/ports/*/rate` and `state`). A link below its maximum, or a port down,
is a finding stated before the figures. GPUs' links are the GPU inventory's (a GPU lowers its
link speed when idle)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcprobe.common.kernelfiles import read_text
from hpcprobe.machine import gpus

SYSFS = Path("/sys")


@dataclass(frozen=True)
class Port:
    """A network port: Ethernet (an interface backed by a device) or an InfiniBand HCA's
    port; its rate in Gb/s (None where the driver says none: no link, a virtual NIC) and its
    state as the kernel names it."""

    name: str  # eth0, mlx5_0/1
    kind: str  # "ethernet" or "infiniband"
    rate_gbps: float | None
    state: str | None  # "up", "down"; "ACTIVE", "DOWN", "INIT"

    @property
    def up(self) -> bool:
        return (self.state or "").lower() in ("up", "active")

    def __str__(self) -> str:
        rate = "rate n/a" if self.rate_gbps is None else f"{self.rate_gbps:g} Gb/s"
        return f"{self.name} {rate} {self.state or 'state n/a'}"


def _ethernet(sysfs: Path) -> list[Port]:
    out = []
    base = sysfs / "class" / "net"
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        if not (entry / "device").exists():  # lo, bridges, tunnels: no device behind them
            continue
        speed = re.match(r"\s*(\d+)\s*$", read_text(entry / "speed") or "")  # -1: unknown
        out.append(Port(entry.name, "ethernet", int(speed.group(1)) / 1000 if speed else None,
                        read_text(entry / "operstate")))
    return out


def _infiniband(sysfs: Path) -> list[Port]:
    out = []
    base = sysfs / "class" / "infiniband"
    for hca in sorted(base.iterdir()) if base.is_dir() else []:
        for port in sorted((hca / "ports").iterdir()) if (hca / "ports").is_dir() else []:
            rate = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", read_text(port / "rate") or "")
            state = re.match(r"\s*\d+:\s*(\w+)", read_text(port / "state") or "")
            out.append(Port(f"{hca.name}/{port.name}", "infiniband",
                            float(rate.group(1)) if rate else None,
                            state.group(1) if state else None))
    return out


def ports(sysfs: Path = SYSFS) -> list[Port]:
    """Every network port of the node: InfiniBand HCAs' ports, then Ethernet interfaces."""
    return _infiniband(sysfs) + _ethernet(sysfs)


def _pcie(sysfs: Path) -> list[dict[str, Any]]:
    """Each NIC/HCA and NVMe drive's PCIe link, once per device."""
    out = []
    for dev in gpus.pci_devices(sysfs):
        link = gpus.pcie_link(sysfs, dev.bus_id)
        if link is not None:
            out.append({"name": dev.name, "kind": dev.kind, "bus_id": dev.bus_id,
                        **asdict(link)})
    return out


def _below(d: dict[str, Any]) -> str | None:
    """Why a device's link is below the most it and its slot allow, or None."""
    said = []
    if d["width"] and d["max_width"] and d["width"] < d["max_width"]:
        said.append(f"x{d['width']:g} of x{d['max_width']:g} lanes")
    if d["speed_gts"] and d["max_speed_gts"] and d["speed_gts"] < d["max_speed_gts"]:
        said.append(f"{d['speed_gts']:g} of {d['max_speed_gts']:g} GT/s")
    if not said:
        return None
    return (f"PCIe link of {d['name']} ({d['bus_id']}) trained at {' and '.join(said)}: "
            "below what the device and its slot allow (a riser, a slot, a bad contact, a "
            "BIOS setting); its bandwidth ceiling is lower")


#: The InfiniBand port counters whose rise is a fault (the IBTA's PortCounters an
#: administrator acts on: a bad cable or port, a flapping link, a congested or broken fabric)
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
               "port_xmit_discards")


def counters(sysfs: Path = SYSFS) -> dict[str, int]:
    """Each InfiniBand port's watched error counters ("mlx5_0/1 symbol_error"), those it can
    read."""
    out: dict[str, int] = {}
    base = sysfs / "class" / "infiniband"
    for hca in sorted(base.iterdir()) if base.is_dir() else []:
        for port in sorted((hca / "ports").iterdir()) if (hca / "ports").is_dir() else []:
            for name in IB_COUNTERS:
                text = (read_text(port / "counters" / name) or "").strip()
                if text.isdigit():
                    out[f"{hca.name}/{port.name} {name}"] = int(text)
    return out


def read(sysfs: Path = SYSFS) -> dict[str, Any]:
    """The links (as stored in the provenance under `links`): PCIe links of the NICs, HCAs
    and NVMe drives, the network ports, and the findings (a link below its maximum, an
    InfiniBand port not active)."""
    pcie = _pcie(sysfs)
    found = [why for d in pcie if (why := _below(d)) is not None]
    got = ports(sysfs)
    # an HCA's port not active is a fault; an Ethernet port down may be one left unplugged:
    # the Links line states it
    found += [f"InfiniBand port {p.name} is {p.state or 'in no known state'}, not ACTIVE"
              for p in got if p.kind == "infiniband" and not p.up]
    return {"pcie": pcie, "ports": [asdict(p) for p in got], "findings": found}


#: The links as a run keeps them (`read`): their part of the result schema
SCHEMA = {"type": "object", "properties": {
    "pcie": {"type": "array", "items": {"type": "object",
                                        "required": ["name", "bus_id", "width", "speed_gts"]}},
    "ports": {"type": "array", "items": {"type": "object", "required": ["name", "kind"],
                                         "properties": {"rate_gbps": {"type": ["number", "null"]},
                                                        "state": {"type": ["string", "null"]}}}},
    "findings": {"type": "array", "items": {"type": "string"}}}}


def state(stored: dict[str, Any]) -> dict[str, str]:
    """What a healthy node of its kind keeps of its stored links: each port's state and rate,
    each PCIe link's width and speed."""
    out: dict[str, str] = {}
    for p in stored.get("ports", []) if isinstance(stored.get("ports"), list) else []:
        rate = "" if p.get("rate_gbps") is None else f" {p['rate_gbps']:g} Gb/s"
        out[f"port {p['name']}"] = f"{p.get('state') or 'state n/a'}{rate}"
    for d in stored.get("pcie", []) if isinstance(stored.get("pcie"), list) else []:
        out[f"PCIe link {d['name']} ({d['bus_id']})"] = f"x{d['width']:g} {d['speed_gts']:g} GT/s"
    return out


def line(stored: dict[str, Any] | None) -> list[str]:
    """A run's links in a line (their ports' rates and states, how many PCIe links are at
    their maximum), then each finding; nothing where it found no link."""
    if not stored or not (stored.get("pcie") or stored.get("ports")):
        return []
    said = [str(Port(**p)) for p in stored.get("ports", [])]
    pcie = stored.get("pcie", [])
    at_max = sum(_below(d) is None for d in pcie)
    if pcie:
        said.append(f"PCIe: {at_max} of {len(pcie)} NIC/NVMe link(s) at their maximum")
    return [f"Links: {'; '.join(said)}"] + list(stored.get("findings", []))
