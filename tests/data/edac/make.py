#!/usr/bin/env python3
"""Writes the EDAC trees of tests/data/edac/ (as Linux shows them under
/sys/devices/system/edac/mc, Documentation/ABI/testing/sysfs-devices-edac): one mcN directory
per memory controller with its driver name and error totals, and one directory per populated
module with its label, location, size (MiB) and error counts. AMD's amd64_edac lays a
controller out by chip select and channel (its modules are ranks: rankN, "csrow 1 channel 3",
one controller per socket on a Milan in NPS1); Intel's i10nm_edac by channel and slot (dimmN,
"channel 1 slot 0", one controller per memory controller, two channels each on Ice Lake) and
names the slot CPU_SrcID#S_MC#M_Chan#C_DIMM#D. Run it from this directory; the tests read the
files it wrote, not this script."""

import shutil
from pathlib import Path


def module(mc, name, label, location, size_mib, ce=0, ue=0):
    d = mc / name
    d.mkdir(parents=True)
    for f, v in (("size", size_mib), ("dimm_label", label), ("dimm_location", location),
                 ("dimm_mem_type", "Registered-DDR4"), ("dimm_edac_mode", "S16ECD16ED"),
                 ("dimm_ce_count", ce), ("dimm_ue_count", ue)):
        (d / f).write_text(f"{v}\n")


def controller(root, i, name, modules):
    mc = root / f"mc{i}"
    mc.mkdir(parents=True)
    (mc / "mc_name").write_text(f"{name}\n")
    (mc / "size_mb").write_text(f"{sum(m[3] for m in modules)}\n")
    for f in ("ce_noinfo_count", "ue_noinfo_count", "seconds_since_reset"):
        (mc / f).write_text("0\n")
    (mc / "ce_count").write_text(f"{sum(m[4] for m in modules)}\n")
    (mc / "ue_count").write_text(f"{sum(m[5] for m in modules)}\n")
    for m in modules:
        module(mc, *m)


def milan(name, missing=(), errors=None):
    """Two EPYC 7763, 8 UMC channels each, one dual-rank 64 GiB DIMM a channel: two ranks of
    32 GiB a channel; `missing` (socket, channel) not seen; `errors` {(socket, channel):
    (ce, ue)} on its first rank."""
    root = Path(name)
    shutil.rmtree(root, ignore_errors=True)
    for sock in (0, 1):
        mods = []
        for cs in (0, 1):  # the driver's index: chip select, then channel
            for ch in range(8):
                if (sock, ch) not in missing:
                    ce, ue = (errors or {}).get((sock, ch), (0, 0)) if cs == 0 else (0, 0)
                    mods.append((f"rank{8 * cs + ch}", f"mc#{sock}csrow#{cs}channel#{ch}",
                                 f"csrow {cs} channel {ch}", 32768, ce, ue))
        controller(root, sock, "F19h", mods)


def icelake(name, errors=None):
    """Two Xeon Platinum 8380, 4 memory controllers of 2 channels each a socket, one 32 GiB
    DIMM a channel; `errors` {(socket, mc, channel): (ce, ue)}."""
    root = Path(name)
    shutil.rmtree(root, ignore_errors=True)
    for sock in (0, 1):
        for imc in range(4):
            mods = [(f"dimm{2 * ch}", f"CPU_SrcID#{sock}_MC#{imc}_Chan#{ch}_DIMM#0",
                     f"channel {ch} slot 0", 32768,
                     *(errors or {}).get((sock, imc, ch), (0, 0))) for ch in (0, 1)]
            controller(root, 4 * sock + imc, f"Intel_10nm Socket#{sock} IMC#{imc}", mods)


if __name__ == "__main__":
    milan("epyc-7763-2s-full")
    milan("epyc-7763-2s-one-unseen", missing={(1, 3)})
    milan("epyc-7763-2s-correcting", errors={(1, 3): (1234, 0)})
    icelake("xeon-8380-2s-uncorrected", errors={(1, 2, 1): (17, 2)})
