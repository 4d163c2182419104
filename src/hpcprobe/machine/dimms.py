"""The DRAM the firmware describes, and the bandwidth ceiling it implies.

SMBIOS type 17 (memory device) entries, as Linux exposes them raw under
/sys/firmware/dmi/entries/17-*/raw (root only), give each slot's locator, size (0: no module),
memory type, rated and configured speed (MT/s) and rank. A socket's DRAM ceiling is its
populated channels x the configured transfer rate x 8 B (a channel moves 64 data bits per
transfer, DDR4 and DDR5 alike): channels, not slots, since a second DIMM on a channel adds
capacity, not bandwidth. The channels come from the locators (the board's silkscreen names:
"P0 CHANNEL A", "P1-DIMMA1", "CPU0_DIMM_B2"); where they do not name a socket and a channel, or
the firmware gives no configured speed, or there are no tables at all (a VM), the ceiling is
unknown, with the reason, never a guess. How many channels a socket has comes from its CPU
family (CHANNELS): fewer populated is a finding, as are mixed DIMMs and a configured speed below
the DIMMs' rated one. The memory controllers' own report (EDAC, `machine.edac`) cross-checks
the firmware and adds the DIMMs' error counts. Pure but for `read` and `dram_ceiling`: parsing,
decoding and judging take bytes and text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcprobe.machine import edac

#: The SMBIOS tables (a memory device is a type 17 entry)
ROOT = "/sys/firmware/dmi/entries"

#: SMBIOS memory type byte (type 17, offset 0x12) -> name (SMBIOS 3.7, table 76)
MEMORY_TYPES = {0x12: "DDR", 0x13: "DDR2", 0x18: "DDR3", 0x1A: "DDR4", 0x1B: "LPDDR",
                0x1C: "LPDDR2", 0x1D: "LPDDR3", 0x1E: "LPDDR4", 0x20: "HBM", 0x21: "HBM2",
                0x22: "DDR5", 0x23: "LPDDR5", 0x24: "HBM3"}
#: Bytes a channel moves per transfer (64 data bits; ECC bits carry no data)
BYTES_PER_TRANSFER = 8

#: Memory channels per socket by CPU model name (vendors' product briefs): the first match wins.
CHANNELS: tuple[tuple[str, int], ...] = (
    (r"EPYC 9\d\d[45]", 12),  # 9004 Genoa/Bergamo, 9005 Turin: 12 DDR5 channels
    (r"EPYC 8\d\d4", 6),  # 8004 Siena
    (r"EPYC 4\d\d4", 2),  # 4004 (AM5)
    (r"EPYC 7\d\d[1-3]", 8),  # 7001 Naples, 7002 Rome, 7003 Milan: 8 DDR4 channels
    (r"Xeon.*\b69\d\d[PE]", 12),  # Xeon 6 6900P/E (Granite Rapids-AP)
    (r"Xeon.*\b67\d\d[PE]", 8),  # Xeon 6 6700P/E
    (r"Xeon.*\b(?:Platinum|Gold) \d3\d\dHL?\b", 6),  # 3rd gen Cooper Lake (H, HL)
    (r"Xeon.*\b(?:Platinum|Gold|Silver|Bronze) \d[12]\d\d", 6),  # 1st, 2nd gen Scalable
    (r"Xeon.*\b(?:Platinum|Gold|Silver|Bronze) \d[3-5]\d\d", 8),  # 3rd-5th gen Scalable
)


@dataclass(frozen=True)
class Dimm:
    """One memory device (a slot) as SMBIOS type 17 describes it."""

    locator: str
    bank: str
    size_mib: int | None  # 0: no module installed; None: the firmware says unknown
    memory_type: str | None
    rated_mts: int | None  # the module's maximum speed (MT/s), None when not given
    configured_mts: int | None  # the speed it runs at, None when not given
    rank: int | None = None

    @property
    def populated(self) -> bool:
        return self.size_mib != 0

    @property
    def label(self) -> str:
        return " ".join(p for p in (self.bank, self.locator) if p)


def _word(data: bytes, off: int) -> int | None:
    return int.from_bytes(data[off:off + 2], "little") if off + 2 <= len(data) else None


def _dword(data: bytes, off: int) -> int | None:
    return int.from_bytes(data[off:off + 4], "little") if off + 4 <= len(data) else None


def _speed(data: bytes, off: int, extended: int) -> int | None:
    """A speed field in MT/s: 0 unknown, 0xFFFF means the extended DWORD field holds it."""
    v = _word(data, off)
    if v == 0xFFFF:
        v = _dword(data, extended)
    return v or None


def _size_mib(data: bytes) -> int | None:
    v = _word(data, 0x0C)
    if v is None or v == 0xFFFF:
        return None
    if v == 0x7FFF:  # the extended size field holds it, in MiB
        ext = _dword(data, 0x1C)
        return None if ext is None else ext & 0x7FFFFFFF
    return (v & 0x7FFF) // 1024 if v & 0x8000 else v  # bit 15: the size is in KiB


def parse_type17(raw: bytes) -> Dimm | None:
    """One SMBIOS type 17 structure (its formatted area, then its strings); None when the
    bytes are not one."""
    if len(raw) < 0x15 or raw[0] != 17 or raw[1] < 0x15 or raw[1] > len(raw):
        return None
    data = raw[:raw[1]]
    strings = raw[raw[1]:].split(b"\0")

    def text(off: int) -> str:
        i = data[off] if off < len(data) else 0
        return strings[i - 1].decode("latin-1").strip() if 0 < i <= len(strings) else ""

    rank = data[0x1B] & 0x0F if len(data) > 0x1B else 0
    return Dimm(text(0x10), text(0x11), _size_mib(data), MEMORY_TYPES.get(data[0x12]),
                _speed(data, 0x15, 0x54), _speed(data, 0x20, 0x58) if len(data) > 0x21 else None,
                rank or None)


#: A socket in a locator: P0, CPU1, PROC 2, SOCKET 0, NODE 1 (as printed on boards)
_SOCKET = re.compile(r"(?:^|[^A-Z])(?:CPU|PROC|SOCKET|NODE|P)[ _-]?(\d+)", re.I)
#: A channel letter: "CHANNEL A", "CH B", or a slot named by channel and index: DIMMA1, DIMM_B2,
#: DIMM_P0_C1
_CHANNEL = re.compile(r"(?:CHANNEL|CH)[ _-]?([A-P])\b|DIMM[ _-]?(?:P\d+[ _-]?)?([A-P])\d", re.I)


def channel_of(d: Dimm) -> tuple[str, str] | None:
    """(socket, channel) that a slot's bank locator and locator name, None where they do not
    name both (board-specific slot numbers: "PROC 1 DIMM 3", "A7")."""
    name = f"{d.bank} {d.locator}"
    sock, chan = _SOCKET.search(name), _CHANNEL.search(name)
    if not sock or not chan:
        return None
    return sock.group(1), (chan.group(1) or chan.group(2)).upper()


def channels_per_socket(model_name: str) -> int | None:
    """Memory channels a socket of this CPU has (CHANNELS), None for a CPU not in the table."""
    return next((n for pattern, n in CHANNELS if re.search(pattern, model_name)), None)


@dataclass(frozen=True)
class Socket:
    """One socket's populated memory channels and the rate they run at."""

    name: str
    channels: tuple[str, ...]  # populated channel letters
    mts: int  # the slowest configured speed among its DIMMs

    @property
    def gbs(self) -> float:
        return len(self.channels) * self.mts * BYTES_PER_TRANSFER / 1000.0


