"""The node's GPUs and what lies near them: each GPU's identity, memory, clocks, MIG mode,
processes and health state (memory error counts, pending remappings, recovery actions) from
`nvidia-smi -q -x`, the Xid events the driver logged for it (the kernel log), its NUMA domain,
local CPUs and PCIe path and link from sysfs, the NICs and NVMe drives beside them; how two
devices connect (nvidia-smi topo's PIX/PXB/PHB/NODE/SYS from the PCIe paths, NV# from
`nvidia-smi topo -m` where GPUs share NVLinks); which GPUs a job sees and whether its CPUs are
local to them, and GPUs shared while others idle. The rules that judge a GPU's health and the
text that shows all this are machine/gpuhealth.py's (a node fact) and families/gpu/locality.py's.
Recorded XML, sysfs trees and kernel logs replay other nodes."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe.common.cpulist import format_cpulist, parse_cpulist
from hpcprobe.common.errors import UserError
from hpcprobe.common.files import read_input
from hpcprobe.common.kernelfiles import read_text

if TYPE_CHECKING:  # parsed where nvidia-smi answers: most nodes' checks have none
    import xml.etree.ElementTree as ET

#: How two PCIe devices connect, nearest first (nvidia-smi topo -m's words).
RELATIONS = ("PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_bytes: int | None
    job: str | None  # the Slurm job it belongs to, where that could be read
    kind: str | None = None  # nvidia-smi's type: C (compute), G (graphics), C+G

    @property
    def computes(self) -> bool:
        """A compute process (or one of unknown type): a display server's is not a job."""
        return self.kind != "G"


@dataclass(frozen=True)
class PcieLink:
    """A PCIe device's link as sysfs says: the speed (GT/s per lane) and width it trained at,
    and the most the device and the port above it both allow. A GPU lowers its speed when
    idle, so only a width below the allowed one is a fault at rest."""

    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None

    @property
    def narrow(self) -> bool:
        """Trained at fewer lanes than the device and its slot allow (a riser, a slot, a bad
        contact)."""
        return self.width is not None and self.max_width is not None and \
            self.width < self.max_width

    def __str__(self) -> str:
        def one(gts: float | None, width: int | None) -> str:
            return f"x{width or '?'} {'?' if gts is None else f'{gts:g}'} GT/s"
        return f"{one(self.speed_gts, self.width)} (max {one(self.max_speed_gts, self.max_width)})"


@dataclass(frozen=True)
class Health:
    """What nvidia-smi says of a GPU's memory errors and of the action they need; a count is
    None where the GPU or its driver does not report it. The XML names the uncorrectable ECC
    errors in three ways across driver generations: single_bit/double_bit totals (to R470),
    sram_/dram_ (un)correctable (R5xx), the SRAM's split into parity and SECDED (from R555).
    Ampere and later remap a faulty memory row; earlier GPUs retire its page."""

    ecc: str | None = None  # the current ECC mode: "Enabled", "Disabled"
    ecc_pending: str | None = None  # the mode after the next reset
    uncorrectable: int | None = None  # uncorrectable ECC errors since the driver loaded
    uncorrectable_life: int | None = None  # over the GPU's life
    sram_threshold: bool = False  # SRAM uncorrectable errors past NVIDIA's threshold
    rows_remapped: int | None = None  # rows remapped for uncorrectable errors
    remap_pending: bool = False  # takes effect at the next reset
    remap_failed: bool = False  # a bank had no spare row left
    pages_retired: int | None = None
    retire_pending: bool = False  # pages retire at the next reset
    reset_required: bool = False
    drain_and_reset: bool = False
    recovery: str | None = None  # the driver's recovery action, where one is asked for
    #: NVLink fabric registration (NVSwitch systems; None elsewhere): its state ("In
    #: Progress", "Completed"...) and, once completed, its status ("Success" or an error)
    fabric_state: str | None = None
    fabric_status: str | None = None
    #: the fabric's health of the GPU (NVML's fabric health mask): its NVLink bandwidth
    #: degraded, a route to it unhealthy, the fabric recovering a route or from an access
    #: timeout (transient)
    fabric_degraded: bool = False
    route_unhealthy: bool = False
    fabric_recovering: bool = False

    def __str__(self) -> str:
        """ECC and the memory errors' counts, as far as the GPU reports them."""
        parts = [f"ECC {(self.ecc or 'n/a').lower()}"]
        if self.uncorrectable is not None:
            parts.append(f"{self.uncorrectable} uncorrectable error(s) since the driver loaded"
                         + ("" if self.uncorrectable_life is None else
                            f", {self.uncorrectable_life} over its life"))
        if self.rows_remapped is not None:
            parts.append(f"{self.rows_remapped} row(s) remapped")
        if self.pages_retired is not None:
            parts.append(f"{self.pages_retired} page(s) retired")
        return ", ".join(parts)


