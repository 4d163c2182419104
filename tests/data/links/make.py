"""Writes the recorded sysfs trees of the links tests (run from anywhere; idempotent): a node
with a ConnectX-6 HDR HCA (PCIe 4.0 x16, port 200 Gb/s ACTIVE, as NVIDIA documents the
MCX653105A), a 25 GbE port on a PCIe 3.0 x8 NIC and an NVMe drive at PCIe 4.0 x4; and the same
node degraded: the HCA trained at x8 in its x16 slot and its port DOWN. The attributes are the
kernel's formats: current_link_speed "16.0 GT/s PCIe", an IB port's rate "200 Gb/sec (4X
HDR)" and state "4: ACTIVE", net speed in Mb/s."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).parent
#: bdf -> (root port, class dir, name, current speed, width, max speed, width)
DEVICES = {
    "0000:41:00.0": ("0000:40:01.1", "infiniband", "mlx5_0", "16.0 GT/s PCIe", 16,
                     "16.0 GT/s PCIe", 16),
    "0000:c1:00.0": ("0000:c0:03.1", "net", "eth0", "8.0 GT/s PCIe", 8, "8.0 GT/s PCIe", 8),
    "0000:01:00.0": ("0000:00:01.1", "nvme", "nvme0", "16.0 GT/s PCIe", 4,
                     "16.0 GT/s PCIe", 4),
}


def write(root: Path, degraded: bool) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for bdf, (port, cls, name, speed, width, max_speed, max_width) in DEVICES.items():
        if degraded and cls == "infiniband":
            width = 8
        pdir = root / "devices" / f"pci{port[:7]}" / port
        ddir = pdir / bdf
        ddir.mkdir(parents=True)
        for attr, value in (("max_link_speed", max_speed), ("max_link_width", max_width)):
            (pdir / attr).write_text(f"{value}\n")
        for attr, value in (("current_link_speed", speed), ("current_link_width", width),
                            ("max_link_speed", max_speed), ("max_link_width", max_width),
                            ("numa_node", 1 if port.startswith("0000:40") else 0)):
            (ddir / attr).write_text(f"{value}\n")
        bus = root / "bus" / "pci" / "devices"
        bus.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(ddir, bus), bus / bdf)
        entry = root / "class" / cls / name
        entry.mkdir(parents=True)
        os.symlink(os.path.relpath(ddir, entry), entry / "device")
        if cls == "net":
            (entry / "speed").write_text("25000\n")
            (entry / "operstate").write_text("up\n")
        if cls == "infiniband":
            p1 = entry / "ports" / "1"
            p1.mkdir(parents=True)
            (p1 / "rate").write_text("200 Gb/sec (4X HDR)\n")
            (p1 / "state").write_text("1: DOWN\n" if degraded else "4: ACTIVE\n")
    lo = root / "class" / "net" / "lo"
    lo.mkdir(parents=True)
    (lo / "operstate").write_text("unknown\n")


if __name__ == "__main__":
    write(HERE / "hdr-node", degraded=False)
    write(HERE / "hdr-node-degraded", degraded=True)
