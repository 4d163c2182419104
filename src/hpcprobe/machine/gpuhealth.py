"""The GPUs' health as rules over the inventory (machine/gpus.py): what an administrator must
act on for a GPU (memory errors and the resets they call for, ECC off, a narrow PCIe link, the
NVLink fabric, NVLinks down where its siblings have them up), the settings that cap it, and
the Xid events the driver logged, with what NVIDIA's Xid catalog says to do. The faults and
the GPUs' count are a node fact of every run (machine/facts.py: the header's line, the state
a check compares, the faults it drains for); the gpu family reports them as its findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcprobe.machine import gpus
from hpcprobe.machine.gpus import Gpu, Inventory, PcieLink
from hpcprobe.viewkit.table import Block, Lines

#: The Xids an administrator acts on, after NVIDIA's Xid catalog: what each means and its
#: resolution (the catalog's immediate action). An event stays in the kernel log after the
#: GPU was reset, so these are said, never judged; the states they leave (an uncorrectable
#: count, a pending remapping, a recovery action) are nvidia-smi's, and judged as findings.
XID_CATALOG: dict[int, tuple[str, str]] = {
    13: ("graphics engine exception", "usually the application's (an illegal address or "
         "instruction): restart it"),
    31: ("GPU memory page fault", "usually the application's illegal address: restart it"),
    43: ("GPU stopped processing", "restart the application"),
    45: ("preemptive cleanup after earlier errors", "none (a process was ended)"),
    48: ("double-bit ECC error", "reset the GPU"),
    61: ("internal micro-controller breakpoint", "reset the GPU"),
    62: ("internal micro-controller halt", "reset the GPU"),
    63: ("ECC page retirement or row remapping recorded", "reset the GPU to apply it"),
    64: ("ECC page retirement or row remapping failed", "reset the GPU; replace it if it "
         "comes back"),
    74: ("NVLink error", "reset the GPU; check its NVLinks if it comes back"),
    79: ("GPU has fallen off the bus", "reboot the node; check its PCIe slot, power and "
         "cooling"),
    92: ("high single-bit ECC error rate", "watch its ECC counts"),
    94: ("contained ECC error", "restart the application it stopped; the GPU runs others "
         "on"),
    95: ("uncontained ECC error", "reset the GPU"),
    119: ("GSP RPC timeout", "reset the GPU"),
    120: ("GSP error", "reset the GPU"),
    140: ("unrecovered ECC error", "reset the GPU"),
    154: ("the GPU's recovery action changed", "the action nvidia-smi names as its "
          "gpu_recovery_action"),
}


def nvlink_state(g: Gpu) -> str | None:
    """How many of a GPU's NVLinks are up, at what rate, and which are not; None where they
    were not read."""
    if not g.nvlinks:
        return None
    up = sorted({x for x in g.nvlinks if x is not None})
    down = [str(k) for k, x in enumerate(g.nvlinks) if x is None]
    rate = f" at {up[0]:g} GB/s" if len(up) == 1 else \
        f" at {up[0]:g}-{up[-1]:g} GB/s" if up else ""
    return (f"NVLinks {g.nvlinks_up} of {len(g.nvlinks)} up{rate}"
            + (f" (inactive: {', '.join(down)})" if down else ""))


def inactive_nvlinks(g: Gpu, node: Inventory) -> tuple[list[int], int]:
    """A GPU's inactive NVLinks, where it has fewer active than the most among the node's
    GPUs of its model (bridges or a baseboard can leave links unused by design: a link counts
    as lost only where a sibling has it up); and that most. Nothing where it has no sibling."""
    siblings = [s for s in node.gpus if s.name == g.name and s.nvlinks]
    most = max((s.nvlinks_up for s in siblings), default=0)
    if len(siblings) < 2 or g.nvlinks_up >= most:
        return [], most
    return [k for k, x in enumerate(g.nvlinks) if x is None], most


def findings(g: Gpu, node: Inventory | None = None) -> list[str]:
    """What an administrator must act on for one GPU, each with the fix: memory errors and
    the resets they call for (NVIDIA's memory error management: a pending row remapping or
    page retirement takes effect at the next reset; a failed remapping is for replacement),
    ECC turned off, a PCIe link narrower than the GPU and its slot allow, a GPU of an NVSwitch
    system that the NVLink fabric has not registered (CUDA refuses it work until then) or
    whose route or bandwidth the fabric reports unhealthy or degraded; and, against its
    siblings on `node`, NVLinks down."""
    h, pcie = g.health, g.pcie or PcieLink(None, None, None, None)
    reset = f"drain the node and reset the GPU (nvidia-smi -r -i {g.index}) or reboot it"
    down, most = inactive_nvlinks(g, node) if node is not None else ([], 0)
    replace = "the GPU is due for replacement"
    said = [
        (h.uncorrectable, f"{h.uncorrectable} uncorrectable ECC error(s) since the driver "
                          f"loaded: {reset}; replace the GPU if they come back"),
        (h.remap_failed, f"a row remapping failed (a memory bank has no spare row left): "
                         f"{replace}"),
        (h.remap_pending and not h.remap_failed,
         f"a memory row remapping is pending, applied at the GPU's next reset: {reset}"),
        (h.retire_pending,
         f"memory pages are pending retirement, retired at the GPU's next reset: {reset}"),
        (h.sram_threshold, f"its SRAM uncorrectable errors passed NVIDIA's threshold: {replace}"),
        (h.recovery, f"the driver asks for the recovery action '{h.recovery}': stop the GPU's "
                     f"jobs, then do it (Reset: nvidia-smi -r -i {g.index}; Reboot: the node's)"),
        ((h.reset_required or h.drain_and_reset) and not h.recovery,
         f"the driver says the GPU needs a reset: {reset}"),
        (h.ecc == "Disabled", "ECC is off, so memory errors go unnoticed: " + (
            "it is on again after the GPU's next reset" if h.ecc_pending == "Enabled" else
            f"nvidia-smi -i {g.index} -e 1, then reset the GPU")),
        (pcie.narrow,
         f"its PCIe link trained at x{pcie.width} of the x{pcie.max_width} it and its slot "
         "allow: its host<->device bandwidth is cut accordingly (reseat it, "
         "check the riser or slot)"),
        (h.fabric_state not in (None, "Completed"),
         f"it is not registered with the NVLink fabric (fabric state '{h.fabric_state}'): "
         "CUDA refuses it work ('system not ready') until NVIDIA Fabric Manager has done so "
         "(systemctl status nvidia-fabricmanager; NVLink 5 systems need its NVLSM too)"),
        (h.fabric_state == "Completed" and h.fabric_status not in (None, "Success"),
         f"its NVLink fabric registration ended in '{h.fabric_status}': see the Fabric "
         "Manager's log (journalctl -u nvidia-fabricmanager)"),
        (h.route_unhealthy or h.fabric_degraded,
         "the NVLink fabric reports " + " and ".join(
             t for t, on in (("a route to it unhealthy", h.route_unhealthy),
                             ("its bandwidth degraded", h.fabric_degraded)) if on)
         + (" (while recovering: read it again in a minute)" if h.fabric_recovering else "")
         + ": its NVLink traffic is slowed or fails; see the fabric manager's log and the "
         f"GPU's NVLink errors (nvidia-smi nvlink -e -i {g.index})"),
        (bool(down),
         f"{len(down)} of its {len(g.nvlinks)} NVLinks are inactive (link(s) "
         f"{', '.join(map(str, down))}) where its siblings have {most} active: its traffic to "
         f"its peers is cut accordingly; {reset}, and if they stay down check its NVLink "
         f"bridge or baseboard (their errors: nvidia-smi nvlink -e -i {g.index})"),
    ]
    return [f"GPU{g.index} ({g.bus_id}): {text}" for found, text in said if found]


def config_notes(g: Gpu) -> list[str]:
    """The settings that make a GPU give a job less than it could, each with the way back:
    a power limit below the GPU's default and application clocks below theirs (both cap
    its clock under load: a slow sibling's likely cause), persistence mode off. Settings
    someone may have chosen, so said, never judged."""
    c, said = g.config, []
    if c.low_power:
        said.append(f"its power limit is {c.power_limit_w:g} W, below its default "
                    f"{c.default_power_limit_w:g} W: under load its clock is held lower than "
                    f"its siblings' (nvidia-smi -i {g.index} -pl {c.default_power_limit_w:g} "
                    "restores it)")
    if c.low_clocks:
        said.append(f"its application clocks are set to {c.app_sm_mhz} MHz, below their "
                    f"default {c.default_app_sm_mhz} MHz, which caps its clock (nvidia-smi -i "
                    f"{g.index} -rac resets them)")
    if c.persistence == "Disabled":
        said.append("persistence mode is off: the driver tears the GPU down whenever no "
                    "process holds it, so each job's first CUDA call waits for it to start "
                    "again and settings made with nvidia-smi may not last (systemctl enable "
                    "--now nvidia-persistenced)")
    return [f"GPU{g.index} ({g.bus_id}): {text}" for text in said]


def xid_notes(g: Gpu) -> list[str]:
    """One line per Xid code a GPU logged: how often, the last time, what NVIDIA's Xid
    catalog says it means and what to do (events, not states: see XID_CATALOG)."""
    out = []
    for code in sorted({x.code for x in g.xids}):
        got = [x for x in g.xids if x.code == code]
        meaning, action = XID_CATALOG.get(code, (
            "", f"see NVIDIA's Xid catalog; the log says: {got[-1].text[:100] or '-'}"))
        out.append(f"GPU{g.index} ({g.bus_id}): Xid {code}{f' ({meaning})' if meaning else ''}"
                   f" logged {len(got)} time(s), last {got[-1].when or 'at an unknown time'}: "
                   f"{action}")
    return out


#: The key a run's provenance keeps the GPUs' health under (a node fact of every run:
#: machine/facts.py; the gpu family keeps its own measurements' record under "gpu")
KEY = "gpu_health"
#: The fact as a run keeps it: its part of the result schema
SCHEMA = {"type": "object", "required": ["read"], "properties": {
    "read": {"type": "boolean"},
    "why": {"type": ["string", "null"]},
    "gpus": {"type": "string"},
    "faults": {"type": "array", "items": {"type": "string"}}},
    "if": {"properties": {"read": {"const": True}}},
    "then": {"required": ["gpus", "faults"]},
    "else": {"required": ["why"]}}


def stored(inv: Inventory) -> dict[str, Any]:
    """The GPUs' health as a run keeps it: how many of which model, and each fault an
    administrator must act on, one line each with the fix (`findings`); or why there are no
    GPUs to read."""
    if not inv.gpus:
        return {"read": False, "why": inv.none_why or "nvidia-smi lists no GPU"}
    models = sorted({g.name for g in inv.gpus})
    return {"read": True,
            "gpus": ", ".join(f"{sum(g.name == m for g in inv.gpus)} x {m}" for m in models),
            "faults": [f for g in inv.gpus for f in findings(g, inv)]}


def fact(sysfs: Path) -> dict[str, Any]:
    """This node's GPUs' health: `nvidia-smi -q -x` once, and `nvlink -s` where there are
    several (not their locality or the kernel log, which the gpu family reads when it runs);
    on a node without the NVIDIA driver, at once, why not. A /sys tree other than this node's
    (a recorded node's, `check --sysfs`) comes with no nvidia-smi of its own: not read."""
    if sysfs != Path("/sys"):
        return {"read": False, "why": f"{sysfs} is a recorded /sys tree, with no nvidia-smi "
                                      "output of its node"}
    return stored(gpus.discover(sysfs=sysfs, proc=None, health_only=True))


def _read(kept: Any) -> dict[str, Any] | None:
    """The fact as stored, where GPUs were read (None: none, or a run of an older version)."""
    return kept if isinstance(kept, dict) and kept.get("read") else None


def line(kept: Any) -> list[str]:
    """The run header's line: the GPUs and their faults' count (nothing on a node without
    GPUs: a CPU node's header names none)."""
    if (got := _read(kept)) is None:
        return []
    n = len(got.get("faults") or [])
    return [f"GPUs: {got.get('gpus')}; " + (
        "healthy (memory errors, resets, ECC, PCIe and NVLinks read)" if not n else
        f"{n} fault(s) to act on (--details lists them; `check` drains for them)")]


def state(kept: Any) -> dict[str, str]:
    """How many of which model: what a healthy node of its kind keeps (a reference that had
    GPUs says they are gone where a check finds none)."""
    return {} if (got := _read(kept)) is None else {"GPUs": str(got.get("gpus"))}


def faults(kept: Any) -> list[str]:
    """Each fault an administrator must act on, one line each (a check drains for them)."""
    return [] if (got := _read(kept)) is None else [str(f) for f in got.get("faults") or []]


def details(kept: Any) -> list[Block]:
    """`--details` and the report: each fault, with the fix."""
    found = faults(kept)
    return [Lines(["GPU faults (act on each):", *(f"  {f}" for f in found)])] if found else []