@dataclass(frozen=True)
class Config:
    """A GPU's settings that change what a job gets from it without being a fault, as
    nvidia-smi reports them (None where it does not): persistence mode, compute mode, the
    power limit in force against the GPU's default (<gpu_power_readings> from R535,
    <power_readings> before), the application clocks against their default."""

    persistence: str | None = None  # "Enabled", "Disabled"
    compute_mode: str | None = None  # "Default", "Exclusive_Process", "Prohibited"
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    app_sm_mhz: int | None = None
    default_app_sm_mhz: int | None = None

    @property
    def low_power(self) -> bool:
        return self.power_limit_w is not None and self.default_power_limit_w is not None and \
            self.power_limit_w < self.default_power_limit_w - 1

    @property
    def low_clocks(self) -> bool:
        return self.app_sm_mhz is not None and self.default_app_sm_mhz is not None and \
            self.app_sm_mhz < self.default_app_sm_mhz

    @property
    def capped(self) -> bool:
        """A power limit or application clocks below their defaults hold its clock down."""
        return self.low_power or self.low_clocks


@dataclass(frozen=True)
class Xid:
    """An Xid event the NVIDIA driver logged for a GPU in the kernel log: its code, when (the
    log's own time: seconds since boot for dmesg, a date for a journal), and its text."""

    code: int
    when: str | None
    text: str


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's (PCI bus order)
    name: str
    uuid: str
    bus_id: str  # sysfs form, 0000:17:00.0
    minor: int | None  # /dev/nvidiaN
    memory_bytes: int | None
    architecture: str | None
    max_sm_mhz: int | None
    max_mem_mhz: int | None
    numa_node: int | None
    local_cpus: tuple[int, ...]
    path: tuple[str, ...]  # PCIe ancestry from the root complex, the device last
    processes: tuple[GpuProcess, ...] = ()
    mig: bool = False  # MIG mode on: CUDA sees its instances, not the GPU
    pcie: PcieLink | None = None
    health: Health = field(default_factory=Health)
    xids: tuple[Xid, ...] = ()  # its Xid events in the kernel log, oldest first
    config: Config = field(default_factory=Config)
    #: each NVLink's rate in GB/s, None where it is inactive (`nvidia-smi nvlink -s`; empty
    #: where not read or the GPU has none)
    nvlinks: tuple[float | None, ...] = ()

    @property
    def nvlinks_up(self) -> int:
        return sum(x is not None for x in self.nvlinks)

    @property
    def numa(self) -> str:
        """Its NUMA domain as said to a user: '?' where sysfs does not say (a VM's -1)."""
        return "?" if self.numa_node is None else str(self.numa_node)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid,
                "bus_id": self.bus_id, "minor": self.minor, "memory_bytes": self.memory_bytes,
                "architecture": self.architecture, "max_sm_mhz": self.max_sm_mhz,
                "max_mem_mhz": self.max_mem_mhz, "numa_node": self.numa_node,
                "local_cpus": format_cpulist(self.local_cpus), "mig": self.mig,
                "pcie": None if self.pcie is None else dataclasses.asdict(self.pcie),
                "health": dataclasses.asdict(self.health),
                "config": dataclasses.asdict(self.config),
                "xids": [dataclasses.asdict(x) for x in self.xids],
                "nvlink_gbs": list(self.nvlinks),
                "processes": [p.__dict__ for p in self.processes]}


@dataclass(frozen=True)
class PciDevice:
    """A NIC or an NVMe drive, for the locality table."""

    kind: str  # "nic" or "nvme"
    name: str  # mlx5_0, eth0, nvme0
    bus_id: str
    numa_node: int | None
    path: tuple[str, ...]


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...]
    devices: tuple[PciDevice, ...] = ()
    driver: str | None = None
    cuda: str | None = None
    source: str = "nvidia-smi"
    none_why: str | None = None  # why there are no GPUs, when there are none
    nvlinks: Mapping[tuple[int, int], str] = field(default_factory=dict)  # (i, j): "NV12"
    #: MIG instance UUID -> its GPU's UUID (`nvidia-smi -L`, where a GPU is in MIG mode)
    mig_parents: Mapping[str, str] = field(default_factory=dict)
    #: where the GPUs' Xid events were read (dmesg, a recorded log), or why they were not
    xid_source: str | None = None
    xids_why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"driver": self.driver, "cuda": self.cuda, "source": self.source,
                "none_why": self.none_why, "gpus": [g.to_dict() for g in self.gpus],
                "nvlinks": {f"{i}-{j}": v for (i, j), v in self.nvlinks.items()},
                "mig_parents": dict(self.mig_parents), "xid_source": self.xid_source,
                "xids_why": self.xids_why,
                "devices": [{"kind": d.kind, "name": d.name, "bus_id": d.bus_id,
                             "numa_node": d.numa_node} for d in self.devices]}