@dataclass(frozen=True)
class Ceiling:
    """The DRAM bandwidth ceiling of a node, or why there is none, and what the DIMMs say."""

    gbs: float | None  # None: unknown (see `why`)
    source: str  # the formula the figure came from, or why it is unknown
    sockets: tuple[Socket, ...] = ()
    findings: tuple[str, ...] = field(default_factory=tuple)  # shown before the STREAM figures
    edac: dict[str, object] | None = None  # the memory controllers' report (None: no EDAC)
    dimms: int | None = None  # populated memory devices the firmware lists

    def to_dict(self) -> dict[str, object]:
        return {"gbs": self.gbs, "source": self.source, "dimms": self.dimms,
                "findings": list(self.findings),
                "sockets": [{"socket": s.name, "channels": list(s.channels), "mts": s.mts,
                             "gbs": s.gbs} for s in self.sockets], "edac": self.edac}


#: The DIMMs' ceiling as a run keeps it (`Ceiling.to_dict`): its part of the result schema
SCHEMA = {"type": "object", "required": ["gbs", "source"], "properties": {
    "gbs": {"type": ["number", "null"], "exclusiveMinimum": 0},
    "source": {"type": "string"},
    "dimms": {"type": ["integer", "null"], "minimum": 0},
    "findings": {"type": "array", "items": {"type": "string"}},
    "sockets": {"type": "array", "items": {"type": "object", "required": ["socket", "gbs"]}},
    "edac": {"type": ["object", "null"]}}}


def _sockets(dimms: list[Dimm]) -> tuple[dict[str, dict[str, list[Dimm]]], str | None]:
    """Populated DIMMs by socket and channel, or why they cannot be placed."""
    out: dict[str, dict[str, list[Dimm]]] = {}
    for d in dimms:
        where = channel_of(d)
        if where is None:
            return {}, f"the slot names do not say socket and channel (\"{d.label}\")"
        out.setdefault(where[0], {}).setdefault(where[1], []).append(d)
    return out, None


