"""The GPU family without a GPU: inventory and locality from nvidia-smi documents and sysfs
trees of a one-GPU node and an eight-GPU two-socket node (tests/gpunodes.py), a job's binding
and GPU sharing, the peak models, the CUDA program compiled with the nvcc found (and its clean
answer where there is no driver), the measurement plumbing against a stand-in program (checks
that fail discard their figures), and the CLI's bad input. On a node with a GPU, its driver and
nvcc, the runtime tests run the family and the program on it."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from conftest import assert_user_error, hpcprobe, run_json
from gpunodes import DATA, a100_node, h100_node, vm_node
from hpcprobe.common.errors import UserError
from hpcprobe.cuda import build, toolkit
from hpcprobe.families.gpu import bench, locality, peaks, views
from hpcprobe.machine import gpuhealth as health
from hpcprobe.machine import gpus, provenance
from hpcprobe.measure import profiles
from hpcprobe.measure.family import RunContext
from hpcprobe.results import model as results
from hpcprobe.results.model import Metric, Run
from hpcprobe.results.store import Store

H100 = DATA / "h100-1gpu.xml"
H100_VM = DATA / "h100-vm-580.xml"  # recorded on a real H100 in a VM
A100 = DATA / "a100-8gpu-2s.xml"
DMESG = DATA / "a100-8gpu-2s-dmesg.txt"


@pytest.fixture
def h100(tmp_path: Path) -> gpus.Inventory:
    sysfs, proc = h100_node(tmp_path)
    return gpus.from_smi(H100.read_text(), sysfs, proc)


@pytest.fixture
def a100(tmp_path: Path) -> gpus.Inventory:
    sysfs, proc = a100_node(tmp_path)
    return gpus.from_smi(A100.read_text(), sysfs, proc)


# ------------------------------------------------------------------ inventory and locality

def test_one_gpu_node_inventory(h100):
    [g] = h100.gpus
    assert (g.name, g.bus_id, g.minor, g.architecture) == \
        ("NVIDIA H100 80GB HBM3", "0000:17:00.0", 0, "Hopper")
    assert g.memory_bytes == 81559 << 20 and (g.max_sm_mhz, g.max_mem_mhz) == (1980, 2619)
    assert g.numa_node == 0 and g.local_cpus == tuple(range(16)) and g.processes == ()
    assert (h100.driver, h100.cuda) == ("580.159.04", "13.0")
    [row] = locality.locality_rows(h100)
    # the HCA (and its netdev) behind the GPU's switch; the NVMe on another root port
    assert row == ["GPU0 NVIDIA H100 80GB HBM3", "0000:17:00.0",
                   "x16 2.5 GT/s (max x16 32 GT/s)", "0", "0-15", "mlx5_0 (PIX)", "nvme0 (PHB)"]
    assert not g.pcie.narrow  # an idle GPU's lower speed is no fault
    assert "trained at" not in locality.render(h100)
    # its settings, at their defaults: nothing to say
    assert g.config == gpus.Config("Enabled", "Default", 700.0, 700.0, 1980, 1980)
    assert health.config_notes(g) == [] and "setting:" not in locality.render(h100)


def test_eight_gpu_two_socket_locality(a100):
    assert [g.numa_node for g in a100.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g.bus_id[5:7] for g in a100.gpus] == ["07", "0f", "47", "4e", "87", "90", "b7", "bd"]
    rows = locality.locality_rows(a100)
    assert [r[5] for r in rows] == [f"mlx5_{i // 2} (PIX)" for i in range(8)]
    assert rows[4][6] == "nvme0 (PHB)" and rows[0][6] == "nvme0 (SYS)"
    assert rows[7][4] == "64-127"
    assert [g.pcie.narrow for g in a100.gpus] == [False] * 6 + [True, False]
    assert rows[6][2] == "x8 16 GT/s (max x16 16 GT/s)"
    m = {r[0]: r[1:] for r in locality.gpu_matrix(a100)}
    assert m["GPU0"][:5] == ["X", "PIX", "NODE", "NODE", "SYS"]
    assert m["GPU5"][4] == "PIX" and m["GPU5"][6] == "NODE"
    text = locality.render(a100)
    assert "GPUs: 8 (driver 580.159.04, CUDA 13.0" in text and "SYS across" in text
    assert "GPU6 (0000:b7:00.0): its PCIe link trained at x8 of the x16 it and its slot " \
        "allow" in text


def test_pcie_link_is_the_lower_of_device_and_slot(tmp_path):
    dev = tmp_path / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:01:00.0"
    dev.mkdir(parents=True)
    (tmp_path / "bus" / "pci" / "devices").mkdir(parents=True)
    (tmp_path / "bus" / "pci" / "devices" / "0000:01:00.0").symlink_to(dev)
    for attr, value in (("current_link_speed", "16.0 GT/s PCIe"), ("current_link_width", "16"),
                        ("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16")):
        (dev / attr).write_text(value + "\n")
    (dev.parent / "max_link_speed").write_text("16.0 GT/s PCIe\n")  # a PCIe 4.0 slot
    (dev.parent / "max_link_width").write_text("16\n")
    link = gpus.pcie_link(tmp_path, "0000:01:00.0")
    assert (link.speed_gts, link.width, link.max_speed_gts, link.max_width) == (16, 16, 16, 16)
    (dev / "current_link_speed").write_text("Unknown\n")  # link down
    assert gpus.pcie_link(tmp_path, "0000:01:00.0").speed_gts is None
    assert gpus.pcie_link(tmp_path, "0000:02:00.0") is None  # no such device: no link


def test_processes_and_their_jobs(a100):
    procs = a100.gpus[1].processes
    assert [(p.pid, p.job, p.used_bytes) for p in procs] == \
        [(4242, "101", 20480 << 20), (4343, "102", 16384 << 20)]


def test_malformed_documents_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not nvidia-smi XML"):
        gpus.from_smi("<gpu>", tmp_path)
    with pytest.raises(UserError, match="root <topology>"):
        gpus.from_smi("<topology/>", tmp_path)
    bad = H100.read_text().replace("00000000:17:00.0", "zz:17")
    with pytest.raises(UserError, match="PCI bus id"):
        gpus.from_smi(bad, tmp_path)


# ------------------------------------------------------------------ binding and sharing

def test_cpus_far_from_the_gpu_are_a_warning_with_the_fix(a100):
    b = gpus.binding(a100, {"CUDA_VISIBLE_DEVICES": "0"}, range(64, 72))
    assert [g.index for g in b.gpus] == [0] and b.source == "CUDA_VISIBLE_DEVICES"
    [w] = b.warnings
    assert "GPU0 (0000:07:00.0) is local to NUMA 0 (CPUs 0-63)" in w and "64-71" in w
    assert "--gpu-bind=closest" in w
    assert gpus.binding(a100, {"CUDA_VISIBLE_DEVICES": "0"}, range(8)).warnings == ()


def test_a_rank_that_sees_every_gpu_takes_its_local_ranks(a100):
    """mpirun's ranks on a node whose 8 GPUs they all see: local rank 5 takes GPU5 (NUMA 1),
    so bound to NUMA 0's CPUs it is warned about that GPU alone, not about GPUs 4-7; local
    rank 1 on NUMA 0 has nothing to hear. Among the GPUs a variable leaves it, the same."""
    env = {"OMPI_COMM_WORLD_LOCAL_RANK": "5", "OMPI_COMM_WORLD_RANK": "13"}
    b = gpus.binding(a100, env, range(8))
    assert [g.index for g in b.gpus] == [5] and "OMPI_COMM_WORLD_LOCAL_RANK=5" in b.source
    [w] = b.warnings
    assert w.startswith("GPU5 (0000:90:00.0) is local to NUMA 1")
    assert gpus.binding(a100, {"SLURM_LOCALID": "1"}, range(8)).warnings == ()
    b = gpus.binding(a100, {"CUDA_VISIBLE_DEVICES": "4,5", "MPI_LOCALRANKID": "3"},
                     range(64, 72))
    assert [g.index for g in b.gpus] == [5] and b.warnings == ()
    # mixed GPUs, all seen: CUDA's ordinal is not nvidia-smi's unless told to be
    mixed = replace(a100, gpus=(replace(a100.gpus[0], name="NVIDIA A40"), *a100.gpus[1:]))
    [w] = gpus.binding(mixed, {"SLURM_LOCALID": "0"}, range(8)).warnings
    assert "set CUDA_DEVICE_ORDER=PCI_BUS_ID" in w
    assert gpus.binding(mixed, {"SLURM_LOCALID": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                        range(8)).warnings == ()
    # one GPU seen: that one, whatever the local rank
    assert [g.index for g in gpus.binding(a100, {"CUDA_VISIBLE_DEVICES": "2",
                                                 "SLURM_LOCALID": "3"}, range(8)).gpus] == [2]
    # srun --gpu-bind=closest (or --gpus-per-task, or map_gpu) under ConstrainDevices: Slurm
    # narrows each task's SLURM_STEP_GPUS to its GPU and renumbers CUDA_VISIBLE_DEVICES from 0
    task = {"SLURM_STEP_GPUS": "5", "CUDA_VISIBLE_DEVICES": "0", "SLURM_LOCALID": "2"}
    b = gpus.binding(a100, task, range(64, 72))
    assert [g.index for g in b.gpus] == [5] and b.source == "SLURM_STEP_GPUS"
    assert b.warnings == ()


def test_which_gpus_a_process_sees(a100):
    uuid = a100.gpus[3].uuid
    assert [g.index for g in gpus.visible(a100, {"CUDA_VISIBLE_DEVICES": uuid})[0]] == [3]
    # Slurm's variables hold nvidia-smi indices and win over CUDA's renumbered ones
    env = {"SLURM_STEP_GPUS": "5,6", "CUDA_VISIBLE_DEVICES": "0,1"}
    got, source, _ = gpus.visible(a100, env)
    assert [g.index for g in got] == [5, 6] and source == "SLURM_STEP_GPUS"
    assert len(gpus.visible(a100, {})[0]) == 8
    for env, needle in (({"CUDA_VISIBLE_DEVICES": "9"}, "device 9 does not exist"),
                        ({"SLURM_JOB_GPUS": "2,x"}, "GPU 'x' does not exist"),
                        ({"CUDA_VISIBLE_DEVICES": "GPU-nope"}, "names no single GPU"),
                        ({"CUDA_VISIBLE_DEVICES": "MIG-5c1e"},
                         "MIG-5c1e is no MIG instance that nvidia-smi -L lists here")):
        with pytest.raises(UserError, match=needle):
            gpus.visible(a100, env)


def test_a_mig_instance_stands_for_its_gpu(a100):
    listing = "\n".join([
        "GPU 3: NVIDIA A100-SXM4-80GB (UUID: GPU-a100a100-0000-4000-8000-000000000003)",
        "GPU 4: NVIDIA A100-SXM4-80GB (UUID: GPU-a100a100-0000-4000-8000-000000000004)",
        "  MIG 3g.40gb     Device  0: (UUID: MIG-4b5c1e2a-9d31-5f6e-8a7b-0c1d2e3f4a5b)",
        "  MIG 3g.40gb     Device  1: (UUID: MIG-7e8f9a0b-1c2d-5e3f-9a4b-5c6d7e8f9a0b)"])
    parents = gpus.parse_list(listing)
    assert set(parents.values()) == {a100.gpus[4].uuid} and len(parents) == 2
    inv = replace(a100, mig_parents=parents)
    # Slurm's indices count MIG instances then: CUDA_VISIBLE_DEVICES says which
    env = {"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": ",".join(parents)}
    got, source, _ = gpus.visible(inv, env)
    assert [g.index for g in got] == [4] and source == "CUDA_VISIBLE_DEVICES"
    old_form = {"CUDA_VISIBLE_DEVICES": f"MIG-{a100.gpus[2].uuid}/1/0"}  # CUDA 11.0-11.3
    assert [g.index for g in gpus.visible(inv, old_form)[0]] == [2]
    [w] = gpus.binding(inv, env, range(8)).warnings  # GPU4 is NUMA 1's; CPUs 0-7 are not
    assert w.startswith("GPU4 (0000:87:00.0) is local to NUMA 1")


def test_two_jobs_on_one_gpu_while_another_idles(a100):
    [finding] = gpus.sharing(a100)
    assert finding.startswith("GPU1 (0000:0f:00.0) runs 2 compute processes of 2 jobs "
                              "(101, 102)")
    # GPU2 runs only a display server's graphics process: no job, so it is idle
    assert [p.kind for p in a100.gpus[2].processes] == ["G"]
    assert "GPU0, GPU2" in finding and "GRES" in finding and "RSMAP" in finding
    assert "nvidia-smi -i 1 -c EXCLUSIVE_PROCESS" in finding  # its compute mode is Default


def test_one_job_on_each_gpu_is_no_finding(tmp_path):
    sysfs, proc = a100_node(tmp_path)
    (proc / "4343" / "cgroup").write_text("0::/slurm/uid_0/job_101/step_0\n")
    inv = gpus.from_smi(A100.read_text(), sysfs, proc)
    assert gpus.sharing(inv) == []  # both processes are job 101's


# ------------------------------------------------------------------ health

def _one_gpu(inner: str, driver: str = "470.256.02") -> gpus.Gpu:
    """A GPU of an nvidia-smi document holding these elements (a driver of that release)."""
    [g] = gpus.from_smi(f'<nvidia_smi_log><driver_version>{driver}</driver_version>'
                        f'<gpu id="00000000:3B:00.0"><product_name>GPU</product_name>{inner}'
                        '</gpu></nvidia_smi_log>', "/nonexistent", None).gpus
    return g


def test_memory_errors_and_the_resets_they_need(a100, tmp_path):
    h100 = gpus.from_smi(H100.read_text(), *h100_node(tmp_path / "h100"))
    h = h100.gpus[0].health
    assert (h.ecc, h.uncorrectable, h.uncorrectable_life, h.rows_remapped, h.pages_retired) == \
        ("Enabled", 0, 0, 0, None)
    assert health.findings(h100.gpus[0]) == []
    found = {g.index: health.findings(g) for g in a100.gpus}
    assert [i for i, f in found.items() if f] == [3, 5, 6]
    # GPU3: two uncorrectable errors since the driver loaded and a remapping due at reset
    assert found[3][0] == ("GPU3 (0000:4e:00.0): 2 uncorrectable ECC error(s) since the driver "
                           "loaded: drain the node and reset the GPU (nvidia-smi -r -i 3) or "
                           "reboot it; replace the GPU if they come back")
    assert "remapping is pending, applied at the GPU's next reset" in found[3][1]
    # GPU5: no spare row left, and the driver asks for a recovery action
    assert len(found[5]) == 2 and "is due for replacement" in found[5][0]
    assert "recovery action 'Drain and Reset'" in found[5][1]
    assert a100.gpus[5].health.rows_remapped == 512 and a100.gpus[5].health.uncorrectable == 0
    text = locality.render(a100)
    assert all(f in text for f in found[3] + found[5] + found[6])


def test_xid_events_from_the_kernel_log(a100):
    by_bus = gpus.parse_xids(DMESG.read_text())
    assert {bus: [x.code for x in xids] for bus, xids in by_bus.items()} == {
        "0000:0f:00": [13, 13, 31], "0000:4e:00": [48, 63, 94], "0000:ff:00": [79],
        "0000:bd:00": [157]}  # with and without "PCI:"; other NVRM lines are no events
    assert by_bus["0000:0f:00"][1].when == "5044 s after boot"
    # dates: a journal's (journalctl -k, and -o short-iso), dmesg -T's; the bus id in capitals
    j = gpus.parse_xids(
        "May 18 19:02:39 gpu7 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the "
        "bus.\n2026-05-18T19:02:40+0000 gpu7 kernel: NVRM: Xid (PCI:0000:2B:00): 79, pid=1, "
        "GPU has fallen off the bus.\n[Mon May 18 19:02:41 2026] NVRM: Xid (PCI:0000:2b:00): "
        "79, GPU has fallen off the bus.\nNVRM: Xid (PCI:0000:2b:00): 79, no time\n")
    assert [(x.code, x.when) for x in j["0000:2b:00"]] == [
        (79, "May 18 19:02:39"), (79, "2026-05-18T19:02:40+0000"),
        (79, "Mon May 18 19:02:41 2026"), (79, None)]
    assert "Xid" not in locality.render(a100)  # no kernel log looked at, nothing to say of it
    inv = gpus.with_xids(a100, DMESG.read_text(), "dmesg")
    notes = {g.index: health.xid_notes(g) for g in inv.gpus}
    assert [i for i, n in notes.items() if n] == [1, 3, 7]  # 0000:ff:00 is none of its GPUs
    assert notes[1] == [
        "GPU1 (0000:0f:00.0): Xid 13 (graphics engine exception) logged 2 time(s), last 5044 s "
        "after boot: usually the application's (an illegal address or instruction): restart it",
        "GPU1 (0000:0f:00.0): Xid 31 (GPU memory page fault) logged 1 time(s), last 5062 s "
        "after boot: usually the application's illegal address: restart it"]
    assert [n.split(" logged")[0][21:] for n in notes[3]] == [
        "Xid 48 (double-bit ECC error)", "Xid 63 (ECC page retirement or row remapping "
        "recorded)", "Xid 94 (contained ECC error)"]
    assert notes[7] == ["GPU7 (0000:bd:00.0): Xid 157 logged 1 time(s), last 9100 s after "
                        "boot: see NVIDIA's Xid catalog; the log says: pid='<unknown>', "
                        "name=<unknown>, a code outside the catalog"]
    # events are said, never judged: GPU1's findings are none, GPU3's are its states'
    assert health.findings(inv.gpus[1]) == [] and \
        health.findings(inv.gpus[3]) == health.findings(a100.gpus[3])
    text = locality.render(inv)
    assert "Xid events in the kernel log (dmesg; they stay there after a reset):" in text
    assert all(f"    {n}" in text for n in notes[1] + notes[3] + notes[7])
    assert inv.gpus[3].to_dict()["xids"][0] == {"code": 48, "when": "8120 s after boot",
                                                "text": inv.gpus[3].xids[0].text}
    clean = gpus.with_xids(a100, "[ 1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n",
                           "dmesg")
    assert "Xid events: none in the kernel log (dmesg)" in locality.render(clean)


def test_xid_events_are_noted_and_set_no_exit_status(tmp_path):
    sysfs, _ = h100_node(tmp_path)
    log = tmp_path / "dmesg.txt"
    log.write_text("[  812.5] NVRM: Xid (PCI:0000:17:00): 79, pid='<unknown>', "
                   "name=<unknown>, GPU has fallen off the bus.\n")
    node = ["--gpu-smi", str(H100), "--gpu-sysfs", str(sysfs)]
    r = hpcprobe("gpu", "info", *node)  # never this node's kernel log for a recorded node
    assert r.code == 0 and "Xid events: not read (the recorded node's kernel log was not " \
        "given (--gpu-dmesg))" in r.out, r.out
    r = hpcprobe("gpu", "check", *node, "--gpu-dmesg", str(log),
                 env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "NOTE: GPU0 (0000:17:00.0): Xid 79 (GPU has fallen off the bus) logged 1 time(s), " \
        "last 812 s after boot: reboot the node" in r.out, r.out
    assert "WARNING: GPU0 (0000:17:00.0): Xid" not in r.out
    assert r.code == (1 if "WARNING:" in r.out else 0)  # the binding alone, where CPUs are far
    assert_user_error(hpcprobe("gpu", "info", *node, "--gpu-dmesg", str(tmp_path / "no.txt")),
                      f"--gpu-dmesg {tmp_path / 'no.txt'}: cannot read it")


def test_a_kernel_log_this_user_cannot_read_says_why(tmp_path, monkeypatch):
    fake = tmp_path / "dmesg"
    fake.write_text("#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not "
                    "permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpus.kernel_log() == (None, "the kernel log is not readable by this user "
                                       "(kernel.dmesg_restrict): run as root")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpus.kernel_log() == (None, "no dmesg here (util-linux)")


def test_health_in_each_generation_of_nvidia_smi():
    # R470 and before (a V100): single_bit/double_bit totals, page retirement
    old = _one_gpu(
        "<ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode><ecc_errors><volatile>"
        "<single_bit><total>7</total></single_bit><double_bit><device_memory>1</device_memory>"
        "<total>1</total></double_bit></volatile><aggregate><double_bit><total>4</total>"
        "</double_bit></aggregate></ecc_errors><retired_pages><multiple_single_bit_retirement>"
        "<retired_count>3</retired_count></multiple_single_bit_retirement>"
        "<double_bit_retirement><retired_count>1</retired_count></double_bit_retirement>"
        "<pending_blacklist>Yes</pending_blacklist></retired_pages>")
    assert (old.health.uncorrectable, old.health.uncorrectable_life,
            old.health.pages_retired, old.health.rows_remapped) == (1, 4, 4, None)
    [dbe, pages] = health.findings(old)
    assert "1 uncorrectable ECC error(s)" in dbe and "pending retirement" in pages
    # R5xx before R555: one SRAM uncorrectable count beside the DRAM's
    mid = _one_gpu("<ecc_errors><volatile><sram_uncorrectable>1</sram_uncorrectable>"
                   "<dram_uncorrectable>0</dram_uncorrectable></volatile></ecc_errors>"
                   "<gpu_reset_status><reset_required>Yes</reset_required></gpu_reset_status>",
                   "535.183.01")
    assert mid.health.uncorrectable == 1
    assert "the driver says the GPU needs a reset" in health.findings(mid)[1]
    # R555 and later: the SRAM's split into parity and SECDED, and the threshold flag
    new = _one_gpu("<ecc_errors><volatile><sram_uncorrectable_parity>1"
                   "</sram_uncorrectable_parity><sram_uncorrectable_secded>2"
                   "</sram_uncorrectable_secded><dram_uncorrectable>0</dram_uncorrectable>"
                   "</volatile><aggregate><sram_threshold_exceeded>Yes"
                   "</sram_threshold_exceeded></aggregate></ecc_errors>", "580.95.05")
    assert new.health.uncorrectable == 3 and new.health.sram_threshold
    assert "passed NVIDIA's threshold" in health.findings(new)[1]
    # ECC off: said with the fix, or that it comes back at the next reset
    off = "<ecc_mode><current_ecc>Disabled</current_ecc><pending_ecc>{}</pending_ecc></ecc_mode>"
    assert "nvidia-smi -i 0 -e 1" in health.findings(_one_gpu(off.format("Disabled")))[0]
    assert "on again after the GPU's next reset" in \
        health.findings(_one_gpu(off.format("Enabled")))[0]
    # a GPU without ECC or these features (a GeForce): nothing reported, nothing found
    plain = _one_gpu(
        "<ecc_mode><current_ecc>N/A</current_ecc></ecc_mode><ecc_errors><volatile>"
        "<dram_uncorrectable>N/A</dram_uncorrectable></volatile></ecc_errors>"
        "<gpu_reset_status><reset_required>Requested functionality has been deprecated"
        "</reset_required></gpu_reset_status><gpu_recovery_action>Requested functionality has "
        "been deprecated</gpu_recovery_action>", "575.51.02")
    assert plain.health == gpus.Health() and health.findings(plain) == []


def test_settings_that_cap_a_gpu_are_said_not_judged(a100):
    """GPU6's power limit is 300 W of its default 400 W, GPU7's application clocks 1095 MHz of
    1410: each is said with the way back (a slow sibling's likely cause); neither is a
    finding (the exit status: test_a_setting_alone_is_a_note_with_exit_0)."""
    assert not [f for g in a100.gpus[6:] for f in health.findings(g) if "limit" in f or
                "clocks" in f]
    assert [g.config.capped for g in a100.gpus] == [False] * 6 + [True, True]
    notes = [n for g in a100.gpus for n in health.config_notes(g)]
    assert notes == [
        "GPU6 (0000:b7:00.0): its power limit is 300 W, below its default 400 W: under load "
        "its clock is held lower than its siblings' (nvidia-smi -i 6 -pl 400 restores it)",
        "GPU7 (0000:bd:00.0): its application clocks are set to 1095 MHz, below their default "
        "1410 MHz, which caps its clock (nvidia-smi -i 7 -rac resets them)"]
    assert f"  setting: {notes[0]}" in locality.render(a100).splitlines()
    # before R535: <power_readings>, the enforced limit (which a system power brake lowers
    # too); persistence mode off
    old = _one_gpu("<persistence_mode>Disabled</persistence_mode><power_readings>"
                   "<power_limit>300.00 W</power_limit><default_power_limit>300.00 W"
                   "</default_power_limit><enforced_power_limit>250.00 W</enforced_power_limit>"
                   "</power_readings>")
    assert (old.config.power_limit_w, old.config.default_power_limit_w) == (250.0, 300.0)
    [power, persistence] = health.config_notes(old)
    assert "250 W, below its default 300 W" in power
    assert "nvidia-persistenced" in persistence
    # a GPU that reports none of it (a GeForce's N/A): nothing said
    plain = _one_gpu("<compute_mode>Default</compute_mode><applications_clocks><graphics_clock>"
                     "N/A</graphics_clock></applications_clocks>")
    assert not plain.config.capped and health.config_notes(plain) == []


# ------------------------------------------------------------------ peak models

def test_pcie_model_matches_the_specification():
    # PCIe 3.0/4.0/5.0 x16: 15.75/31.5/63 GB/s each way; 2.0 x8 (8b/10b) 4 GB/s; 6.0 x16 128
    assert [round(peaks.pcie_gbs(g, 16), 2) for g in (3, 4, 5, 6)] == [15.75, 31.51, 63.02, 128]
    assert peaks.pcie_gbs(2, 8) == 4.0
    assert peaks.pcie_gbs(7, 16) is None and peaks.pcie_gbs(4, 0) is None


def test_peak_models_match_the_data_sheets():
    # H100 SXM: HBM3 at 2619 MHz over 5120 bits is its 3.35 TB/s; 132 SMs at 1830 MHz its
    # dense BF16 989 TFLOP/s; A100's FP64 tensor 19.5 TFLOP/s at 1410 MHz
    assert peaks.memory_peak_gbs(2_619_000, 5120) == pytest.approx(3352.3, abs=0.1)
    assert peaks.gemm_peak_tflops("9.0", "bf16", 132, 1830) == pytest.approx(989.4, abs=0.1)
    assert peaks.gemm_peak_tflops("8.0", "fp64", 108, 1410) == pytest.approx(19.5, abs=0.05)
    assert peaks.gemm_peak_tflops("12.0", "fp16", 100, 2000) is None  # not in the table
    assert peaks.gemm_peak_tflops("7.0", "tf32", 80, 1530) is None  # Volta has no TF32
    assert peaks.gemm_peak_tflops("9.0", "fp8", 132, 1830) == pytest.approx(1978.9, abs=0.1)
    assert peaks.gemm_peak_tflops("8.0", "fp8", 108, 1410) is None  # Ampere has no FP8
    # B200: 148 SMs, dense BF16 2.25 and FP8 4.5 PFLOP/s at 1860 MHz, FP64 37 TFLOP/s near
    # 1950 MHz
    assert peaks.gemm_peak_tflops("10.0", "bf16", 148, 1860) == pytest.approx(2255.1, abs=0.1)
    assert peaks.gemm_peak_tflops("10.0", "fp8", 148, 1860) == pytest.approx(4510.2, abs=0.1)
    assert peaks.gemm_peak_tflops("10.0", "fp64", 148, 1950) == pytest.approx(36.9, abs=0.05)
    # GeForce parts run the tensor precisions at half their architecture's rate: RTX 4090 (128
    # SMs, 2520 MHz) TF32 82.6, BF16 165.2, FP8 330.3, FP32 82.6; RTX 3090 (82 SMs, 1695 MHz)
    # FP16 71; the RTX 6000 Ada (142 SMs, 2505 MHz) FP16 364.2, at the full rate
    for prec, tflops in (("tf32", 82.6), ("bf16", 165.2), ("fp8", 330.3), ("fp32", 82.6)):
        assert peaks.gemm_peak_tflops("8.9", prec, 128, 2520, "NVIDIA GeForce RTX 4090") == \
            pytest.approx(tflops, abs=0.1)
    assert peaks.gemm_peak_tflops("8.6", "fp16", 82, 1695, "NVIDIA GeForce RTX 3090") == \
        pytest.approx(71.2, abs=0.1)
    assert peaks.gemm_peak_tflops("8.9", "fp16", 142, 2505, "NVIDIA RTX 6000 Ada Generation") \
        == pytest.approx(364.2, abs=0.1)
    assert peaks.memory_peak_gbs(0, 5120) is None


# ------------------------------------------------------------------ the CUDA program

def test_the_cuda_program_compiles_and_says_no_driver(tmp_path, monkeypatch):
    try:
        tk = toolkit.find()
    except toolkit.NoToolkit as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("HPCPROBE_CACHE", str(tmp_path))
    exe = build.build(tk, ["sm_90"], None)
    assert exe.is_file() and build.build(tk, ["sm_90"], None) == exe  # cached
    assert "archs: sm_90" in (exe.parent / "fingerprint.txt").read_text()
    r = subprocess.run([str(exe), "gemm", "0", "fp4", "64", "2", "x"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "precision 'fp4' is unknown" in json.loads(r.stdout)["error"]
    if not Path("/proc/driver/nvidia/version").exists():
        r = subprocess.run([str(exe), "info"], capture_output=True, text=True)
        assert r.returncode == 4 and "no NVIDIA driver" in json.loads(r.stdout)["error"]


@pytest.fixture(scope="module")
def host_parts(tmp_path_factory):
    """The program's host-side parts against stand-ins (tests/native/host_parts.cu), built with
    the nvcc found: `run(*args)` gives the JSON it prints."""
    try:
        tk = toolkit.find()
    except toolkit.NoToolkit as exc:
        pytest.skip(str(exc))
    exe = tmp_path_factory.mktemp("host_parts") / "host_parts"
    subprocess.run([tk.nvcc, "-std=c++17", str(Path(__file__).parent / "native" /
                                                  "host_parts.cu"), "-o", str(exe), "-ldl",
                    "-lpthread"], check=True, capture_output=True)
    return lambda *args: json.loads(subprocess.run([str(exe), *map(str, args)],
                                                   capture_output=True, text=True,
                                                   check=True).stdout)


def test_nvml_readings_beside_each_figure(host_parts):
    """The program's NVML sampler and the JSON it writes, against a stand-in NVML."""
    env = host_parts("readings")
    assert env["readings"] >= 3 and (env["sm_mhz"], env["mem_mhz"]) == (1755, 2619)
    assert (env["power_w"], env["temp_c_max"], env["reasons"]) == (650.0, 61, 0x1 | 0x4)
    # the link's highest generation seen (idle gen1, gen4 under load), the system's maxima
    params = bench._env_params(env)
    assert params["throttle"] == "software power cap"  # idle is no limit
    assert [params[k] for k in bench.PCIE] == [4, 16, 5, 16, 2]  # and 2 replays
    old = host_parts("readings", "old")  # an NVML without the PCIe queries
    assert not set(bench.PCIE) & set(bench._env_params(old))


@pytest.mark.parametrize("reps", [2, 6, 11, 21])
def test_gemm_batches_are_sized_under_load(host_parts, reps):
    """A GPU idle before runs its first products at its idle clock (here 20 products ten times
    slower): the warm-up lasts a second, and the timed batches, sized from its last batch,
    together last 2 s, each 0.1 s at least. Sized from the first product, as they once were,
    they lasted a tenth of that, and NVML read the GPU three times (an H100's FP32)."""
    s = host_parts("schedule", reps, 20, 0.027, 0.0027)
    assert 1.0 <= s["warm_s"] < 2.5 and s["warm_products"] > 20
    assert len(s["batches_s"]) == reps - 1 and min(s["batches_s"]) >= 0.1
    assert 2.0 <= sum(s["batches_s"]) < 2.0 + 0.0027 * (reps - 1) + 0.1


def test_gemm_batches_of_long_products(host_parts):
    """A product longer than the warm-up (a large N on a small GPU): one product warms, and
    each timed batch is one product; products of a microsecond fill a batch without bound."""
    s = host_parts("schedule", 4, 0, 0, 1.5)
    assert (s["warm_products"], s["count"], s["batches_s"]) == (1, 1, [1.5] * 3)
    s = host_parts("schedule", 3, 0, 0, 1e-6)
    assert s["count"] == 1_000_000 and s["warm_s"] >= 1.0


def test_build_targets(monkeypatch):
    tk = toolkit.Toolkit("nvcc", "13.0", ("sm_75", "sm_80", "sm_90", "sm_120"))
    assert build.targets(tk, ["sm_90", "sm_80"]) == ("sm_80", "sm_90")
    assert build.targets(tk, ["sm_130"]) == ("sm_120",)  # newer: the newest PTX, JIT-compiled
    assert build.targets(tk, []) == ("sm_75",)
    with pytest.raises(UserError, match="cannot build for sm_70"):
        build.targets(tk, ["sm_70"])
    assert toolkit.arch_of("9.0") == "sm_90" and toolkit.arch_of("12.1") == "sm_121"


# ------------------------------------------------------------------ measurement plumbing

STAND_IN = '''#!{python}
"""A stand-in for hpb_gpu: the program's JSON lines for a fictional device (test input)."""
import json, os, sys
a = sys.argv[1:]
env = {{"readings": int(os.environ.get("STAND_IN_READINGS", "3")), "sm_mhz": 1500,
        "sm_mhz_min": 1400, "sm_mhz_max": 1600, "mem_mhz": 1593,
        "power_w": 300.0, "power_w_max": 350.0, "temp_c_max": 70, "reasons": 4,
        "pcie_gen": 4, "pcie_width": 16, "pcie_gen_max": 5, "pcie_width_max": 16,
        "pcie_replays": int(os.environ.get("STAND_IN_REPLAYS", "0"))}}
if os.environ.get("STAND_IN_ENERGY"):  # the board's energy counter: joules over seconds
    env.update(zip(("energy_j", "energy_s"), map(float, os.environ["STAND_IN_ENERGY"].split())))
def out(**d): print(json.dumps(d))
if a[0] == "info" and os.environ.get("STAND_IN_NO_DRIVER"):
    out(error="no NVIDIA driver: libcuda.so.1 was not found or did not load", code=4)
    sys.exit(4)
elif a[0] == "info":
    out(driver_cuda=13000, runtime_cuda=13000, devices=1)
    cc = os.environ.get("STAND_IN_CC", "9.0")
    out(device=0, name="X", pci_bus_id="00000000:17:00.0", memory_bytes=1 << 36, sms=100,
        cc=cc, sm_khz=2000000, mem_khz=1000000, bus_width_bits=4096, l2_bytes=1 << 20,
        gemm_precisions=["fp64", "fp32", "tf32", "bf16", "fp16"] + ["fp8"] * (cc >= "8.9"))
elif a[0] == "stream":
    for size in map(int, a[2].split(",")):
        for r in range(int(a[3])):
            for k, n in (("copy", 2), ("mul", 2), ("add", 3), ("triad", 3), ("dot", 2)):
                out(test="stream", kernel=k, rep=r, array_bytes=size, bytes=n * size,
                    seconds=n * size / 5e11)
        out(test="stream", check=True, array_bytes=size, env=env)
elif a[0] == "gemm":  # fp16 fails its check, bf16 at N 2048; N 32768 runs out of memory
    rc = 0
    for n in map(int, a[3].split(",")):
        if n >= 32768:
            out(error="cudaMalloc(&C): out of memory (cudaErrorMemoryAllocation)", code=3)
            sys.exit(3)
        for r in range(int(a[4])):
            out(test="gemm", precision=a[2], n=n, rep=r, flops=2.0 * n ** 3, seconds=1e-3)
        ok = a[2] != "fp16" and (a[2], n) != ("bf16", 2048)
        out(test="gemm", precision=a[2], n=n, check=ok, env=env, cublas_version=130000)
        rc = rc or (0 if ok else 1)
    sys.exit(rc)
elif a[0] == "copy":
    for size in map(int, a[3].split(",")):
        for r in range(int(a[4])):
            out(test="copy", direction=a[2], rep=r, size=size,
                bytes=size * (2 if a[2] == "bidir" else 1), seconds=size / 2.5e10)
        out(test="copy", direction=a[2], check=True, size=size, node_asked=int(a[5]),
            node=int(a[5]), cpus=a[6], env=env)
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """The family on a recorded H100 node with the stand-in in place of the built program."""
    prog = tmp_path / "hpb_gpu"
    prog.write_text(STAND_IN.format(python=sys.executable))
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    sysfs, proc = h100_node(tmp_path)
    inv = gpus.from_smi(H100.read_text(), sysfs, proc)
    monkeypatch.setattr(bench, "inventory", lambda o: inv)
    monkeypatch.setattr(toolkit, "find", lambda: toolkit.Toolkit("nvcc", "13.0", ("sm_90",)))
    monkeypatch.setattr(build, "build", lambda tk, archs, driver: prog)
    monkeypatch.setattr(toolkit, "cublas", lambda tk, asked: "libcublas.so.13")
    monkeypatch.setattr(bench, "_compute_caps", lambda inv: ["9.0"])


def test_a_node_whose_driver_does_not_load(stand_in, monkeypatch, tiny):
    monkeypatch.setenv("STAND_IN_NO_DRIVER", "1")
    with pytest.raises(UserError, match="no NVIDIA driver"):  # hpcprobe gpu: exit 2
        bench.run(RunContext(tiny, profiles.get("quick"), "scalar", standalone=True),
                  bench.GpuOptions())
    ctx = RunContext(tiny, profiles.get("quick"), "scalar")  # hpcprobe run: the rest goes on
    bench.run(ctx, bench.GpuOptions())
    assert ctx.metrics == [] and ctx.errors == []
    assert ctx.warnings[0].startswith("gpu: skipped: CUDA: no NVIDIA driver")


def test_a_gemm_whose_clock_nvml_hardly_read_gets_no_share_of_peak(stand_in, monkeypatch,
                                                                   tiny):
    """Two readings may be the idle clock at the products' start: the rate counts, its share of
    a peak at that clock does not."""
    monkeypatch.setenv("STAND_IN_READINGS", "2")
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",), gpu_precisions=("bf16",),
                                    gpu_gemm_n=(1024,)))
    assert [m.name for m in ctx.metrics] == ["gemm"]
    assert ctx.metrics[0].params["nvml_readings"] == 2
    assert ctx.warnings == ["gpu: GPU0 GEMM bf16 N=1024: NVML read the SM clock 2 time(s) "
                            "while the products ran, fewer than 3: no share of peak"]


@pytest.mark.parametrize("energy,watts,source", [
    ("620 2.0", 310.0, bench.COUNTER),  # the counter over 2 s: 310 W, not the samples' 300
    ("31 0.1", 300.0, bench.BOARD),  # 0.1 s: the counter may not have moved; the samples
    ("", 300.0, bench.BOARD)])  # no counter (before Volta): the samples
def test_the_boards_power_is_its_energy_counters_where_it_counts(stand_in, monkeypatch, tiny,
                                                                energy, watts, source):
    monkeypatch.setenv("STAND_IN_ENERGY", energy)
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",), gpu_precisions=("bf16",),
                                    gpu_gemm_n=(1024,)))
    [gemm] = [m for m in ctx.metrics if m.name == "gemm"]
    [power] = [m for m in ctx.metrics if m.name == "power"]
    [per] = [m for m in ctx.metrics if m.name == "gemm_per_watt"]
    assert power.samples == [watts] and power.params["domains"] == source == per.params["domains"]
    assert per.samples == pytest.approx([s / watts for s in gemm.samples])
    assert ("energy_j" in gemm.params) == bool(energy)
    assert set(bench.ENERGY) <= bench.NOT_JOINED  # how it was read, not which figure it is


def test_gpu_info_says_what_cuda_sees(stand_in, capsys, monkeypatch):
    assert bench.info(bench.GpuOptions()) == 0
    out = capsys.readouterr().out
    assert "GPU0 as CUDA sees it (device 0): compute capability 9.0, 100 SMs, L2 1 MiB, " \
        "memory bus 4096 bits" in out
    monkeypatch.setenv("STAND_IN_NO_DRIVER", "1")  # the inventory stands; CUDA's line says why
    assert bench.info(bench.GpuOptions()) == 0
    out = capsys.readouterr().out
    assert "GPU0: NVIDIA H100" in out and "CUDA: no NVIDIA driver" in out


def test_no_cublas_fails_the_gemm_alone(stand_in, monkeypatch, tiny):
    def none(tk, asked):
        raise UserError("no cuBLAS library found")

    monkeypatch.setattr(toolkit, "cublas", none)
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("stream", "gemm"),
                                    gpu_stream_size=1 << 20))
    assert ctx.errors == ["gpu: GPU0 gemm: no cuBLAS library found"]
    assert {m.name for m in ctx.metrics} == {"bandwidth", "bandwidth_peak",
                                            "bandwidth_fraction", "power",
                                            "bandwidth_per_watt"}


def test_figures_count_only_after_their_check(stand_in, tmp_path, tiny):
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    o = bench.GpuOptions(gpu_precisions=("bf16", "fp16"), gpu_stream_size=4 << 20)
    bench.run(ctx, o)
    # fp16's check failed: its figures are gone, said in one error; the rest counted
    assert [e for e in ctx.errors if "fp16" in e and "failed its check" in e] == ctx.errors
    gemm = [m for m in ctx.metrics if m.name == "gemm"]
    assert [m.params["precision"] for m in gemm] == ["bf16"]
    assert len(gemm[0].samples) == 5  # quick: five after the dropped warm-up
    assert gemm[0].params["nvml_readings"] == 3  # enough for its clock to count
    assert gemm[0].params["sm_mhz"] == 1500 and gemm[0].params["throttle"] == \
        "software power cap"
    [model] = [m for m in ctx.metrics if m.name == "gemm_peak"]
    assert model.samples == [pytest.approx(4096 * 100 * 1500e6 / 1e12)]  # at the SM clock read
    [g] = ctx.provenance["gpu"]["gpus"]  # the inventory, with what CUDA says of the GPU
    assert (g["bus_id"], g["cuda"]["sms"], g["cuda"]["cc"]) == ("0000:17:00.0", 100, "9.0")
    bw = [m for m in ctx.metrics if m.name == "bandwidth"]
    assert sorted({m.params["array_bytes"] for m in bw}) == [1 << 20, 2 << 20, 4 << 20]
    triad = next(m for m in bw if m.params["kernel"] == "triad" and
                 m.params["array_bytes"] == 4 << 20)
    assert triad.summary.median == pytest.approx(500.0)
    [frac] = [m for m in ctx.metrics if m.name == "bandwidth_fraction" and
              m.params["kernel"] == "triad"]
    assert frac.summary.median == pytest.approx(100 * 500 / 1024)  # 2 x 1 GHz x 4096 bit / 8
    [bpeak] = [m for m in ctx.metrics if m.name == "bandwidth_peak"]
    assert bpeak.samples == [pytest.approx(1024)] and \
        bpeak.params["model_source"] == peaks.MEMORY_SOURCE  # said, as the GEMM's model is
    copies = [m for m in ctx.metrics if m.name == "copy"]
    assert {m.params["direction"] for m in copies} == {"h2d", "d2h", "bidir"}
    assert all(m.params["local"] and m.params["numa"] == 0 for m in copies)
    # against the link NVML read during the copies: gen4 x16, 31.5 GB/s each way
    fraction = {m.params["direction"]: m.summary.median for m in ctx.metrics
                if m.name == "copy_fraction"}
    assert fraction == pytest.approx({"h2d": 100 * 25 / 31.5077, "d2h": 100 * 25 / 31.5077,
                                      "bidir": 100 * 50 / 63.0154}, rel=1e-4)
    # the board's power NVML read while each figure ran (300 W here), and the figure per watt
    per = {m.name: m for m in ctx.metrics if m.name.endswith("_per_watt")}
    assert set(per) == {"bandwidth_per_watt", "gemm_per_watt", "copy_per_watt"}
    [t_per] = [m for m in ctx.metrics if m.name == "bandwidth_per_watt" and
               m.params["kernel"] == "triad" and m.params["array_bytes"] == 4 << 20]
    assert t_per.unit == "GB/s/W" and t_per.summary.median == pytest.approx(500.0 / 300)
    assert t_per.params["domains"] == bench.BOARD
    assert {m.samples[0] for m in ctx.metrics if m.name == "power"} == {300.0}
    [slow] = [w for w in ctx.warnings if "PCIe" in w]  # said once, not once per figure
    assert "ran at gen4 x16 during the copies; the GPU and its slot allow gen5 x16" in slow
    run = Run("0123456789ab", "2026-11-23T00:00:00+00:00", "h", "quick", ["gpu"],
              {**provenance.collect(tiny, "scalar"), **ctx.provenance}, tiny.to_dict(),
              ctx.metrics)
    results.validate(run.to_dict())  # the one schema; stored and read back whole
    with Store.open(tmp_path / "r.sqlite") as st:
        st.save(run)
        back = st.load("0123456789ab")
    assert [(m.name, m.params, m.samples) for m in back.metrics] == \
        [(m.name, m.params, m.samples) for m in run.metrics]
    titles = [b.title for b in views.tables(run)]  # type: ignore[union-attr]
    assert len(titles) == 3 and "BabelStream" in titles[0]
    copy_rows = views.tables(run)[2].rows  # type: ignore[union-attr]
    assert copy_rows[0][-2:] == ["79/79/79", "gen4 x16 (of gen5 x16)"]
    assert [slug for slug, _, _ in views.figures([run])] == ["gpu-bandwidth", "gpu-gemm"]


def test_the_verify_scripts_summary_reads_a_runs_document(stand_in, tmp_path, tiny):
    """scripts/gpu_summary.py, which scripts/gpu-verify.sh runs on a lent GPU node, on a
    document of the family's measurements (the stand-in's)."""
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("stream", "gemm"), gpu_precisions=("bf16",),
                                    gpu_gemm_n=(1024, 4096), gpu_stream_size=4 << 20))
    run = Run("0123456789ab", "2026-11-23T00:00:00+00:00", "h", "quick", ["gpu"],
              {**provenance.collect(tiny, "scalar"), **ctx.provenance}, tiny.to_dict(),
              ctx.metrics, warnings=["gpu: a warning"])
    doc = tmp_path / "gpu.json"
    results.write_json(run, doc)
    script = Path(__file__).parents[1] / "scripts" / "gpu_summary.py"
    r = subprocess.run([sys.executable, str(script), str(doc)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{len(run.metrics)} gpu metrics; 0 error(s), 1 warning(s)"
    assert "gemm bf16 n=4096: " in lines[1] and "TFLOP/s, nvml_readings 3, sm_mhz 1500" in \
        lines[1]
    [copy] = [ln for ln in lines if ln.startswith("bandwidth: best ")]
    assert "GB/s of " in copy and "kernel=" in copy and "bus_id" not in copy
    assert lines[-1] == "  gpu: a warning"


def test_a_failed_check_or_an_error_discards_only_its_size(stand_in, tiny):
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",), gpu_precisions=("bf16", "fp32"),
                                    gpu_gemm_n=(1024, 2048, 32768)))
    # bf16: N 1024 counted, N 2048 failed its check, N 32768 ran out of memory; fp32: 1024
    # and 2048 counted
    got = sorted((m.params["precision"], m.params["n"]) for m in ctx.metrics
                 if m.name == "gemm")
    assert got == [("bf16", 1024), ("fp32", 1024), ("fp32", 2048)]
    assert len(ctx.errors) == 3, ctx.errors
    assert '"n": 2048' in ctx.errors[0] and "failed its check" in ctx.errors[0]
    assert all("out of memory" in e for e in ctx.errors[1:])
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",), gpu_precisions=("fp16",)))
    assert ctx.metrics == [] and len(ctx.errors) == 1 and "failed its check" in ctx.errors[0]


def test_a_gpu_due_for_a_reset_is_a_health_finding_of_its_run(stand_in, monkeypatch,
                                                              tmp_path, tiny):
    xml = H100.read_text().replace("<remapped_row_pending>No", "<remapped_row_pending>Yes")
    inv = gpus.from_smi(xml, *h100_node(tmp_path / "due"))
    inv = gpus.with_xids(inv, "[ 97.1] NVRM: Xid (PCI:0000:17:00): 63, Row Remapper: New row "
                              "marked for remapping, reset gpu to activate.\n", "dmesg")
    monkeypatch.setattr(bench, "inventory", lambda o: inv)
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("copy",)))
    [f] = ctx.findings  # for the cluster verdict, which drains the node; the Xid is no finding
    assert (f["benchmark"], f["kind"], f["item"]) == ("gpu", results.HEALTH, "GPU0")
    assert "row remapping is pending" in f["message"]
    assert f"gpu: {f['message']} [HP301 drain]" in ctx.warnings
    assert [w for w in ctx.warnings if "Xid 63" in w] == \
        [f"gpu: {health.xid_notes(inv.gpus[0])[0]}"]
    assert ctx.metrics and ctx.provenance["gpu"]["gpus"][0]["health"]["remap_pending"]
    assert ctx.provenance["gpu"]["gpus"][0]["xids"][0]["code"] == 63


def _fabric(state: str, status: str, health: str = "<bandwidth>N/A</bandwidth>") -> str:
    """nvidia-smi's <fabric> element (R550 and later) with this registration state and status."""
    return (f"<fabric><state>{state}</state><status>{status}</status><cliqueId>N/A</cliqueId>"
            f"<clusterUuid>N/A</clusterUuid><health>{health}</health></fabric>")


#: The fabric's health of a GPU it serves well. The element names are a public recording's
#: (whose values read N/A); the values (Full, True/False) are those of another project's
#: `nvidia-smi -q` fixture of a GB200, not a recording; "Degraded" is NVML's word for the mask.
FABRIC_OK = ("<bandwidth>Full</bandwidth><route_recovery_in_progress>False"
             "</route_recovery_in_progress><route_unhealthy>False</route_unhealthy>"
             "<access_timeout_recovery>False</access_timeout_recovery>")


def test_the_fabric_s_health_of_a_registered_gpu():
    """A registered GPU whose route the fabric calls unhealthy, or whose bandwidth degraded, is
    a finding; while the fabric recovers a route the finding says so; N/A says nothing."""
    assert health.findings(_one_gpu(_fabric("Completed", "Success", FABRIC_OK))) == []
    na = re.sub(r">(Full|False)<", ">N/A<", FABRIC_OK)
    assert health.findings(_one_gpu(_fabric("N/A", "N/A", na))) == []
    unhealthy = FABRIC_OK.replace("<route_unhealthy>False", "<route_unhealthy>True")
    [f] = health.findings(_one_gpu(_fabric("Completed", "Success", unhealthy)))
    assert f.startswith("GPU0 (0000:3b:00.0): the NVLink fabric reports a route to it "
                        "unhealthy: its NVLink traffic")
    assert "nvidia-smi nvlink -e -i 0" in f
    both = unhealthy.replace("Full", "Degraded").replace(
        "<route_recovery_in_progress>False", "<route_recovery_in_progress>True")
    [f] = health.findings(_one_gpu(_fabric("Completed", "Success", both)))
    assert "a route to it unhealthy and its bandwidth degraded (while recovering: read it " \
        "again in a minute)" in f


def test_a_gpu_the_nvlink_fabric_has_not_registered():
    """On an NVSwitch system CUDA refuses a GPU until Fabric Manager registers it with the
    fabric; elsewhere the element reads N/A and says nothing."""
    waiting = _one_gpu(_fabric("In Progress", "N/A"), "570.124.06")
    assert (waiting.health.fabric_state, waiting.health.fabric_status) == ("In Progress", None)
    [f] = health.findings(waiting)
    assert f.startswith("GPU0 (0000:3b:00.0): it is not registered with the NVLink fabric "
                        "(fabric state 'In Progress'): CUDA refuses it work")
    assert "nvidia-fabricmanager" in f
    [failed] = health.findings(_one_gpu(_fabric("Completed", "Insufficient Resources")))
    assert "registration ended in 'Insufficient Resources'" in failed
    for state, status in (("Completed", "Success"), ("N/A", "N/A"),
                          ("Not Supported", "Not Supported")):
        g = _one_gpu(_fabric(state, status))
        assert health.findings(g) == [] and g.health.fabric_state in (None, "Completed")


def test_health_is_recorded_where_cuda_refuses_the_gpu(stand_in, monkeypatch, tmp_path, tiny):
    """`hpcprobe run` on a node whose GPU the fabric has not registered: CUDA cannot start
    (the family is skipped), and the finding that says why is the run's all the same."""
    xml = H100.read_text().replace("</gpu>", _fabric("In Progress", "N/A") + "</gpu>")
    inv = gpus.from_smi(xml, *h100_node(tmp_path / "fabric"))
    monkeypatch.setattr(bench, "inventory", lambda o: inv)
    monkeypatch.setenv("STAND_IN_NO_DRIVER", "1")
    ctx = RunContext(tiny, profiles.get("quick"), "scalar")
    bench.run(ctx, bench.GpuOptions())
    assert ctx.metrics == [] and ctx.errors == []
    [f] = ctx.findings
    assert f["kind"] == results.HEALTH and "not registered with the NVLink fabric" in \
        f["message"]
    assert any(w.startswith("gpu: skipped: CUDA") for w in ctx.warnings)


def test_pcie_replays_while_measuring_are_a_warning(stand_in, monkeypatch, tiny):
    monkeypatch.setenv("STAND_IN_REPLAYS", "5")  # the link retried while the copies ran
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("copy",)))
    assert {m.params["pcie_replays"] for m in ctx.metrics if m.name == "copy"} == {5}
    [w] = [w for w in ctx.warnings if "retried transfers" in w]  # once, not once per figure
    assert w.startswith("gpu: GPU0's PCIe link retried") and "riser" in w


def test_fp8_only_where_the_gpu_has_it(stand_in, monkeypatch, tiny):
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",)))
    precs = {m.params["precision"] for m in ctx.metrics if m.name == "gemm"}
    assert precs == {"fp64", "fp32", "tf32", "bf16", "fp8"}  # fp16: its check failed
    [fp8] = [m for m in ctx.metrics if m.name == "gemm_peak" and
             m.params["precision"] == "fp8"]
    assert fp8.samples == [pytest.approx(8192 * 100 * 1500e6 / 1e12)]
    monkeypatch.setenv("STAND_IN_CC", "8.0")  # an A100: no FP8
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    bench.run(ctx, bench.GpuOptions(gpu_tests=("gemm",), gpu_precisions=("fp8", "bf16")))
    assert {m.params["precision"] for m in ctx.metrics} == {"bf16"}
    assert ctx.warnings == ["gpu: GPU0 (compute capability 8.0) has no fp8 GEMM: skipped"]


def test_stream_sizes_halve_to_one_mib():
    assert bench.stream_sizes(8 << 20) == [1 << 20, 2 << 20, 4 << 20, 8 << 20]


# ------------------------------------------------------------------ the command line

@pytest.fixture
def recorded(tmp_path) -> list[str]:
    sysfs, _ = a100_node(tmp_path)
    return ["--gpu-smi", str(A100), "--gpu-sysfs", str(sysfs)]


def test_nvlinks_from_nvidia_smi_topo(a100, tmp_path):
    links = gpus.parse_topo((DATA / "a100-8gpu-2s-topo.txt").read_text())
    assert len(links) == 56 and set(links.values()) == {"NV12"}  # every pair, both ways
    assert locality.gpu_matrix(a100)[0][:3] == ["GPU0", "X", "PIX"]  # no topo: PCIe alone
    r = hpcprobe("gpu", "info", "--gpu-smi", str(A100), "--gpu-sysfs", str(tmp_path / "sys"),
                 "--gpu-topo", str(DATA / "a100-8gpu-2s-topo.txt"))
    assert r.code == 0 and "GPU0: X NV12 NV12 NV12 NV12 NV12 NV12 NV12;" in r.out, r.out
    assert gpus.parse_topo("\t\x1b[4mGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n") == \
        {(0, 1): "NV18", (1, 0): "NV18"}


NVLINK = DATA / "a100-8gpu-2s-nvlink.txt"


def test_nvlink_state_from_nvidia_smi():
    """`nvidia-smi nvlink -s` (its layout as public reports of inactive links show it)."""
    v100 = ("GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-x)\n         Link 0: 25.781 GB/s\n"
            "         Link 1: <inactive>\n         Link 2: 25.781 GB/s\n"
            "GPU 4: Tesla V100-SXM2-32GB (UUID: GPU-y)\n")
    assert gpus.parse_nvlink_status(v100) == {3: (25.781, None, 25.781), 4: ()}
    got = gpus.parse_nvlink_status(NVLINK.read_text())
    assert sorted(got) == list(range(8)) and got[0] == (25.0,) * 12
    assert [k for k, x in enumerate(got[4]) if x is None] == [7, 11]


def test_nvlinks_down_where_the_siblings_have_them_up(a100, tmp_path):
    """GPU4 has 10 of its 12 NVLinks up where its siblings have 12: a finding with the fix; a
    node whose GPUs all leave the same links unused (bridges) has none."""
    inv = gpus.with_nvlinks(a100, NVLINK.read_text())
    assert inv.gpus[4].nvlinks.count(None) == 2
    assert inv.gpus[4].to_dict()["nvlink_gbs"][7] is None
    assert health.nvlink_state(replace(inv.gpus[0], nvlinks=(25.0, 26.562, None))) == \
        "NVLinks 2 of 3 up at 25-26.562 GB/s (inactive: 2)"
    assert health.nvlink_state(a100.gpus[0]) is None  # not read
    [down] = [f for f in health.findings(inv.gpus[4], inv) if "NVLinks" in f]
    assert down.startswith("GPU4 (0000:87:00.0): 2 of its 12 NVLinks are inactive (link(s) "
                           "7, 11) where its siblings have 12 active") and "nvlink -e -i 4" in down
    assert not [f for g in inv.gpus if g.index != 4 for f in health.findings(g, inv)
                if "NVLinks" in f]
    assert not [f for f in health.findings(inv.gpus[4]) if "NVLinks" in f]  # no node: no peers
    bridged = gpus.with_nvlinks(a100, NVLINK.read_text().replace(
        "Link 7: 25 GB/s", "Link 7: <inactive>").replace("Link 11: 25 GB/s", "Link 11: <inactive>"))
    assert not [f for g in bridged.gpus for f in health.findings(g, bridged) if "NVLinks" in f]
    alone = gpus.with_nvlinks(replace(a100, gpus=a100.gpus[4:5]), NVLINK.read_text())
    assert health.inactive_nvlinks(alone.gpus[0], alone) == ([], 10)  # no sibling to judge by
    # on the command line: said by gpu info, a health finding of gpu check (exit 1)
    recorded = ["--gpu-smi", str(A100), "--gpu-sysfs", str(tmp_path / "sys")]
    r = hpcprobe("gpu", "info", *recorded, "--gpu-nvlink", str(NVLINK))
    assert r.code == 0 and "GPU4 (0000:87:00.0): 2 of its 12 NVLinks are inactive" in r.out, r.out
    assert "row(s) remapped; NVLinks 12 of 12 up at 25 GB/s; processes: none" in r.out
    assert "NVLinks 10 of 12 up at 25 GB/s (inactive: 7, 11); processes" in r.out
    r = hpcprobe("gpu", "check", *recorded, "--gpu-nvlink", str(NVLINK),
                 env={"CUDA_VISIBLE_DEVICES": "0"})
    assert r.code == 1 and "WARNING: GPU4 (0000:87:00.0): 2 of its 12 NVLinks" in r.out, r.out
    r = hpcprobe("gpu", "info", *recorded)
    assert r.code == 0 and "NVLinks are inactive" not in r.out
    topo = DATA / "a100-8gpu-2s-topo.txt"  # another command's output
    assert_user_error(hpcprobe("gpu", "info", *recorded, "--gpu-nvlink", str(topo)),
                      f"{topo}: not `nvidia-smi nvlink -s` output")
    assert_user_error(hpcprobe("gpu", "info", "--gpu-nvlink", str(NVLINK)),
                      "--gpu-nvlink: a recorded node's output, to go with that node's --gpu-smi")


def test_a_real_h100_in_a_vm(tmp_path):
    """nvidia-smi's own document of an H100 SXM in a VM (driver 580.159.04), whose sysfs says
    NUMA node -1 and whose `nvidia-smi nvlink -s` printed nothing: healthy, no finding, its
    NUMA domain said as unknown (it read 'NUMA None'), the empty NVLink output accepted as
    no NVLinks (it was refused as another command's output)."""
    sysfs = vm_node(tmp_path)
    empty = tmp_path / "nvlink.txt"
    empty.write_text("")
    recorded = ["--gpu-smi", str(H100_VM), "--gpu-sysfs", str(sysfs), "--gpu-nvlink", str(empty)]
    r = hpcprobe("gpu", "info", *recorded)
    assert r.code == 0, r.err
    assert re.search(r"GPU0 NVIDIA H100 80GB HBM3 +0000:00:06.0 +- +\? +0-1023", r.out), r.out
    assert "79.6 GiB, Hopper, max SM 1980 MHz, memory 2619 MHz" in r.out
    assert "ECC enabled, 0 uncorrectable error(s) since the driver loaded, 0 over its life, " \
        "0 row(s) remapped; processes: none" in r.out
    assert "WARNING" not in r.out and "setting:" not in r.out and " up at " not in r.out
    r = hpcprobe("gpu", "check", *recorded, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert r.code == 0 and "GPU0 0000:00:06.0 (NUMA ?, local CPUs 0-1023)" in r.out, r.out
    assert "NOTE" not in r.out and "no GPU needs a reset or replacing" in r.out
    empty.write_text("\n")
    assert hpcprobe("gpu", "info", *recorded).code == 0


def test_peer_copies_show_their_link():
    base = {"device": 0, "gpu": "A100", "bus_id": "0000:07:00.0", "bytes": 1 << 28,
            "peer_access": True}
    run = Run("0123456789ab", "2026-11-24T00:00:00+00:00", "h", "quick", ["gpu"], {}, {}, [
        results.Metric("gpu", "p2p", "GB/s", {**base, "peer_bus_id": "0000:0f:00.0",
                                              "link": "NV12"}, [230.0, 231.0, 232.0]),
        results.Metric("gpu", "p2p", "GB/s", {**base, "peer_bus_id": "0000:87:00.0",
                                              "link": "SYS", "peer_access": False},
                       [20.0, 21.0, 22.0])])
    [t] = views.tables(run)
    assert t.columns[:3] == ["from", "to", "link"]  # type: ignore[union-attr]
    assert [r[:3] + r[4:5] for r in t.rows] == [  # type: ignore[union-attr]
        ["GPU0", "0000:0f:00.0", "NV12", "yes"],
        ["GPU0", "0000:87:00.0", "SYS", "no (through the host)"]]


def _gpus(tiny, gemm: dict[int, float], l2_triad: dict[int, float],
          local: dict[int, float] | None = None) -> RunContext:
    """A node's GPUs of one model with these GEMM, L2-resident triad and local host-copy rates
    (the rest alike), five samples each within +-0.4 % (test input). GPUs 0 and 1 sit on NUMA
    0, the others on NUMA 1; each copies from both, the remote domain slower; GPU0's remote
    copy slower still."""
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    local = local or dict.fromkeys(gemm, 54.0)
    for d, rate in gemm.items():
        base = {"device": d, "gpu": "NVIDIA H100 80GB HBM3", "bus_id": f"0000:{d + 16:02x}:00.0",
                "sm_mhz": 1400 + d, "throttle": "software power cap"}
        near = int(d >= 2)
        for name, unit, params, at in (
                ("gemm", "TFLOP/s", {"precision": "bf16", "n": 8192}, rate),
                ("bandwidth", "GB/s", {"kernel": "triad", "array_bytes": 1 << 20}, l2_triad[d]),
                ("bandwidth", "GB/s", {"kernel": "triad", "array_bytes": 400 << 20}, 2850.0 + d),
                ("copy", "GB/s", {"direction": "h2d", "bytes": 256 << 20, "numa": near,
                                  "local": True}, local[d]),
                ("copy", "GB/s", {"direction": "h2d", "bytes": 256 << 20, "numa": 1 - near,
                                  "local": False}, 30.0 if d == 0 else 40.0)):
            ctx.metrics.append(Metric("gpu", name, unit, {**base, **params},
                                      [at * (1 + 0.002 * k) for k in range(-2, 3)]))
    return ctx


def _node(capped: int | None = None) -> gpus.Inventory:
    """Four GPUs, GPU `capped`'s power limit 600 W of its default 700 W (test input)."""
    g = _one_gpu("")
    return gpus.Inventory(tuple(replace(g, index=d, config=gpus.Config(
        power_limit_w=600.0 if d == capped else 700.0, default_power_limit_w=700.0))
        for d in range(4)))


def test_a_gpu_slower_than_its_siblings_is_said(tiny):
    ctx = _gpus(tiny, {0: 700.0, 1: 701.0, 2: 630.0, 3: 703.0},
                {0: 900.0, 1: 400.0, 2: 900.0, 3: 900.0}, {0: 54.0, 1: 54.2, 2: 53.8, 3: 44.0})
    bench._siblings(ctx, _node(capped=2))
    # GPU2's GEMM is 10 % below the GPUs' median; GPU3's copy from its own domain (NUMA 1)
    # 18 % below the GPUs' from theirs. Not judged: GPU1's triad in L2, GPU0's remote copy.
    assert [w.split(":")[1] for w in ctx.warnings] == [
        " GPU2 is slower than this node's other 3 NVIDIA H100 80GB HBM3",
        " GPU3 is slower than this node's other 3 NVIDIA H100 80GB HBM3"]
    assert "gpu.gemm n=8192 precision=bf16 -10.1%" in ctx.warnings[0]
    assert "gpu.copy bytes=268435456 direction=h2d local -18.4%" in ctx.warnings[1]
    # GPU2's power limit is below its default: the cause said; GPU3's settings are not
    assert ctx.warnings[0].endswith("its power limit or application clocks, set below their "
                                    "defaults, cap its clock [HP302 watch]")
    assert ctx.warnings[1].endswith("the clocks, power and throttle reasons beside its "
                                    "figures say why [HP302 watch]")
    f = ctx.findings[0]
    assert (f["kind"], f["item"]) == (bench.SLOWER_THAN_SIBLINGS, "GPU2")
    [e] = f["evidence"]
    assert e["value"] == 630.0 and e["median"] == 700.5
    [j] = f["judgements"]  # the peers judge's record: GPU2 below its siblings' median
    assert (j["subject"], j["basis"], j["mark"], j["value"], j["expected"]) == \
        ("GPU2", "peers", "below", 630.0, 700.5)
    alike = _gpus(tiny, {0: 700.0, 1: 701.0, 2: 699.0, 3: 703.0}, dict.fromkeys(range(4), 900.0))
    bench._siblings(alike, _node())
    assert alike.warnings == [] and alike.findings == []
    two = _gpus(tiny, {0: 700.0, 1: 630.0}, {0: 900.0, 1: 900.0})  # two GPUs: not judged
    bench._siblings(two, _node())
    assert two.warnings == [] and two.findings == []


def test_the_plan_says_how_a_gemm_figure_is_timed(stand_in, tiny):
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    [gemm] = [x for x in bench.plan(ctx, bench.GpuOptions(gpu_precisions=("bf16",)))
              if "cuBLAS GEMM bf16" in x]
    assert gemm.endswith("at N 4096, 5 samples each: batches spanning 2 s after a warm-up of "
                         "1 s or more")


def test_a_gpu_in_mig_mode_is_said_and_not_measured(stand_in, monkeypatch, tmp_path, tiny):
    xml = H100.read_text().replace("<current_mig>Disabled", "<current_mig>Enabled")
    sysfs, proc = h100_node(tmp_path / "mig")
    inv = gpus.from_smi(xml, sysfs, proc)
    assert inv.gpus[0].mig and "MIG mode on: GPU0" in locality.render(inv)
    monkeypatch.setattr(bench, "inventory", lambda o: inv)
    ctx = RunContext(tiny, profiles.get("quick"), "scalar", standalone=True)
    assert "in MIG mode, not measured" in bench.plan(ctx, bench.GpuOptions())[0]
    bench.run(ctx, bench.GpuOptions())
    assert ctx.metrics == [] and len(ctx.errors) == 1 and "is in MIG mode" in ctx.errors[0]


def test_a_recorded_nodes_jobs_come_from_its_own_procfs(tmp_path, recorded):
    r = hpcprobe("gpu", "info", *recorded)  # no procfs given: jobs unknown, never this node's
    assert r.code == 0 and "4242 /usr/bin/python3" in r.out and "(job " not in r.out, r.out
    r = hpcprobe("gpu", "info", *recorded, "--gpu-procfs", str(tmp_path / "proc"))
    assert r.code == 0 and "4242 /usr/bin/python3 (job 101)" in r.out, r.out


def test_gpu_info_and_check_on_a_recorded_node(recorded):
    r = hpcprobe("gpu", "info", *recorded)
    assert r.code == 0, r.err
    assert "GPU7 NVIDIA A100-SXM4-80GB  0000:bd:00.0  x16 16 GT/s (max x16 16 GT/s)  1" in \
        r.out and "mlx5_3 (PIX)" in r.out
    # this process runs on CPUs of NUMA 0: GPU0 is local; GPU1's two processes (their jobs
    # unknown: no procfs tree was given) share it while others idle
    r = hpcprobe("gpu", "check", *recorded, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert r.code == 1 and "GPUs (CUDA_VISIBLE_DEVICES): GPU0 0000:07:00.0" in r.out, r.out
    assert "WARNING: GPU1 (0000:0f:00.0) runs 2 compute processes" in r.out
    assert "WARNING: GPU3 (0000:4e:00.0): a memory row remapping is pending" in r.out
    assert "WARNING: GPU5 (0000:90:00.0): a row remapping failed" in r.out
    r = hpcprobe("gpu", "check", *recorded, env={"CUDA_VISIBLE_DEVICES": "4"})
    if set(os.sched_getaffinity(0)) - set(range(64, 128)):
        assert "is local to NUMA 1 (CPUs 64-127)" in r.out, r.out


def test_a_setting_alone_is_a_note_with_exit_0(tmp_path):
    """An H100 whose power limit was lowered and persistence mode turned off: `gpu check`
    notes both and exits 0 (settings someone may have chosen; a health check must not drain
    the node for them)."""
    sysfs, _ = h100_node(tmp_path)
    smi = tmp_path / "h100.xml"
    smi.write_text(H100.read_text().replace(
        "<current_power_limit>700.00 W", "<current_power_limit>500.00 W").replace(
        "<persistence_mode>Enabled", "<persistence_mode>Disabled"))
    r = hpcprobe("gpu", "check", "--gpu-smi", str(smi), "--gpu-sysfs", str(sysfs),
                 env={"CUDA_VISIBLE_DEVICES": "0"})
    assert r.code == 0, r.out + r.err
    assert "NOTE: GPU0 (0000:17:00.0): its power limit is 500 W, below its default 700 W" \
        in r.out and "NOTE: GPU0 (0000:17:00.0): persistence mode is off" in r.out
    r = hpcprobe("gpu", "info", "--gpu-smi", str(smi), "--gpu-sysfs", str(sysfs))
    assert r.code == 0 and "  setting: GPU0 (0000:17:00.0): its power limit is 500 W" in r.out


def test_gpu_bad_input_is_one_line(recorded, tmp_path):
    for args, needle in ((["--gpu-devices", "9"], "--gpu-devices 9: no such GPU"),
                         (["--gpu-tests", "fft"], "--gpu-tests 'fft' is unknown"),
                         (["--gpu-precisions", "fp4"], "--gpu-precisions 'fp4' is unknown"),
                         (["--gpu-gemm-n", "200000"], "needs 894.1 GiB on GPU0"),
                         (["--gpu-gemm-n", "0"], "0: give a matrix order of at least 1"),
                         (["--gpu-gemm-n", "4096,4096"], "4096 given twice"),
                         (["--gpu-stream-size", "1KiB"], "at least 1 MiB")):
        assert_user_error(hpcprobe("gpu", *recorded, *args, "--dry-run"), needle)
    assert_user_error(hpcprobe("gpu", *recorded, "--gpu-devices", "0,x"), "GPU indices")
    r = hpcprobe("gpu", *recorded, "--gpu-devices", "0,7", "--gpu-tests", "copy", "--dry-run")
    assert r.code == 0 and "GPU0 NVIDIA A100" in r.out and "GPU7 NVIDIA A100" in r.out, r.err
    assert "GPU1" not in r.out
    assert_user_error(hpcprobe("gpu", "info", "--gpu-smi", str(tmp_path / "none.xml")),
                      "cannot read it")
    bad = tmp_path / "bad.xml"
    bad.write_text("<nvidia_smi_log><gpu>")
    assert_user_error(hpcprobe("gpu", "info", "--gpu-smi", str(bad)), "not nvidia-smi XML")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this node has a driver")
def test_no_gpu_is_one_line_and_other_families_go_on(tmp_path):
    assert_user_error(hpcprobe("gpu"), "no GPU: no NVIDIA driver")
    r = hpcprobe("run", "gpu", "--dry-run")
    assert r.code == 0 and "skipped: no GPU" in r.out
    # a name the family does not know is the mistake to say, GPU or not
    assert_user_error(hpcprobe("gpu", "--gpu-precisions", "fp4"), "'fp4' is unknown")
    assert_user_error(hpcprobe("run", "gpu", "--gpu-tests", "fft", "--dry-run"),
                      "'fft' is unknown")
    # hpcprobe run's GPU family, asked for no GPU by name, skipped over it before
    assert_user_error(hpcprobe("run", "gpu", "--gpu-precisions", "fp4", "--dry-run"),
                      "'fp4' is unknown")


# ------------------------------------------------------------------ on a GPU (skipped without)

def _live_gpu() -> str | None:
    """Why the runtime tests cannot run here, or None where they can."""
    inv = gpus.discover()
    if not inv.gpus:
        return f"no GPU: {inv.none_why}"
    try:
        toolkit.find()
    except toolkit.NoToolkit as exc:
        return str(exc)
    return None


NO_LIVE_GPU = _live_gpu()
live = pytest.mark.skipif(NO_LIVE_GPU is not None, reason=str(NO_LIVE_GPU))


@live
def test_on_a_gpu_every_figure_is_checked_and_stored(tmp_path):
    _, doc = run_json(tmp_path, "gpu", "--profile", "quick", "--gpu-devices", "0",
                      "--gpu-stream-size", "64MiB", "--gpu-gemm-n", "1024",
                      "--gpu-copy-size", "16MiB", "--no-store")
    got = {(m["name"], m["params"].get("precision") or m["params"].get("kernel") or
            m["params"].get("direction")) for m in doc["metrics"]}
    for kernel in ("copy", "mul", "add", "triad", "dot"):
        assert ("bandwidth", kernel) in got
    for direction in ("h2d", "d2h", "bidir"):
        assert ("copy", direction) in got
    assert ("gemm", "fp64") in got and ("gemm", "bf16") in got
    for m in doc["metrics"]:
        assert m["samples"] and all(x > 0 for x in m["samples"]), m
        if m["name"] in ("bandwidth", "gemm", "copy"):  # NVML read while it ran
            assert "sm_mhz" in m["params"] or "nvml" in m["params"], m["params"]
    assert doc["provenance"]["gpu"]["cublas"]["path"]


@live
def test_on_a_gpu_the_programs_own_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCPROBE_CACHE", str(tmp_path))
    tk = toolkit.find()
    exe = str(build.build(tk, [toolkit.arch_of(c) for c in bench._compute_caps(
        gpus.discover())], toolkit.driver_version()))
    info = [json.loads(x) for x in subprocess.run([exe, "info"], capture_output=True,
                                                  text=True).stdout.splitlines()]
    assert info[0]["devices"] >= 1 and "fp64" in info[1]["gemm_precisions"]
    r = subprocess.run([exe, "stream", "99", str(1 << 20), "2"], capture_output=True, text=True)
    assert r.returncode == 2 and "device 99 does not exist" in r.stdout
    huge = info[1]["memory_bytes"]  # three arrays of the whole memory: out of memory
    r = subprocess.run([exe, "stream", "0", str(huge), "2"], capture_output=True, text=True)
    assert r.returncode == 3 and "out of memory" in r.stdout.lower(), r.stdout


def test_the_gpus_health_is_a_node_fact_with_its_faults_and_state(a100):
    """The GPU fact as a run keeps it: how many of which model (the state a check compares)
    and each fault, one line each (a check drains for them), its header line; a node without
    the driver keeps why, and adds no line and no state (a CPU node's header names no GPU)."""
    from hpcprobe.machine import facts

    kept = health.stored(a100)
    jsonschema.validate(kept, health.SCHEMA)
    provenance = {health.KEY: kept}
    assert facts.state(provenance) == {"GPUs": f"8 x {a100.gpus[0].name}"}
    found = facts.faults(provenance)
    assert found and {f.split()[0] for f in found} == {"GPU3", "GPU5", "GPU6"}  # as above
    [line] = [x for x in facts.lines(provenance) if x.startswith("GPUs:")]
    assert f"8 x {a100.gpus[0].name}; {len(found)} fault(s) to act on" in line
    none = health.stored(gpus.Inventory((), none_why="no NVIDIA driver"))
    jsonschema.validate(none, health.SCHEMA)
    assert none == {"read": False, "why": "no NVIDIA driver"}
    assert facts.faults({health.KEY: none}) == [] and facts.state({health.KEY: none}) == {}
    assert not [x for x in facts.lines({health.KEY: none}) if x.startswith("GPUs")]
    # a recorded /sys tree (check --sysfs) has no nvidia-smi of its node: not read
    assert health.fact(Path("/tmp"))["read"] is False


def test_a_check_drains_for_a_gpu_fault_read_from_nvidia_smi(tmp_path):
    """The whole path: a check on a node whose nvidia-smi (a stand-in on PATH, the recorded
    8-GPU A100 node's answer) reports GPUs due for a reset fails, each fault a reason of the
    health kind with its fix; the run's header names the GPUs; no nvidia-smi: no GPU line."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f'#!/bin/sh\n[ "$*" = "-q -x" ] && exec cat {A100}\nexit 9\n')
    smi.chmod(0o755)
    env = {"PATH": f"{smi.parent}:{os.environ['PATH']}"}
    r = hpcprobe("check", "--state-only", "--no-store", "--counters",
                 str(tmp_path / "counters.json"), "--json", str(tmp_path / "c.json"), env=env)
    assert r.code == 1 and r.out.startswith("FAIL"), r.out + r.err
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["run"]["provenance"][health.KEY]["gpus"].startswith("8 x ")
    reasons = " ".join(doc["reasons"])
    assert "GPU3 (" in reasons and "reset the GPU" in reasons