# ------------------------------------------------------------------ reading

def bus_id(smi_id: str) -> str:
    """nvidia-smi's bus id (00000000:17:00.0) in sysfs form (0000:17:00.0), lower case."""
    m = re.fullmatch(r"([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", smi_id.strip())
    if not m:
        raise UserError(f"PCI bus id {smi_id!r} is malformed")
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}"


def _text(el: ET.Element | None, path: str) -> str | None:
    found = el.find(path) if el is not None else None
    value = (found.text or "").strip() if found is not None else ""
    return value if value and value not in ("N/A", "Unknown Error") else None


def _mib(value: str | None) -> int | None:
    m = re.match(r"([\d.]+)\s*MiB", value or "")
    return int(float(m.group(1)) * (1 << 20)) if m else None


def _mhz(value: str | None) -> int | None:
    m = re.match(r"(\d+)\s*MHz", value or "")
    return int(m.group(1)) if m else None


def _pci(sysfs: Path, bdf: str) -> tuple[int | None, tuple[int, ...], tuple[str, ...]]:
    """A PCI device's NUMA node (None where sysfs says -1 or nothing), local CPUs and PCIe path
    (the resolved link under /sys/bus/pci/devices: root complex, bridges, the device)."""
    dev = sysfs / "bus" / "pci" / "devices" / bdf
    node_text = read_text(dev / "numa_node")
    node = int(node_text) if node_text and node_text.lstrip("-").isdigit() else None
    cpus_text = read_text(dev / "local_cpulist")
    cpus = tuple(parse_cpulist(cpus_text)) if cpus_text else ()
    parts = Path(os.path.realpath(dev)).parts
    start = next((i for i, p in enumerate(parts)
                  if re.fullmatch(r"pci[0-9a-f]{4}:[0-9a-f]{2}", p)), None)
    path = tuple(parts[start:]) if start is not None else (bdf,)
    return (node if node is not None and node >= 0 else None), cpus, path


def _count(el: ET.Element, paths: Sequence[str]) -> int | None:
    """The sum of the counts nvidia-smi gives at these paths; None where it gives none."""
    got = [int(t) for t in (_text(el, p) for p in paths) if t is not None and t.isdigit()]
    return sum(got) if got else None


def _yes(el: ET.Element, *paths: str) -> bool:
    """Whether a flag at any of these paths is set: Yes (the memory errors' flags) or True (the
    fabric's health); N/A and Not Supported are not."""
    return any((_text(el, p) or "").lower() in ("yes", "true") for p in paths)


#: nvidia-smi's uncorrectable ECC counts under <volatile> and <aggregate>, in every generation
UNCORRECTABLE = ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                 "sram_uncorrectable_secded", "double_bit/total")


def health(el: ET.Element) -> Health:
    """A <gpu> element's memory errors and the action they need."""
    retired = "retired_pages/{}_retirement/retired_count"
    recovery = _text(el, "gpu_recovery_action")
    return Health(
        _text(el, "ecc_mode/current_ecc"), _text(el, "ecc_mode/pending_ecc"),
        _count(el, [f"ecc_errors/volatile/{p}" for p in UNCORRECTABLE]),
        _count(el, [f"ecc_errors/aggregate/{p}" for p in UNCORRECTABLE]),
        _yes(el, "ecc_errors/aggregate/sram_threshold_exceeded"),
        _count(el, ["remapped_rows/remapped_row_unc"]),
        _yes(el, "remapped_rows/remapped_row_pending"),
        _yes(el, "remapped_rows/remapped_row_failure"),
        _count(el, [retired.format("multiple_single_bit"), retired.format("double_bit")]),
        _yes(el, "retired_pages/pending_retirement", "retired_pages/pending_blacklist"),
        _yes(el, "gpu_reset_status/reset_required"),
        _yes(el, "gpu_reset_status/drain_and_reset_recommended"),
        None if recovery == "None" else _reported(recovery),
        fabric_state=_reported(_text(el, "fabric/state")),
        fabric_status=_reported(_text(el, "fabric/status")),
        fabric_degraded=(_text(el, "fabric/health/bandwidth") or "").lower().startswith(
            "degraded"),
        route_unhealthy=_yes(el, "fabric/health/route_unhealthy"),
        fabric_recovering=_yes(el, "fabric/health/route_recovery_in_progress",
                               "fabric/health/access_timeout_recovery"))


