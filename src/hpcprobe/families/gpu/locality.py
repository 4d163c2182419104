"""The GPUs this node has, as `hpcprobe topology` and `gpu info` show them (the locality table,
the GPU-to-GPU matrix, the health and settings found) and as a campaign groups peers: the
family's Inventory capability over machine.gpus."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.parts import Part
from hpcprobe.machine import gpus
from hpcprobe.machine.gpuhealth import config_notes, findings, xid_notes
from hpcprobe.machine.gpus import RELATIONS, Gpu, PciDevice, relation
from hpcprobe.measure.family import Inventory


@dataclass(frozen=True)
class GpuUsed:
    """What a run records of the GPUs it measured (its provenance part `gpu`): the driver and
    the CUDA it supports, the runtime the program ran with, the toolkit that built it, and
    each GPU measured as the inventory has it (machine/gpus.py, `document`), with what CUDA
    said of it; the cuBLAS its GEMM loaded."""

    driver: str | None = None
    driver_cuda: int | None = None  # the CUDA version the driver supports (13000: 13.0)
    runtime_cuda: int | None = None
    nvcc: str | None = None
    release: str | None = None
    archs: str | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    cublas: dict[str, Any] | None = None  # the cuBLAS the GEMM loaded: path, version


GPU = Part("gpu", GpuUsed)

RELATION_HELP = {
    "PIX": "through at most one PCIe switch",
    "PXB": "through several PCIe switches, not the host bridge",
    "PHB": "through the host bridge (the CPU's root complex)",
    "NODE": "between root complexes of one NUMA domain",
    "SYS": "across the inter-socket link (another NUMA domain)",
}


def nearest(inv: gpus.Inventory, gpu: Gpu, kind: str) -> list[tuple[PciDevice, str]]:
    """The devices of a kind nearest to the GPU, with their relation (nearest first)."""
    found = [(d, relation(gpu.path, d.path, gpu.numa_node, d.numa_node))
             for d in inv.devices if d.kind == kind]
    if not found:
        return []
    best = min(RELATIONS.index(r) for _, r in found)
    return [(d, r) for d, r in found if RELATIONS.index(r) == best]


def locality_rows(inv: gpus.Inventory) -> list[list[str]]:
    """GPU, bus id, PCIe link, NUMA, local CPUs, nearest NIC(s), nearest NVMe: one row per
    GPU."""
    rows = []
    for g in inv.gpus:
        near = []
        for kind in ("nic", "nvme"):
            got = nearest(inv, g, kind)
            near.append(", ".join(f"{d.name} ({r})" for d, r in got) or "-")
        rows.append([f"GPU{g.index} {g.name}", g.bus_id, "-" if g.pcie is None else str(g.pcie),
                     g.numa,
                     format_cpulist(g.local_cpus) or "-", *near])
    return rows


def link(inv: gpus.Inventory, a: Gpu, b: Gpu) -> str:
    """How two GPUs connect: their NVLinks (NV#) where they share some, else over PCIe."""
    return inv.nvlinks.get((a.index, b.index)) or relation(a.path, b.path, a.numa_node,
                                                           b.numa_node)


def gpu_matrix(inv: gpus.Inventory) -> list[list[str]]:
    """GPU-to-GPU connections, nvidia-smi topo -m's matrix."""
    return [[f"GPU{a.index}", *("X" if a is b else link(inv, a, b) for b in inv.gpus)]
            for a in inv.gpus]


def render(inv: gpus.Inventory) -> str:
    """The locality table as text (for `hpcprobe topology` and `hpcprobe gpu info`)."""
    if not inv.gpus:
        return f"GPUs: none ({inv.none_why})"
    head = ["GPU", "bus id", "PCIe link", "NUMA", "local CPUs", "nearest NIC", "nearest NVMe"]
    rows = locality_rows(inv)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = [f"GPUs: {len(inv.gpus)} (driver {inv.driver or '?'}, CUDA {inv.cuda or '?'}; "
           f"from {inv.source})"]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in [head, *rows]]
    if len(inv.gpus) > 1:
        out.append("  GPU to GPU: " + "; ".join(
            f"{r[0]}: " + " ".join(r[1:]) for r in gpu_matrix(inv)))
    out += [f"  {f}" for g in inv.gpus for f in findings(g, inv)]
    out += [f"  setting: {n}" for g in inv.gpus for n in config_notes(g)]
    notes = [n for g in inv.gpus for n in xid_notes(g)]
    if inv.xids_why is not None:
        out.append(f"  Xid events: not read ({inv.xids_why})")
    elif notes:
        out += [f"  Xid events in the kernel log ({inv.xid_source}; they stay there after "
                "a reset):", *(f"    {n}" for n in notes)]
    elif inv.xid_source is not None:
        out.append(f"  Xid events: none in the kernel log ({inv.xid_source})")
    mig = [f"GPU{g.index}" for g in inv.gpus if g.mig]
    if mig:
        out.append(f"  MIG mode on: {', '.join(mig)} (CUDA sees their instances)")
    out.append("  (" + ", ".join(f"{k} {v}" for k, v in RELATION_HELP.items()) +
               ", NV# a bonded set of # NVLinks; an idle GPU lowers its PCIe link's speed)")
    return "\n".join(out)


def discover() -> gpus.Inventory | None:
    """This node's GPUs and what is near them; None where it has none."""
    inv = gpus.discover()
    return inv if inv.gpus else None


def document(inv: gpus.Inventory) -> dict[str, Any]:
    return inv.to_dict()


def hardware(provenance: Mapping[str, Any]) -> list[str]:
    """The GPU models a run measured (not their count: a node short of a GPU stays among its
    peers, whose figures it lacks)."""
    kept = GPU.of(provenance)
    return sorted({g.get("name", "?") for g in kept.gpus}) if kept else []


INVENTORY = Inventory("gpus", discover, render, document, hardware)
