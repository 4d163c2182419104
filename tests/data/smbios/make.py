#!/usr/bin/env python3
"""Writes the SMBIOS memory-device trees of tests/data/smbios/ (as Linux shows them under
/sys/firmware/dmi/entries/17-N/raw): type 17 structures of SMBIOS 3.3 (92-byte formatted area,
then the strings), for configurations the vendors document. Run it from this directory; the
tests read the bytes it wrote, not this script."""

import shutil
import struct
from pathlib import Path

DDR4, DDR5 = 0x1A, 0x22


def type17(handle, locator, bank, size_mib, mtype, rated, configured, rank=2):
    """One type 17 structure: SMBIOS 3.3, table 75 (offsets in the comments)."""
    strings = [locator, bank, "Vendor" if size_mib else "NO DIMM", "0000" if size_mib else "",
               "PN-RDIMM" if size_mib else ""]
    strings = [s if s else " " for s in strings]
    body = struct.pack(
        "<BBH"      # 0x00 type, length, handle
        "HH"        # 0x04 array handle, error handle
        "HH"        # 0x08 total width, data width
        "H"         # 0x0C size (MiB; 0 = not installed)
        "BB"        # 0x0E form factor (0x09 DIMM), device set
        "BB"        # 0x10 device locator, bank locator (string numbers)
        "BH"        # 0x12 memory type, type detail
        "H"         # 0x15 speed (MT/s)
        "BBBB"      # 0x17 manufacturer, serial, asset tag, part number (strings)
        "B"         # 0x1B attributes (rank in bits 3-0)
        "I"         # 0x1C extended size
        "H"         # 0x20 configured memory speed
        "HHH"       # 0x22 min, max, configured voltage (mV)
        "BB"        # 0x28 memory technology (3 = DRAM), operating mode capability
        "H"         # 0x2A firmware version string.. (string number, then padding)
        , 17, 0x5C, handle, 0x1000, 0xFFFE, 72 if size_mib else 0xFFFF,
        64 if size_mib else 0xFFFF, size_mib if size_mib < 0x7FFF else 0x7FFF, 0x09, 0,
        1, 2, mtype, 0x2080, rated if size_mib else 0, 3, 4, 0, 5, rank if size_mib else 0,
        size_mib if size_mib >= 0x7FFF else 0, configured if size_mib else 0, 1200, 1200,
        1200 if size_mib else 0, 3, 0x04, 0)
    body = body.ljust(0x5C, b"\0")
    return body + b"".join(s.encode() + b"\0" for s in strings) + b"\0"


def tree(name, slots):
    root = Path(name)
    shutil.rmtree(root, ignore_errors=True)
    for i, raw in enumerate(slots):
        d = root / f"17-{i}"
        d.mkdir(parents=True)
        (d / "raw").write_bytes(raw)


def epyc_milan(missing=()):
    """Two EPYC 7763 (8 DDR4 channels each), 2 slots a channel, one 64 GiB DDR4-3200 RDIMM a
    channel (AMD's reference naming: bank "P0 CHANNEL A", locator "DIMM 0"/"DIMM 1")."""
    slots, h = [], 0x1100
    for sock in (0, 1):
        for ch in "ABCDEFGH":
            for slot in (0, 1):
                full = slot == 0 and (sock, ch) not in missing
                slots.append(type17(h, f"DIMM {slot}", f"P{sock} CHANNEL {ch}",
                                    65536 if full else 0, DDR4, 3200, 3200))
                h += 1
    return slots


def genoa():
    """Two EPYC 9654 (12 DDR5 channels each), one 96 GiB DDR5-4800 RDIMM a channel
    (Supermicro's naming: P1-DIMMA1 .. P2-DIMMM1; there is no channel I)."""
    return [type17(0x1100 + i, f"P{sock}-DIMM{ch}1", f"P{sock}_Node0_Channel{ch}_Dimm0",
                   98304, DDR5, 4800, 4800)
            for i, (sock, ch) in enumerate((s, c) for s in (1, 2) for c in "ABCDEFGHJKLM")]


def xeon_mixed():
    """Two Xeon Platinum 8380 (8 DDR4 channels each), one 32 GiB RDIMM a channel, channels A-D
    DDR4-3200 and E-H DDR4-2933 modules: all run at 2933 (Intel's naming: CPU0_DIMM_A1)."""
    return [type17(0x1100 + i, f"CPU{sock}_DIMM_{ch}1", f"NODE {sock}", 32768, DDR4,
                   3200 if ch in "ABCD" else 2933, 2933)
            for i, (sock, ch) in enumerate((s, c) for s in (0, 1) for c in "ABCDEFGH")]


def qemu():
    """A QEMU/KVM guest's virtual DIMM: a size, no speed."""
    return [type17(0x1100, "DIMM 0", "", 16384, 0x07, 0, 0)]


def hpe():
    """Slots named by number only (HPE's "PROC 1 DIMM 3"): no channel to read."""
    return [type17(0x1100 + i, f"PROC {p} DIMM {n}", "", 32768, DDR4, 3200, 3200)
            for i, (p, n) in enumerate((p, n) for p in (1, 2) for n in (1, 3, 5, 7))]


if __name__ == "__main__":
    tree("epyc-7763-2s-full", epyc_milan())
    tree("epyc-7763-2s-one-missing", epyc_milan(missing={(1, "D")}))
    tree("epyc-9654-2s-genoa", genoa())
    tree("xeon-8380-2s-mixed-speed", xeon_mixed())
    tree("qemu-guest", qemu())
    tree("hpe-numbered-slots", hpe())