def _reported(value: str | None) -> str | None:
    """A value the GPU reports, or None for nvidia-smi's "Not Supported", "deprecated" and
    "Unknown"."""
    return None if value is None or re.search(r"not supported|deprecated|unknown", value, re.I) \
        else value


def config(el: ET.Element) -> Config:
    """A <gpu> element's settings."""
    return Config(
        _text(el, "persistence_mode"), _text(el, "compute_mode"),
        _number(_text(el, "gpu_power_readings/current_power_limit")
                or _text(el, "power_readings/enforced_power_limit")
                or _text(el, "power_readings/power_limit")),
        _number(_text(el, "gpu_power_readings/default_power_limit")
                or _text(el, "power_readings/default_power_limit")),
        _mhz(_text(el, "applications_clocks/graphics_clock")),
        _mhz(_text(el, "default_applications_clocks/graphics_clock")))


def _number(text: str | None) -> float | None:
    """The leading number of a value with its unit after it (a sysfs link attribute, "16.0 GT/s
    PCIe", "16"; an nvidia-smi power, "700.00 W"); None for "Unknown" or nothing."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)", text or "")
    return float(m.group(1)) if m else None


def pcie_link(sysfs: Path, bdf: str) -> PcieLink | None:
    """A PCI device's link from sysfs (None where sysfs has no link attributes); the maxima
    are the device's and the port above it's, the lower of each."""
    dev = sysfs / "bus" / "pci" / "devices" / bdf
    speed, width = (_number(read_text(dev / f"current_link_{a}")) for a in ("speed", "width"))
    if speed is None and width is None:
        return None
    port = Path(os.path.realpath(dev)).parent

    def most(attr: str) -> float | None:
        known = [v for v in (_number(read_text(d / attr)) for d in (dev, port)) if v is not None]
        return min(known, default=None)
    max_width = most("max_link_width")
    return PcieLink(speed, None if width is None else int(width), most("max_link_speed"),
                    None if max_width is None else int(max_width))


def parse_smi(text: str, source: str = "nvidia-smi -q -x") -> tuple[str | None, str | None,
                                                                   list[ET.Element]]:
    """The driver and CUDA versions and each <gpu> element of nvidia-smi's XML."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UserError(f"{source}: not nvidia-smi XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise UserError(f"{source}: not nvidia-smi XML (root <{root.tag}>)")
    return _text(root, "driver_version"), _text(root, "cuda_version"), root.findall("gpu")


def job_of(pid: int, proc: Path | None) -> str | None:
    """The Slurm job a process runs in: its cgroup (…/job_123/…), else its SLURM_JOB_ID;
    None without a procfs tree."""
    if proc is None:
        return None
    cg = read_text(proc / str(pid) / "cgroup") or ""
    m = re.search(r"/job_(\d+)", cg)
    if m:
        return m.group(1)
    try:
        env = (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"SLURM_JOB_ID="):
            return item.split(b"=", 1)[1].decode(errors="replace") or None
    return None


#: An Xid line of the kernel log: "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen
#: off the bus." (older drivers: "Xid (0000:01:00): 13, ..."), after dmesg's "[ 4909.922970]"
#: or a date (dmesg -T's, a journal's, syslog's)
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
                  r"(?:\.[0-7])?\): (\d+),?\s*(.*)")
_WHEN = re.compile(r"\s*(?:\[\s*(\d+(?:\.\d+)?)\]|\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d "
                   r"[\d:]{8} \d{4})\]|(\d{4}-\d\d-\d\dT\S+)|([A-Z][a-z]{2} [ \d]\d [\d:]{8}))")


def parse_xids(text: str) -> dict[str, list[Xid]]:
    """The Xid events of a kernel log (dmesg, journalctl -k, syslog), by the GPU's bus id
    without its function (0000:3b:00), oldest first."""
    out: dict[str, list[Xid]] = {}
    for line in text.splitlines():
        m = _XID.search(line)
        if not m:
            continue
        w = _WHEN.match(line)
        when = None if w is None else f"{float(w.group(1)):.0f} s after boot" if w.group(1) \
            else next(g for g in w.groups() if g)
        out.setdefault(m.group(1).lower(), []).append(
            Xid(int(m.group(2)), when, m.group(3).strip()[:200]))
    return out


