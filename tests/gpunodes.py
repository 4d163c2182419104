"""Synthetic sysfs and procfs trees of GPU nodes, beside the nvidia-smi documents in
tests/data/gpu: PCIe devices under their root complexes and switches, their NUMA nodes and
local CPUs, /sys/bus/pci/devices and /sys/class links as Linux makes them, and the cgroups of
processes (the Slurm job each runs in)."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(__file__).parent / "data" / "gpu"


def _link(where: Path, speed: str, width: int, max_speed: str, max_width: int) -> None:
    """A PCIe link's attributes as Linux writes them ("16.0 GT/s PCIe", "16")."""
    for attr, value in (("current_link_speed", speed), ("current_link_width", width),
                        ("max_link_speed", max_speed), ("max_link_width", max_width)):
        (where / attr).write_text(f"{value}\n")


def _device(sys: Path, path: list[str], numa: int, cpus: str,
            link: tuple[str, int, str, int] | None = None) -> str:
    """A PCI device at `path` (root complex first, the device's bus id last), with its PCIe
    link's attributes where given; the ports above it allow what it does."""
    where = sys / "devices" / Path(*path)
    where.mkdir(parents=True, exist_ok=True)
    (where / "numa_node").write_text(f"{numa}\n")
    (where / "local_cpulist").write_text(f"{cpus}\n")
    if link is not None:
        _link(where, *link)
        _link(where.parent, link[2], link[3], link[2], link[3])
    link = sys / "bus" / "pci" / "devices" / path[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(where, link.parent))
    return str(where)


def _class(sys: Path, cls: str, name: str, device: str) -> None:
    d = sys / "class" / cls / name
    d.mkdir(parents=True)
    (d / "device").symlink_to(os.path.relpath(device, d))


def h100_node(root: Path) -> tuple[Path, Path]:
    """One H100 behind a switch with a ConnectX NIC; an NVMe drive on another root port. The
    GPU's PCIe 5.0 x16 link idles at 2.5 GT/s."""
    sys = root / "sys"
    _device(sys, ["pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:17:00.0"], 0, "0-15",
            ("2.5 GT/s PCIe", 16, "32.0 GT/s PCIe", 16))
    nic = _device(sys, ["pci0000:15", "0000:15:01.0", "0000:16:00.0", "0000:18:00.0"], 0,
                  "0-15")
    nvme = _device(sys, ["pci0000:15", "0000:15:03.0", "0000:19:00.0"], 0, "0-15")
    _class(sys, "infiniband", "mlx5_0", nic)
    _class(sys, "net", "ibp24s0", nic)
    _class(sys, "nvme", "nvme0", nvme)
    return sys, root / "proc"


def vm_node(root: Path) -> Path:
    """One GPU passed through to a VM, as on a lent H100 node: on the root bus at
    0000:00:06.0, its NUMA node -1 (unknown), its local CPUs every CPU (0-1023 here)."""
    sys = root / "sys"
    _device(sys, ["pci0000:00", "0000:00:06.0"], -1, "0-1023")
    return sys


#: a100-8gpu-2s: (root complex, root port, switch, GPUs' and NIC's downstream ports and ids)
_A100_ROOTS = [("00", "02", ["07", "0f"], "0c", 0), ("40", "42", ["47", "4e"], "4b", 0),
               ("80", "82", ["87", "90"], "8c", 1), ("b0", "b2", ["b7", "bd"], "bc", 1)]


def a100_node(root: Path) -> tuple[Path, Path]:
    """Eight A100s on two sockets (NUMA 0: CPUs 0-63, GPUs 0-3; NUMA 1: CPUs 64-127, GPUs 4-7),
    two GPUs and one HCA behind each PCIe switch, an NVMe drive on NUMA 1's first root complex;
    processes 4242 and 4343 (on GPU1) in Slurm jobs 101 and 102. The GPUs' PCIe 4.0 x16 links
    run at 16 GT/s, GPU6's (bus b7) trained at x8 only."""
    sys = root / "sys"
    for i, (rc, sw, gpus, nic, numa) in enumerate(_A100_ROOTS):
        cpus = "0-63" if numa == 0 else "64-127"
        base = [f"pci0000:{rc}", f"0000:{rc}:01.1", f"0000:{sw[0]}{int(sw[1]) - 1}:00.0"]
        for j, bus in enumerate(gpus):
            _device(sys, [*base, f"0000:{sw}:{4 * j:02x}.0", f"0000:{bus}:00.0"], numa, cpus,
                    ("16.0 GT/s PCIe", 8 if bus == "b7" else 16, "16.0 GT/s PCIe", 16))
        dev = _device(sys, [*base, f"0000:{sw}:08.0", f"0000:{nic}:00.0"], numa, cpus)
        _class(sys, "infiniband", f"mlx5_{i}", dev)
    nvme = _device(sys, ["pci0000:80", "0000:80:03.1", "0000:85:00.0"], 1, "64-127")
    _class(sys, "nvme", "nvme0", nvme)
    proc = root / "proc"
    for pid, job in ((4242, 101), (4343, 102)):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(
            f"0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n")
    return sys, proc