def _mixed(dimms: list[Dimm]) -> list[str]:
    """Findings about the populated DIMMs as a set: mixed sizes, mixed speeds, slowed down."""
    out = []
    sizes = sorted({d.size_mib for d in dimms if d.size_mib})
    if len(sizes) > 1:
        out.append(f"DIMMs of mixed size ({', '.join(f'{s // 1024} GiB' for s in sizes)}): "
                   "channels with more memory get more of the traffic")
    rated = sorted({d.rated_mts for d in dimms if d.rated_mts})
    if len(rated) > 1:
        out.append(f"DIMMs of mixed rated speed ({', '.join(map(str, rated))} MT/s): all run "
                   "at the slowest")
    slow = [d for d in dimms if d.rated_mts and d.configured_mts and
            d.configured_mts < d.rated_mts]
    if slow:
        d = slow[0]
        out.append(f"{len(slow)} DIMM(s) configured below their rated speed ({d.label}: "
                   f"{d.configured_mts} of {d.rated_mts} MT/s): a BIOS setting, two DIMMs per "
                   "channel or a CPU limit")
    return out


def ceiling(dimms: list[Dimm], model_name: str) -> Ceiling:
    """The DRAM ceiling of these memory devices on a CPU of that model name."""
    full = [d for d in dimms if d.populated]
    if not full:
        return Ceiling(None, "the firmware lists no populated memory device")
    if any(d.configured_mts is None for d in full):
        return Ceiling(None, "the firmware gives no configured speed for "
                             f"\"{next(d for d in full if d.configured_mts is None).label}\"",
                       dimms=len(full))
    placed, why = _sockets(full)
    if why:
        return Ceiling(None, why, dimms=len(full))
    sockets = tuple(Socket(name, tuple(sorted(chans)),
                           min(d.configured_mts or 0 for ds in chans.values() for d in ds))
                    for name, chans in sorted(placed.items()))
    found = _mixed(full)
    per = channels_per_socket(model_name)
    for s in sockets:
        if per is not None and len(s.channels) < per:
            found.insert(0, f"socket {s.name}: {len(s.channels)} of its {per} memory channels "
                            f"populated ({', '.join(s.channels)}): at most "
                            f"{len(s.channels) / per:.0%} of its bandwidth")
    total = sum(s.gbs for s in sockets)
    source = (" + ".join(f"{len(s.channels)} ch x {s.mts} MT/s x 8 B" for s in sockets) +
              " (SMBIOS type 17)")
    return Ceiling(total, source, sockets, tuple(found), dimms=len(full))


def line(stored: dict[str, object] | None) -> list[str]:
    """The run header's lines of a stored ceiling (`Ceiling.to_dict`): the figure and its
    source, or why it is unknown, then what the DIMMs say."""
    if not stored:
        return []
    gbs = stored.get("gbs")
    head = (f"DRAM ceiling: {gbs:.1f} GB/s = {stored['source']}" if isinstance(gbs, float)
            else f"DRAM ceiling unknown: {stored['source']}")
    found = stored.get("findings")
    return [head, *(f"  memory: {f}" for f in (found if isinstance(found, list) else []))]


def state(stored: dict[str, Any]) -> dict[str, str]:
    """What a healthy node of its kind keeps of a stored ceiling (`Ceiling.to_dict`): its
    DIMMs and each socket's memory channels (absent where the run could not read them)."""
    sockets = stored.get("sockets") or []
    out = {"DIMMs": stored.get("dimms"),
           "memory channels": ", ".join(f"socket {s['socket']}: {len(s['channels'])}"
                                        for s in sockets)}
    return {k: str(v) for k, v in out.items() if v is not None and v != ""}


def read(root: str = ROOT) -> list[Dimm] | str:
    """The memory devices of this machine, or why they cannot be read."""
    base = Path(root)
    if not base.is_dir():
        return f"no SMBIOS tables ({root} absent: a VM or firmware that exposes none)"
    entries = sorted(base.glob("17-*"))
    if not entries:
        return "the SMBIOS tables list no memory device (type 17)"
    try:
        parsed = [parse_type17((e / "raw").read_bytes()) for e in entries]
    except PermissionError:
        return f"reading {root}/17-*/raw needs root"
    except OSError as exc:
        return f"cannot read the SMBIOS memory devices: {exc}"
    return [d for d in parsed if d is not None]


def dram_ceiling(model_name: str, root: str = ROOT,
                 edac_root: str = edac.ROOT) -> Ceiling:
    """This machine's DRAM ceiling, or why it is unknown, with what the memory controllers
    (EDAC) add: their errors, the DIMMs they do not see."""
    dimms = read(root)
    c = Ceiling(None, dimms) if isinstance(dimms, str) else ceiling(dimms, model_name)
    ctl = edac.read(edac_root)
    if ctl is None:
        return c
    full = None if isinstance(dimms, str) else sum(d.populated for d in dimms)
    found = edac.findings(ctl, full, sum(len(s.channels) for s in c.sockets) or None)
    if isinstance(dimms, str) and ctl.modules:
        gib = sum(m.size_mib for m in ctl.modules) / 1024
        found.append(f"the memory controllers ({ctl.driver}) see {len(ctl.modules)} "
                     f"{'rank' if ctl.ranks else 'DIMM'}(s) in {ctl.channels} channel(s), "
                     f"{gib:g} GiB; EDAC gives no speeds, so no ceiling")
    return replace(c, findings=c.findings + tuple(found), edac=ctl.to_dict())