def kernel_log() -> tuple[str | None, str]:
    """This node's kernel log (`dmesg`), or None and why it could not be read."""
    return _output("dmesg", missing="no dmesg here (util-linux)",
                   refused="the kernel log is not readable by this user "
                           "(kernel.dmesg_restrict): run as root")


def with_xids(inv: Inventory, text: str | None, source: str, why: str = "") -> Inventory:
    """The inventory with each GPU's Xid events from a kernel log (None: not read, and why)."""
    if text is None:
        return dataclasses.replace(inv, xids_why=why)
    by_bus = parse_xids(text)
    return dataclasses.replace(
        inv, xid_source=source,
        gpus=tuple(dataclasses.replace(g, xids=tuple(by_bus.get(g.bus_id[:-2], ())))
                   for g in inv.gpus))


def from_smi(text: str, sysfs: str | os.PathLike[str] = "/sys",
             proc: str | os.PathLike[str] | None = "/proc", source: str = "nvidia-smi -q -x"
             ) -> Inventory:
    """The inventory from nvidia-smi's XML and a sysfs (and procfs: None, jobs unknown)
    tree."""
    sys_root, proc_root = Path(sysfs), None if proc is None else Path(proc)
    driver, cuda, elements = parse_smi(text, source)
    gpus = []
    for i, el in enumerate(elements):
        bdf = bus_id(_text(el, "pci/pci_bus_id") or el.get("id") or "")
        node, cpus, path = _pci(sys_root, bdf)
        procs = []
        for p in el.findall("processes/process_info"):
            pid_text = _text(p, "pid")
            if pid_text is None or not pid_text.isdigit():
                continue
            procs.append(GpuProcess(int(pid_text), _text(p, "process_name") or "?",
                                    _mib(_text(p, "used_memory")),
                                    job_of(int(pid_text), proc_root), _text(p, "type")))
        minor = _text(el, "minor_number")
        gpus.append(Gpu(
            i, _text(el, "product_name") or "unknown GPU", _text(el, "uuid") or "", bdf,
            int(minor) if minor and minor.isdigit() else None,
            _mib(_text(el, "fb_memory_usage/total")), _text(el, "product_architecture"),
            _mhz(_text(el, "max_clocks/sm_clock")), _mhz(_text(el, "max_clocks/mem_clock")),
            node, cpus, path, tuple(procs), _text(el, "mig_mode/current_mig") == "Enabled",
            pcie_link(sys_root, bdf), health(el), config=config(el)))
    return Inventory(tuple(gpus), tuple(pci_devices(sys_root)), driver, cuda, source,
                     None if gpus else "nvidia-smi lists no GPU")


def pci_devices(sysfs: Path) -> list[PciDevice]:
    """The NICs (network interfaces and InfiniBand HCAs backed by a PCI device) and NVMe
    controllers, each once."""
    out: list[PciDevice] = []
    seen: set[str] = set()
    for kind, cls in (("nic", "infiniband"), ("nic", "net"), ("nvme", "nvme")):
        base = sysfs / "class" / cls
        if not base.is_dir():
            continue
        for entry in sorted(base.iterdir()):
            dev = entry / "device"
            try:
                bdf = Path(os.path.realpath(dev)).name
            except OSError:
                continue
            if not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bdf) or \
                    bdf in seen:
                continue
            seen.add(bdf)
            node, _, path = _pci(sysfs, bdf)
            out.append(PciDevice(kind, entry.name, bdf, node, path))
    return out


def parse_topo(text: str) -> dict[tuple[int, int], str]:
    """The NVLink connections of `nvidia-smi topo -m`'s matrix: (GPU i, GPU j) -> "NV#" (a
    bonded set of # links), for each pair that has them."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours, where a terminal asked for them
    head: list[str] | None = None
    links: dict[tuple[int, int], str] = {}
    for raw in text.splitlines():
        cells = [c.strip() for c in raw.split("\t")]
        if head is None:
            if "GPU0" in cells:  # the column names, after the rows' empty label column
                head = cells[1:] if cells[0] == "" else cells
            continue
        m = re.fullmatch(r"GPU(\d+)", cells[0])
        if not m:
            continue
        for col, cell in zip(head, cells[1:], strict=False):
            peer = re.fullmatch(r"GPU(\d+)", col)
            if peer and re.fullmatch(r"NV\d+", cell):
                links[(int(m.group(1)), int(peer.group(1)))] = cell
    return links


def parse_nvlink_status(text: str) -> dict[int, tuple[float | None, ...]]:
    """Each GPU's NVLinks from `nvidia-smi nvlink -s` (a `GPU N: NAME (UUID: ...)` line, then
    one `Link K: 26.562 GB/s` or `Link K: <inactive>` line a link): GPU index -> the links'
    rates in GB/s, None where inactive, in link order."""
    out: dict[int, dict[int, float | None]] = {}
    links: dict[int, float | None] | None = None
    for line in text.splitlines():
        if m := re.match(r"GPU (\d+):", line.strip()):
            links = out.setdefault(int(m.group(1)), {})
        elif links is not None and (m := re.match(r"Link (\d+): *(.*)$", line.strip())):
            state = m.group(2).strip()
            if rate := re.fullmatch(r"(\d+(?:\.\d+)?) GB/s", state):
                links[int(m.group(1))] = float(rate.group(1))
            elif "inactive" in state.lower():
                links[int(m.group(1))] = None
    return {i: tuple(links[k] for k in sorted(links)) for i, links in out.items()}


def with_nvlinks(inv: Inventory, text: str | None, source: str | None = None) -> Inventory:
    """The inventory with each GPU's NVLinks as `nvidia-smi nvlink -s` gave them (`text`; None:
    not read); a recorded file's `source` that names no GPU is refused, unless it is empty: the
    command prints nothing where no GPU shows NVLinks (an H100 SXM in a VM, driver 580)."""
    if text is None:
        return inv
    by_index = parse_nvlink_status(text)
    if source is not None and not by_index and text.strip():
        raise UserError(f"{source}: not `nvidia-smi nvlink -s` output (no 'GPU N:' line)")
    return dataclasses.replace(inv, gpus=tuple(
        dataclasses.replace(g, nvlinks=by_index.get(g.index, ())) for g in inv.gpus))


def parse_list(text: str) -> dict[str, str]:
    """MIG instance UUID -> its GPU's UUID, from `nvidia-smi -L` (each GPU's line, its MIG
    instances' lines indented below it)."""
    out: dict[str, str] = {}
    parent = None
    for line in text.splitlines():
        m = re.match(r"(GPU|MIG) .*\(UUID: ((?:GPU|MIG)-[0-9A-Fa-f-]+)\)", line.strip())
        if m and m.group(1) == "GPU":
            parent = m.group(2)
        elif m and parent is not None:
            out[m.group(2)] = parent
    return out


def _output(tool: str, *args: str, missing: str, refused: str | None = None
            ) -> tuple[str | None, str]:
    """A tool's output, or None and why it gave none: `missing` where it is not installed,
    `refused` (else its own words) where it fails."""
    exe = shutil.which(tool)
    if exe is None:
        return None, missing
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, errors="replace",
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{tool} did not answer ({exc})"
    if p.returncode != 0:
        why = " ".join((p.stdout + p.stderr).split())[:200]
        return None, refused or f"{tool} failed: {why or f'exit {p.returncode}'}"
    return p.stdout, ""


def run_smi(*args: str) -> tuple[str | None, str]:
    """nvidia-smi's output, or None and why it gave none."""
    return _output("nvidia-smi", *args, missing="no NVIDIA driver (nvidia-smi is not installed)")


def discover(smi: str | None = None, sysfs: str | os.PathLike[str] = "/sys",
             proc: str | os.PathLike[str] | None = "/proc", topo: str | None = None,
             dmesg: str | None = None, nvlink: str | None = None,
             health_only: bool = False) -> Inventory:
    """This node's GPUs (through nvidia-smi, its `topo -m` and `nvlink -s` for the NVLinks
    where there are several; their Xid events from dmesg), or those of a recorded `nvidia-smi
    -q -x` file (and `topo -m` and `nvlink -s` output and kernel log, where given). No
    nvidia-smi, or one that fails (no driver), is an inventory without GPUs that says why.
    `health_only`: this node's `-q -x` and `nvlink -s` alone, what the health rules read (not
    the NVLink topology, the MIG instances' GPUs or the kernel log)."""
    if smi is not None:
        inv = from_smi(read_input(smi), sysfs, proc, smi)
        topo_text = read_input(topo) if topo is not None else None
        if nvlink is not None:
            inv = with_nvlinks(inv, read_input(nvlink), nvlink)
    else:
        text, why = run_smi("-q", "-x")
        if text is None:
            return Inventory((), none_why=why)
        inv = from_smi(text, sysfs, proc)
        inv = with_nvlinks(inv, run_smi("nvlink", "-s")[0] if len(inv.gpus) > 1 else None)
        if health_only:
            return inv
        topo_text = run_smi("topo", "-m")[0] if len(inv.gpus) > 1 else None
        if any(g.mig for g in inv.gpus):
            inv = dataclasses.replace(inv, mig_parents=parse_list(run_smi("-L")[0] or ""))
    if dmesg is not None:
        inv = with_xids(inv, read_input(dmesg, f"--gpu-dmesg {dmesg}"), dmesg)
    elif smi is not None:  # never this node's log for another node's GPUs
        inv = with_xids(inv, None, "", "the recorded node's kernel log was not given "
                                       "(--gpu-dmesg)")
    else:
        log, why = kernel_log()
        inv = with_xids(inv, log, "dmesg", why)
    if topo_text is None:
        return inv
    return dataclasses.replace(inv, nvlinks=parse_topo(topo_text))


# ------------------------------------------------------------------ locality

def relation(a: tuple[str, ...], b: tuple[str, ...], node_a: int | None,
             node_b: int | None) -> str:
    """How two devices connect, from their PCIe paths (root complex first, device last)."""
    if a[0] != b[0]:  # different root complexes
        return "NODE" if node_a is not None and node_a == node_b else "SYS"
    common = 0
    for x, y in zip(a[1:-1], b[1:-1], strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return "PHB"
    # below a shared switch: one switch between them is PIX, more is PXB
    rest = max(len(a), len(b)) - 2 - common
    return "PIX" if rest <= 1 else "PXB"


# ------------------------------------------------------------------ a job's binding, sharing

@dataclass(frozen=True)
class Binding:
    """One process's GPUs and whether its CPUs are local to them."""

    gpus: tuple[Gpu, ...]
    cpus: tuple[int, ...]
    source: str  # which variable said which GPUs
    warnings: tuple[str, ...] = field(default_factory=tuple)


#: CUDA's device numbers (CUDA_VISIBLE_DEVICES' indices, a rank's device) on mixed GPUs
ORDER_NOTE = ("CUDA numbers mixed GPUs fastest first, not in nvidia-smi's bus order (the "
              "indices of CUDA_VISIBLE_DEVICES, the device a rank picks): set "
              "CUDA_DEVICE_ORDER=PCI_BUS_ID")


def _cuda_order_differs(gpus: Sequence[Gpu], env: Mapping[str, str]) -> bool:
    return len({g.name for g in gpus}) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID"


def visible(inv: Inventory, env: Mapping[str, str]) -> tuple[tuple[Gpu, ...], str, list[str]]:
    """The GPUs a process sees and which variable says so. Slurm's SLURM_STEP_GPUS /
    SLURM_JOB_GPUS hold nvidia-smi indices (a task's own GPUs alone where Slurm binds them,
    --gpu-bind or --gpus-per-task); CUDA_VISIBLE_DEVICES holds indices in CUDA's order
    (the fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID), UUIDs, or MIG instances' UUIDs
    (each stands for its GPU, whose locality it has; Slurm's indices then count MIG
    instances, not GPUs, so CUDA_VISIBLE_DEVICES says)."""
    notes: list[str] = []
    by_index = {g.index: g for g in inv.gpus}
    by_minor = {g.minor: g for g in inv.gpus if g.minor is not None}
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    mig = cvd is not None and "MIG-" in cvd
    for var in () if mig else ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        if env.get(var):
            got = []
            for item in env[var].split(","):
                if not item.strip().isdigit() or int(item) not in by_index | by_minor:
                    raise UserError(f"{var}={env[var]}: GPU {item!r} does not exist here "
                                    f"(GPUs 0..{len(inv.gpus) - 1})")
                got.append((by_index | by_minor)[int(item)])
            return tuple(got), var, notes
    if cvd is None:
        return inv.gpus, "all (no CUDA_VISIBLE_DEVICES)", notes
    items = [x.strip() for x in cvd.split(",") if x.strip()]
    got = []
    for item in items:
        if item.isdigit():
            if int(item) not in by_index:
                raise UserError(f"CUDA_VISIBLE_DEVICES={cvd}: device {item} does not exist "
                                f"here (GPUs 0..{len(inv.gpus) - 1})")
            got.append(by_index[int(item)])
        elif item.startswith("MIG-"):  # MIG-<uuid>, or CUDA 11.0-11.3's MIG-GPU-<uuid>/gi/ci
            parent = inv.mig_parents.get(item) or \
                (item[4:].split("/")[0] if item.startswith("MIG-GPU-") else None)
            match = [g for g in inv.gpus if g.uuid == parent]
            if not match:
                raise UserError(f"CUDA_VISIBLE_DEVICES={cvd}: {item} is no MIG instance "
                                "that nvidia-smi -L lists here")
            got.append(match[0])
        else:
            match = [g for g in inv.gpus if g.uuid.startswith(item)]
            if len(match) != 1:
                raise UserError(f"CUDA_VISIBLE_DEVICES={cvd}: {item!r} names no single GPU here")
            got.append(match[0])
    if any(x.isdigit() for x in items) and _cuda_order_differs(inv.gpus, env):
        notes.append(ORDER_NOTE)
    once = {g.index: g for g in got}  # two MIG instances of one GPU: that GPU, once
    return tuple(once.values()), "CUDA_VISIBLE_DEVICES", notes


#: Where launchers put a process's rank among those of its node: Open MPI, Slurm and MVAPICH2
#: (the three Grid reads to pick a rank's GPU), MPICH's and Intel MPI's Hydra, Cray's PALS.
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MV2_COMM_WORLD_LOCAL_RANK",
                   "MPI_LOCALRANKID", "PMI_LOCAL_RANK")


def binding(inv: Inventory, env: Mapping[str, str], cpus: Sequence[int]) -> Binding:
    """A process's GPUs (from its environment) and a warning for each GPU whose local CPUs
    do not include all of the process's CPUs. A rank that sees several GPUs takes the one
    its local rank selects, local rank mod the GPUs it sees (the launcher's mapping, as Grid
    and the usual rank-to-GPU wrapper scripts pick a rank's GPU)."""
    gpus, source, notes = visible(inv, env)
    local = next(((v, int(env[v])) for v in LOCAL_RANK_VARS if env.get(v, "").isdigit()),
                 None)
    if len(gpus) > 1 and local is not None:
        var, n = local
        source = f"{var}={n} mod {len(gpus)}; {source}"
        if _cuda_order_differs(gpus, env) and ORDER_NOTE not in notes:
            notes.append(ORDER_NOTE)
        gpus = (gpus[n % len(gpus)],)
    warnings = list(notes)
    if not gpus:
        warnings.append(f"{source} leaves this process no GPU")
    mine = set(cpus)
    for g in gpus:
        if not g.local_cpus:
            continue
        far = sorted(mine - set(g.local_cpus))
        if far:
            warnings.append(
                f"GPU{g.index} ({g.bus_id}) is local to NUMA {g.numa} (CPUs "
                f"{format_cpulist(g.local_cpus)}) but this process also runs on CPUs "
                f"{format_cpulist(far)}: bind each rank near its GPU (srun --gpu-bind=closest "
                f"--cpu-bind=cores, or Open MPI --map-by numa with a rank-to-GPU map)")
    return Binding(gpus, tuple(sorted(mine)), source, tuple(warnings))


def sharing(inv: Inventory) -> list[str]:
    """The GPUs that several jobs (or several processes of unknown job) share while another GPU
    is idle: the scheduler hands out GPUs without per-device binding. Only compute processes
    count: a display server's graphics process is no job."""
    work = {g.index: [p for p in g.processes if p.computes] for g in inv.gpus}
    idle = [g for g in inv.gpus if not work[g.index]]
    out = []
    for g in inv.gpus:
        jobs = {p.job or f"pid {p.pid}" for p in work[g.index]}
        if len(jobs) > 1 and idle:
            out.append(
                f"GPU{g.index} ({g.bus_id}) runs {len(work[g.index])} compute processes of "
                f"{len(jobs)} jobs ({', '.join(sorted(jobs))}) while "
                f"{', '.join(f'GPU{x.index}' for x in idle)} "
                f"{'is' if len(idle) == 1 else 'are'} idle: the jobs were not given devices of "
                f"their own. Give each job its own device: Slurm GRES with device files "
                f"(gres.conf Name=gpu File=/dev/nvidia[0-N], ConstrainDevices=yes in "
                f"cgroup.conf) and srun --gpus-per-task/--gpu-bind; Grid Engine: an RSMAP "
                f"complex of the device ids" + (
                    f"; compute mode Exclusive_Process (nvidia-smi -i {g.index} -c "
                    "EXCLUSIVE_PROCESS) lets one process at a time use it"
                    if g.config.compute_mode == "Default" else ""))
    return out
