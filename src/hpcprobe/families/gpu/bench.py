"""The GPU family's options, plan and measurement: our CUDA program (built on first use) run per
device for BabelStream's kernels over a ladder of array sizes, cuBLAS GEMM per precision,
pinned host<->device copies from each NUMA domain in turn and peer copies; each test's check
must pass before its figures count, and the clocks, power and throttle reasons NVML read during
it are stored beside each figure, the GPUs' health as the run's findings. `gpu info` shows the
inventory and locality, `gpu check` a job's GPU binding, GPU sharing and the GPUs' health on
this node."""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from hpcprobe.analysis.compare import NotJoined
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import MeasurementError, OptionError, UserError
from hpcprobe.common.units import format_bytes
from hpcprobe.cuda import build, toolkit
from hpcprobe.families.gpu import locality, peaks
from hpcprobe.judge import peers
from hpcprobe.machine import gpuhealth as health
from hpcprobe.machine import gpus
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, option, per_watt_at
from hpcprobe.results.findings import HEALTH, Finding, kind
from hpcprobe.results.model import Metric
from hpcprobe.tools import command
from hpcprobe.tools.inrank import RANK_VARS

TESTS = ("stream", "gemm", "copy", "p2p")

DIRECTIONS = ("h2d", "d2h", "bidir")
#: Throttle ("clocks event") reasons as NVML's bit mask names them.
REASONS = {0x1: "idle", 0x2: "applications clocks", 0x4: "software power cap",
           0x8: "hardware slowdown", 0x10: "sync boost", 0x20: "software thermal",
           0x40: "hardware thermal", 0x80: "power brake", 0x100: "display clock"}
#: Reasons that lower the clock below what the load could have (idle and sync boost do not).
LIMITING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
#: The PCIe link NVML read during a measurement: the highest generation and width it ran at,
#: the most the GPU and the system both allow, and its replays (link-level retries after
#: errors) while it ran.
PCIE = ("pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_replays")


@dataclass(frozen=True)
class Settings:
    reps: int  # timed repetitions (samples) of each figure, after one warm-up
    gemm_n: tuple[int, ...]
    copy_sizes: tuple[int, ...]


SETTINGS = {
    "quick": Settings(5, (4096,), (64 << 20,)),
    "default": Settings(10, (8192,), (1 << 20, 16 << 20, 256 << 20)),
    "thorough": Settings(20, (4096, 8192, 16384), (64 << 10, 1 << 20, 16 << 20, 256 << 20)),
}


def _devices(text: str) -> tuple[int, ...]:
    """GPU indices (0 and up), comma-separated, or "all"."""
    if text == "all":
        return ()
    items = [x.strip() for x in text.split(",")]
    if not all(x.isdigit() for x in items):
        raise argparse.ArgumentTypeError(f"{text}: give GPU indices such as 0 or 0,2, or all")
    return tuple(int(x) for x in items)


@dataclass(frozen=True)
class GpuOptions:
    gpu_devices: tuple[int, ...] = option(Flag(
        "--gpu-devices", "GPUs by nvidia-smi index, e.g. 0 or 0,2 (default: all)",
        parse=_devices, metavar="I[,I…]"), ())
    gpu_tests: tuple[str, ...] | None = option(Flag(
        "--gpu-tests", f"which GPU tests: {', '.join(TESTS)} (default: all; p2p needs two "
        "GPUs)", parse=options.names, metavar="T[,T…]"))
    gpu_precisions: tuple[str, ...] | None = option(Flag(
        "--gpu-precisions", f"GEMM precisions: {', '.join(peaks.PRECISIONS)} (default: all)",
        parse=options.names, metavar="P[,P…]"))
    gpu_gemm_n: tuple[int, ...] | None = option(Flag(
        "--gpu-gemm-n", "GEMM order(s) N (N x N x N; default quick 4096, default 8192, "
        "thorough 4096,8192,16384)", parse=options.counts("a matrix order", "4096,8192"),
        metavar="N[,N…]"))
    gpu_stream_size: int | None = option(Flag(
        "--gpu-stream-size", "BabelStream's largest array, e.g. 1GiB (default: 8x the L2 "
        "and at least 256 MiB; the sweep halves it down to 1 MiB)", parse=options.size,
        metavar="SIZE"))
    gpu_copy_size: int | None = option(Flag(
        "--gpu-copy-size", "host<->device copy size, e.g. 256MiB (default: a ladder per "
        "profile)", parse=options.size, metavar="SIZE"))
    gpu_reps: int | None = option(Flag(
        "--gpu-reps", "timed repetitions of each GPU figure (default quick 5, default 10, "
        "thorough 20)", parse=options.at_least(2, "a repetition count"), metavar="N"))
    gpu_cublas: str | None = option(Flag(
        "--gpu-cublas", "the cuBLAS library to load (default: the toolkit's, the loader's, or "
        "pip's nvidia-cublas)", metavar="PATH"))
    gpu_smi: str | None = option(Flag(
        "--gpu-smi", "gpu info/check/plan: a recorded `nvidia-smi -q -x` file instead of this "
        "node's", metavar="FILE.xml"))
    gpu_sysfs: str = option(Flag(
        "--gpu-sysfs", "gpu info/check/plan: the sysfs tree beside --gpu-smi (default /sys)",
        metavar="DIR"), "/sys")
    gpu_topo: str | None = option(Flag(
        "--gpu-topo", "gpu info/check/plan: a recorded `nvidia-smi topo -m` output beside "
        "--gpu-smi, for the NVLinks between its GPUs", metavar="FILE"))
    gpu_nvlink: str | None = option(Flag(
        "--gpu-nvlink", "gpu info/check/plan: a recorded `nvidia-smi nvlink -s` output beside "
        "--gpu-smi, for the state of each GPU's NVLinks", metavar="FILE"))
    gpu_procfs: str | None = option(Flag(
        "--gpu-procfs", "gpu info/check: the procfs tree beside --gpu-smi, for the job of each "
        "GPU process (default: /proc on this node; none for a recorded file)", metavar="DIR"))
    gpu_dmesg: str | None = option(Flag(
        "--gpu-dmesg", "gpu info/check/plan: a kernel log (dmesg, journalctl -k) to read the "
        "GPUs' Xid events from (default: this node's dmesg; none for --gpu-smi)",
        metavar="FILE"))
    timeout_s: float | None = option(options.TIMEOUT, note="on the CUDA program's run "
                                     "(default 1800)")


def inventory(o: GpuOptions) -> gpus.Inventory:
    """This node's GPUs, or a recorded node's (whose processes' jobs and Xid events come from
    its own procfs tree and kernel log, never this node's)."""
    proc = o.gpu_procfs or (None if o.gpu_smi else "/proc")
    if not o.gpu_smi and (given := [f for f, v in (("--gpu-topo", o.gpu_topo),
                                                   ("--gpu-nvlink", o.gpu_nvlink)) if v]):
        raise OptionError(f"{' and '.join(given)}: a recorded node's output, to go with that "
                          "node's <gpu_smi> FILE.xml (this node's own is read from nvidia-smi)")
    return gpus.discover(o.gpu_smi, o.gpu_sysfs, proc, o.gpu_topo, o.gpu_dmesg, o.gpu_nvlink)


def _chosen(o: GpuOptions, inv: gpus.Inventory) -> list[gpus.Gpu]:
    """The GPUs asked for (a missing one is a user error)."""
    by_index = {g.index: g for g in inv.gpus}
    for i in o.gpu_devices:
        if i not in by_index:
            raise OptionError(f"<gpu_devices> {i}: no such GPU; this node has "
                              f"{len(inv.gpus)} (0..{len(inv.gpus) - 1})")
    return [by_index[i] for i in o.gpu_devices] if o.gpu_devices else list(inv.gpus)


def _check_names(o: GpuOptions) -> None:
    """Unknown tests and precisions: the user's mistake, said first (on a node without a GPU
    too, where the run would otherwise say only that)."""
    for t in o.gpu_tests or ():
        if t not in TESTS:
            raise OptionError(f"<gpu_tests> {t!r} is unknown; tests: {', '.join(TESTS)}")
    for p in o.gpu_precisions or ():
        if p not in peaks.PRECISIONS:
            raise OptionError(f"<gpu_precisions> {p!r} is unknown; precisions: "
                              f"{', '.join(peaks.PRECISIONS)}")


def _tests_of(o: GpuOptions, n_gpus: int) -> tuple[str, ...]:
    asked = o.gpu_tests or TESTS
    if "p2p" in (o.gpu_tests or ()) and n_gpus < 2:
        raise OptionError("<gpu_tests> p2p needs two GPUs; this run has "
                          f"{n_gpus}")
    return tuple(t for t in asked if t != "p2p" or n_gpus > 1)


def stream_sizes(largest: int) -> list[int]:
    """BabelStream's array sizes: the largest, halved down to 1 MiB (the L2-resident end)."""
    sizes, s = [], largest
    while s >= 1 << 20:
        sizes.append(s)
        s //= 2
    return sorted(sizes) or [largest]


def _fit(what: str, need: int, g: gpus.Gpu) -> None:
    """A size that cannot fit in the GPU's memory is the user's mistake, said before running."""
    if g.memory_bytes is not None and need > 0.9 * g.memory_bytes:
        raise UserError(f"{what} needs {format_bytes(need)} on GPU{g.index}, which has "
                        f"{format_bytes(g.memory_bytes)}: ask for less")


def setup(ctx: RunContext, o: GpuOptions, inv: gpus.Inventory
          ) -> tuple[list[gpus.Gpu], tuple[str, ...], Settings]:
    devs = _chosen(o, inv)
    tests = _tests_of(o, len(devs))
    s = SETTINGS[ctx.profile.name]
    if o.gpu_cublas and not os.path.isfile(o.gpu_cublas):
        raise OptionError(f"<gpu_cublas> {o.gpu_cublas}: no such file")
    for g in devs:
        if o.gpu_stream_size is not None:
            if o.gpu_stream_size < 1 << 20:
                raise OptionError(f"<gpu_stream_size> {format_bytes(o.gpu_stream_size)}: at least "
                                  "1 MiB")
            _fit("--gpu-stream-size (three arrays)", 3 * o.gpu_stream_size, g)
        for n in o.gpu_gemm_n or s.gemm_n:
            if n < 16:
                raise OptionError(f"<gpu_gemm_n> {n}: at least 16")
            _fit(f"--gpu-gemm-n {n} (three FP64 matrices)", 3 * 8 * n * n, g)
        if o.gpu_copy_size is not None:
            _fit("--gpu-copy-size (two buffers)", 2 * o.gpu_copy_size, g)
    return devs, tests, s


def plan(ctx: RunContext, o: GpuOptions | None) -> list[str]:
    o = o or GpuOptions()
    _check_names(o)
    inv = inventory(o)
    if not inv.gpus:
        if ctx.standalone or o.gpu_devices or o.gpu_tests:
            raise UserError(f"no GPU: {inv.none_why}")
        return [f"skipped: no GPU ({inv.none_why})"]
    devs, tests, s = setup(ctx, o, inv)
    reps = o.gpu_reps or s.reps
    lines = []
    for g in devs:
        head = f"GPU{g.index} {g.name} ({g.bus_id}, NUMA {g.numa})"
        if g.mig:
            lines.append(f"{head}: in MIG mode, not measured (hpcprobe measures whole GPUs)")
            continue
        if "stream" in tests:
            largest = format_bytes(o.gpu_stream_size) if o.gpu_stream_size else \
                "8x L2 (>= 256 MiB)"
            lines.append(f"{head}: BabelStream copy/mul/add/triad/dot, arrays 1 MiB .. "
                         f"{largest}, {reps} samples each")
        if "gemm" in tests:
            lines.append(f"{head}: cuBLAS GEMM {', '.join(o.gpu_precisions or peaks.PRECISIONS)} "
                         f"(those the GPU runs: TF32 from sm_80, FP8 from sm_89) at N "
                         f"{', '.join(map(str, o.gpu_gemm_n or s.gemm_n))}, {reps} samples "
                         "each: batches spanning 2 s after a warm-up of 1 s or more")
        if "copy" in tests:
            nodes = [str(node) for node, _ in _numa_domains(ctx.topo)]
            lines.append(f"{head}: pinned {'/'.join(DIRECTIONS)} from NUMA "
                         f"{', '.join(nodes)} in turn, "
                         f"{', '.join(format_bytes(x) for x in _copy_sizes(o, s))}")
        if "p2p" in tests:
            lines.append(f"{head}: peer copies to the other GPUs")
    return lines


def _copy_sizes(o: GpuOptions, s: Settings) -> tuple[int, ...]:
    return (o.gpu_copy_size,) if o.gpu_copy_size else s.copy_sizes


# ------------------------------------------------------------------ running the program

def _run(exe: str, args: list[str], timeout: float) -> tuple[list[dict[str, Any]], int | None,
                                                              str]:
    """The program's JSON lines, its exit code, its output's last lines."""
    ran = command.run([exe, *args], env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, timeout=timeout)
    docs = []
    for text in ran.output.splitlines():
        if text.startswith("{"):
            try:
                docs.append(json.loads(text))
            except ValueError:
                continue
    return docs, ran.code, ran.tail()


def _failure(docs: list[dict[str, Any]], code: int | None, tail: str, what: str) -> str:
    err = next((d["error"] for d in docs if "error" in d), None)
    if code is None:
        return f"{what} timed out; its last lines: {tail}"
    return f"{what}: {err or f'exit {code}; its last lines: {tail}'}"


#: NVML readings (5 ms apart) a measurement needs before the SM clock or PCIe link NVML read
#: counts as its own: an idle GPU runs slower clocks and links, and a reading taken as a short
#: measurement starts may not see them speed up.
MIN_READINGS = 3


def _well_read(env: dict[str, Any]) -> bool:
    """Whether NVML read often enough during a measurement for its clock, power or link to
    count."""
    return int(env.get("readings", 0)) >= MIN_READINGS


#: The figures whose board power is kept beside them, and each per watt; the source named
PER_WATT_FIGURES = ("bandwidth", "gemm", "copy")
BOARD = "GPU board (NVML power samples every 5 ms)"
COUNTER = "GPU board (NVML energy counter)"
#: The board's energy counter (Volta on) updates every 20-100 ms: over a measurement this long
#: (s) it gives the mean power (joules over seconds); a shorter one takes the samples' mean
COUNTER_MIN_S = 1.0
#: What NVML's energy counter gave over a measurement, kept beside its figures
ENERGY = ("energy_j", "energy_s")


def board_power(params: dict[str, Any]) -> tuple[float | None, str]:
    """The board's mean power while a figure was measured, and its source: the energy counter
    where it ran long enough to count, else the mean of NVML's power samples (None where too
    few were read)."""
    joules, seconds = params.get("energy_j"), params.get("energy_s")
    if isinstance(joules, (int, float)) and isinstance(seconds, (int, float)) \
            and seconds >= COUNTER_MIN_S and joules > 0:
        return joules / seconds, COUNTER
    if int(params.get("nvml_readings", 0)) < MIN_READINGS:
        return None, BOARD
    return params.get("power_w"), BOARD


def _env_params(env: dict[str, Any]) -> dict[str, Any]:
    """NVML's readings during a measurement, as the params stored beside its figure."""
    if "sm_mhz" not in env:
        return {"nvml": env.get("nvml", "not read")}
    reasons = int(env.get("reasons", 0))
    return {"nvml_readings": env["readings"], "sm_mhz": env["sm_mhz"],
            "sm_mhz_min": env["sm_mhz_min"], "mem_mhz": env["mem_mhz"], "power_w": env["power_w"],
            "power_w_max": env["power_w_max"], "temp_c_max": env["temp_c_max"],
            "throttle": ",".join(v for k, v in REASONS.items() if reasons & k & LIMITING)
            or "none", **{k: env[k] for k in (*PCIE, *ENERGY) if k in env}}


def _samples(docs: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple[Any, ...],
                                                                        list[float]]:
    """Per (the key's fields), the rates of the repetitions after the first (the warm-up):
    bytes/s for transfers, FLOP/s for GEMM."""
    out: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for d in docs:
        if "rep" not in d or d["rep"] == 0 or d["seconds"] <= 0:
            continue
        work = d.get("flops", d.get("bytes"))
        out[tuple(d[k] for k in key)].append(work / d["seconds"])
    return out


@dataclass
class _Device:
    """What the CUDA runtime says of one GPU (the `info` line)."""

    cuda_index: int
    sms: int
    cc: str
    sm_khz: int
    mem_khz: int
    bus_width_bits: int
    l2_bytes: int
    gemm_precisions: tuple[str, ...]  # those this device runs (FP8 from sm_89, TF32 sm_80)


def _cuda_devices(exe: str, timeout: float) -> tuple[dict[str, _Device], dict[str, Any]]:
    docs, code, tail = _run(exe, ["info"], timeout)
    if code == 4:  # no usable driver or device: the node's state, said as such
        raise UserError(_failure(docs, code, tail, "CUDA"))
    if code != 0:
        raise MeasurementError(_failure(docs, code, tail, "the GPU program (info)"))
    head = next((d for d in docs if "driver_cuda" in d), {})
    out = {}
    for d in docs:
        if "device" in d and "pci_bus_id" in d:
            out[gpus.bus_id(d["pci_bus_id"])] = _Device(
                d["device"], d["sms"], d["cc"], d["sm_khz"], d["mem_khz"], d["bus_width_bits"],
                d["l2_bytes"], tuple(d["gemm_precisions"]))
    return out, head


def run(ctx: RunContext, o: GpuOptions | None) -> None:
    o = o or GpuOptions()
    _check_names(o)
    inv = inventory(o)
    timeout = o.timeout_s or 1800.0
    driver = inv.driver or toolkit.driver_version()
    # the node's GPUs, measured or not, and also where CUDA cannot run: what needs an
    # administrator (an unregistered fabric is why CUDA refuses them)
    for g in inv.gpus:
        for f in health.findings(g, inv):
            ctx.find(Finding("gpu", HEALTH, f, {"item": f"GPU{g.index}"}))
        # events and settings: said, not judged
        ctx.warnings += [f"gpu: {n}" for n in (*health.xid_notes(g), *health.config_notes(g))]
    try:  # no GPU, driver, nvcc or build: the GPU family alone does not run
        if not inv.gpus:
            raise UserError(f"no GPU: {inv.none_why}")
        tk, exe, cuda, head = _program(inv, driver, timeout)
    except UserError as exc:
        if ctx.standalone or o.gpu_devices or o.gpu_tests:
            raise
        ctx.warnings.append(f"gpu: skipped: {exc}")
        return
    devs, tests, s = setup(ctx, o, inv)
    built = tk.to_dict()
    locality.GPU.put(ctx.provenance, locality.GpuUsed(
        driver, head.get("driver_cuda"), head.get("runtime_cuda"), built["nvcc"],
        built["release"], built["archs"],
        [{**g.to_dict(), "cuda": asdict(cuda[g.bus_id])} if g.bus_id in cuda
         else g.to_dict() for g in devs]))
    ctx.progress.start("gpu", len(devs) * len(tests))
    for g in devs:
        dev = cuda.get(g.bus_id)
        if g.mig:  # CUDA would run on one instance and report the GPU's bus id
            ctx.errors.append(f"gpu: GPU{g.index} ({g.bus_id}) is in MIG mode: CUDA sees its "
                              "instances, not the GPU, and hpcprobe measures whole GPUs; "
                              f"measure it with MIG off (nvidia-smi -i {g.index} -mig 0)")
            continue
        if dev is None:
            ctx.errors.append(f"gpu: GPU{g.index} ({g.bus_id}) is not visible to CUDA here "
                              "(CUDA_VISIBLE_DEVICES?)")
            continue
        # the first repetition is the warm-up, dropped
        t = _Target(ctx, o, s, exe, inv, g, dev, cuda, (o.gpu_reps or s.reps) + 1, timeout)
        for test in tests:
            try:
                TEST_RUNNERS[test](t)
            except MeasurementError as exc:  # this test's figures are discarded, others go on
                ctx.errors.append(f"gpu: GPU{g.index} {test}: {exc}")
            ctx.progress.advance(f"gpu GPU{g.index} {test}")
    _siblings(ctx, inv)


#: The params that say where and under which clocks a figure was taken, not what it is.
NOT_JOINED = frozenset({"gpu", "bus_id", "nvml_readings", "sm_mhz", "sm_mhz_min", "mem_mhz",
                        "power_w", "power_w_max", "temp_c_max", "throttle", "nvml", "cpus",
                        "buffer_numa", "peer_access", "mem_khz", "bus_width_bits", "cc", "sms",
                        "flops_per_sm_clock", "model_source", *PCIE, *ENERGY})

#: The figures a node's GPUs of one model are judged against each other on, and the param of
#: which only the largest value is (small arrays sit in L2 and small copies in start-up costs:
#: noisy, and not what a GPU's health shows in). Host copies: each GPU's from its own NUMA
#: domain (the local ones, whichever domain that is), as the others' remote copies cross
#: different distances on a node whose GPUs are not spread evenly.
SIBLING_FIGURES = {"gemm": None, "bandwidth": "array_bytes", "copy": "bytes"}
SIBLINGS = kind("slower than its siblings", "a GPU slower than the node's other GPUs of its model",
    code="HP302", action="watch")
SLOWER_THAN_SIBLINGS = SIBLINGS.name


def _siblings(ctx: RunContext, inv: gpus.Inventory) -> None:
    """A node's GPUs of one model against each other, by the peers judge's rules (robust
    z beyond 3.5 and 4 % worse than the others' median, the best end of its CI too; three GPUs
    at least): a GPU slower than its siblings is a warning and a finding, with its worst
    figures (a lower power cap, a throttling or failing GPU, a link trained narrower)."""
    mine = [m for m in ctx.metrics if m.benchmark == "gpu" and m.name in SIBLING_FIGURES]
    largest = {name: max(m.params[key] for m in mine if m.name == name)
               for name, key in SIBLING_FIGURES.items()
               if key and any(m.name == name for m in mine)}
    by_model: dict[str, dict[int, list[Metric]]] = defaultdict(lambda: defaultdict(list))
    for m in mine:
        key = SIBLING_FIGURES[m.name]
        if (key is None or m.params[key] == largest[m.name]) and m.params.get("local", True):
            by_model[m.params["gpu"]][m.params["device"]].append(m)
    ignore = NotJoined({"gpu": NOT_JOINED | {"device", "numa"}})
    by_index = {g.index: g for g in inv.gpus}
    for model, devices in by_model.items():
        order = sorted(devices)
        if len(order) < 3:
            continue
        th = peers.Thresholds()
        rows = peers.outliers([peers.figures(devices[d], ignore) for d in order], th)
        for d, worse in zip(order, rows, strict=True):
            if worse:
                why = ("its power limit or application clocks, set below their defaults, "
                       "cap its clock" if by_index[d].config.capped else "the clocks, power "
                       "and throttle reasons beside its figures say why")
                msg = (f"GPU{d} is slower than this node's other {len(order) - 1} {model}: "
                       f"{'; '.join(x.text() for x in worse[:3])}; {why}")
                ctx.find(Finding("gpu", SIBLINGS, msg, {
                    "item": f"GPU{d}", "evidence": [x.to_dict() for x in worse],
                    "judgements": [x.judgement(f"GPU{d}", th).to_dict() for x in worse]}))


def _program(inv: gpus.Inventory, driver: str | None, timeout: float
             ) -> tuple[toolkit.Toolkit, str, dict[str, _Device], dict[str, Any]]:
    """Our GPU program, built (once) for the GPUs present, and what CUDA says of each GPU (by
    bus id) and of itself (driver and runtime versions)."""
    tk = toolkit.find()
    exe = str(build.build(tk, [toolkit.arch_of(c) for c in _compute_caps(inv)], driver))
    return (tk, exe, *_cuda_devices(exe, timeout))


def _compute_caps(inv: gpus.Inventory) -> list[str]:
    """Each GPU's compute capability as nvidia-smi reports it (empty where it cannot)."""
    ran = command.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                      timeout=60) if inv.source == "nvidia-smi" else None
    if ran is None or not ran.ok:
        return []
    return sorted({x.strip() for x in ran.output.splitlines() if x.strip()[:1].isdigit()})


@dataclass(frozen=True)
class _Target:
    """One GPU under test, with what every test of it needs."""

    ctx: RunContext
    o: GpuOptions
    s: Settings
    exe: str
    inv: gpus.Inventory
    gpu: gpus.Gpu
    dev: _Device
    cuda: dict[str, _Device]  # every GPU CUDA sees, by bus id (the peers)
    reps: int  # the program's repetitions, the warm-up included
    timeout: float

    @property
    def base(self) -> dict[str, Any]:
        """The params every figure of this GPU carries."""
        return {"device": self.gpu.index, "gpu": self.gpu.name, "bus_id": self.gpu.bus_id}

    def run(self, test: str, what: str, key: str, *args: object
            ) -> tuple[list[dict[str, Any]], dict[Any, dict[str, Any]]]:
        """The program's `test` on this GPU: its sample lines and its passed check lines, both
        of the sizes (or orders N: the check lines' `key`) whose check passed. A failed check
        or an error discards that size's figures, said in the run's errors; the test's
        figures go only when no size passed."""
        docs, code, tail = _run(self.exe, [test, str(self.dev.cuda_index), *map(str, args)],
                                self.timeout)
        checks = [d for d in docs if d.get("test") == test and "check" in d]
        passed = {c[key]: c for c in checks if c["check"]}
        failed = [f"{what} failed its check ({json.dumps(c)}); its figures are discarded"
                  for c in checks if not c["check"]]
        if any("error" in d for d in docs) or (code != 0 and not failed):
            failed.append(_failure(docs, code, tail, what))
        if not passed:
            raise MeasurementError("; ".join(failed))
        self.ctx.errors.extend(f"gpu: GPU{self.gpu.index} {f}" for f in failed)
        return [d for d in docs if "rep" in d and d.get(key) in passed], passed

    def add(self, name: str, unit: str, params: dict[str, Any], samples: list[float]) -> None:
        figure = Metric("gpu", name, unit, {**self.base, **params}, samples)
        self.ctx.metrics.append(figure)
        if name in PER_WATT_FIGURES:
            self.ctx.metrics += per_watt_at(figure, *board_power(params))
        if params.get("pcie_replays"):
            self.warn("PCIe link retried transfers while it was measured (NVML's replay "
                      "counter rose, pcie_replays beside the figures): link errors, from a "
                      "marginal riser, slot or contact; its host<->device figures may be low")

    def warn(self, text: str) -> None:
        """A warning about this GPU, said once however many figures show it."""
        warning = f"gpu: GPU{self.gpu.index}'s {text}"
        if warning not in self.ctx.warnings:
            self.ctx.warnings.append(warning)


def _sizes(sizes: Sequence[int]) -> str:
    return ",".join(map(str, sizes))


def _stream(t: _Target) -> None:
    largest = t.o.gpu_stream_size or max(8 * t.dev.l2_bytes, 256 << 20)
    if t.gpu.memory_bytes is not None:
        largest = min(largest, int(0.9 * t.gpu.memory_bytes) // 3)
    sizes = stream_sizes(largest // 8 * 8)
    docs, checks = t.run("stream", "BabelStream", "array_bytes", _sizes(sizes), t.reps)
    env = {size: _env_params(c["env"]) for size, c in checks.items()}
    peak = peaks.memory_peak_gbs(t.dev.mem_khz, t.dev.bus_width_bits)
    if peak is not None:
        t.add("bandwidth_peak", "GB/s", {"mem_khz": t.dev.mem_khz,
                                         "bus_width_bits": t.dev.bus_width_bits,
                                         "model_source": peaks.MEMORY_SOURCE}, [peak])
    for (kernel, array), samples in _samples(docs, ("kernel", "array_bytes")).items():
        params = {"kernel": kernel, "array_bytes": array, **env[array]}
        gbs = [x / 1e9 for x in samples]
        t.add("bandwidth", "GB/s", params, gbs)
        if peak is not None and array == max(sizes):
            t.add("bandwidth_fraction", "%", params, [100 * x / peak for x in gbs])


def _gemm(t: _Target) -> None:
    try:
        lib = toolkit.cublas(toolkit.find(), t.o.gpu_cublas)
    except UserError as exc:  # the other tests need no cuBLAS
        raise MeasurementError(str(exc)) from None
    failed = []
    for prec in t.o.gpu_precisions or peaks.PRECISIONS:
        if prec not in t.dev.gemm_precisions:  # FP8 from sm_89, TF32 from sm_80
            if t.o.gpu_precisions:
                t.ctx.warnings.append(f"gpu: GPU{t.gpu.index} (compute capability {t.dev.cc}) "
                                      f"has no {prec} GEMM: skipped")
            continue
        try:
            docs, checks = t.run("gemm", f"GEMM {prec}", "n", prec,
                                 _sizes(t.o.gpu_gemm_n or t.s.gemm_n), t.reps, lib)
        except MeasurementError as exc:
            failed.append(str(exc))
            continue
        kept = locality.GPU.of(t.ctx.provenance) or locality.GpuUsed()
        locality.GPU.put(t.ctx.provenance, replace(kept, cublas={
            "path": lib, "version": next(iter(checks.values())).get("cublas_version")}))
        env = {n: c["env"] for n, c in checks.items()}
        for (_, n), samples in _samples(docs, ("precision", "n")).items():
            params = {"precision": prec, "n": n, **_env_params(env[n])}
            tf = [x / 1e12 for x in samples]
            t.add("gemm", "TFLOP/s", params, tf)
            clock = env[n].get("sm_mhz")
            if not clock:
                continue
            if not _well_read(env[n]):
                t.ctx.warnings.append(
                    f"gpu: GPU{t.gpu.index} GEMM {prec} N={n}: NVML read the SM clock "
                    f"{env[n]['readings']} time(s) while the products ran, fewer than "
                    f"{MIN_READINGS}: no share of peak")
                continue
            model = peaks.gemm_peak_tflops(t.dev.cc, prec, t.dev.sms, clock, t.gpu.name)
            if model is None:
                continue
            t.add("gemm_peak", "TFLOP/s",
                  {"precision": prec, "n": n, "cc": t.dev.cc, "sms": t.dev.sms, "sm_mhz": clock,
                   "flops_per_sm_clock": peaks.gemm_per_sm_clock(t.dev.cc, prec, t.gpu.name),
                   "model_source": peaks.SOURCE}, [model])
            t.add("gemm_fraction", "%", params, [100 * x / model for x in tf])
    if failed:
        raise MeasurementError("; ".join(failed))


def _numa_domains(topo: Topology) -> list[tuple[int, str]]:
    """Each NUMA domain's number and CPUs (a cpulist): where a host buffer and thread go."""
    return [(d.index if d.os_index is None else d.os_index, format_cpulist(d.cpus))
            for d in topo.numa_nodes]


def _copy(t: _Target) -> None:
    sizes = _copy_sizes(t.o, t.s)
    for node, cpus in _numa_domains(t.ctx.topo) or [(-1, "")]:
        for direction in DIRECTIONS:
            docs, by_size = t.run("copy", f"{direction} copy from NUMA {node}", "size",
                                  direction, _sizes(sizes), t.reps, node, cpus)
            for c in by_size.values():
                if node >= 0 and c["node"] != node:
                    t.ctx.warnings.append(f"gpu: GPU{t.gpu.index} {direction}: the buffer asked "
                                          f"on NUMA {node} landed on {c['node']}")
            local = t.gpu.numa_node is None or node < 0 or node == t.gpu.numa_node
            for (_, size), samples in _samples(docs, ("direction", "size")).items():
                got = by_size[size]
                env = _env_params(got["env"])
                params = {"direction": direction, "bytes": size, "numa": node, "local": local,
                          "cpus": got["cpus"], "buffer_numa": got["node"], **env}
                gbs = [x / 1e9 for x in samples]
                t.add("copy", "GB/s", params, gbs)
                if _well_read(got["env"]):
                    _against_the_link(t, direction, params, gbs)


def _against_the_link(t: _Target, direction: str, params: dict[str, Any],
                      gbs: list[float]) -> None:
    """A copy figure against its PCIe link as NVML read it during the copy (both directions'
    bytes for bidir), and a warning where the link ran below what the GPU and slot allow."""
    if "pcie_gen" not in params:
        return
    gen, width = params["pcie_gen"], params["pcie_width"]
    one_way = peaks.pcie_gbs(gen, width)
    if one_way is None:
        return
    model = one_way * (2 if direction == "bidir" else 1)
    t.add("copy_peak", "GB/s", {**params, "model_source": peaks.PCIE_SOURCE}, [model])
    t.add("copy_fraction", "%", params, [100 * x / model for x in gbs])
    if gen < params["pcie_gen_max"] or width < params["pcie_width_max"]:
        t.warn(f"PCIe link ran at gen{gen} x{width} during the copies; the GPU and its slot "
               f"allow gen{params['pcie_gen_max']} x{params['pcie_width_max']} (a riser, a "
               "slot, a BIOS setting or a bad contact): its host<->device figures are bounded "
               "by that")


def _p2p(t: _Target) -> None:
    size = max(_copy_sizes(t.o, t.s))
    for peer_bus, peer in sorted(t.cuda.items(), key=lambda x: x[1].cuda_index):
        if peer.cuda_index == t.dev.cuda_index:
            continue
        docs, checks = t.run("p2p", f"peer copy to {peer_bus}", "peer", peer.cuda_index, size,
                             t.reps)
        check = checks[peer.cuda_index]
        other = next((g for g in t.inv.gpus if g.bus_id == peer_bus), None)
        for (_, moved), samples in _samples(docs, ("peer", "bytes")).items():
            t.add("p2p", "GB/s", {"peer_bus_id": peer_bus, "bytes": moved,
                                  "link": locality.link(t.inv, t.gpu, other) if other else "?",
                                  "peer_access": check["peer_access"],
                                  **_env_params(check["env"])},
                  [x / 1e9 for x in samples])


TEST_RUNNERS: dict[str, Callable[[_Target], None]] = {
    "stream": _stream, "gemm": _gemm, "copy": _copy, "p2p": _p2p}


# ------------------------------------------------------------------ gpu info, gpu check

def info(o: GpuOptions) -> int:
    """`hpcprobe gpu info`: the GPUs, their locality, the toolkit and the program."""
    inv = inventory(o)
    print(locality.render(inv))
    for g in inv.gpus:
        mem = format_bytes(g.memory_bytes) if g.memory_bytes else "?"
        procs = ", ".join(f"{p.pid} {p.name}" + (f" (job {p.job})" if p.job else "")
                          for p in g.processes) or "none"
        print(f"  GPU{g.index}: {g.name}, {mem}, {g.architecture or '?'}, max SM "
              f"{g.max_sm_mhz or '?'} MHz, memory {g.max_mem_mhz or '?'} MHz, uuid "
              f"{g.uuid}; {g.health}; "
              + (f"{links}; " if (links := health.nvlink_state(g)) else "")
              + f"processes: {procs}")
    try:
        tk = toolkit.find()
        print(f"CUDA toolkit: nvcc {tk.release} at {tk.nvcc} (architectures "
              f"{', '.join(tk.archs)})")
        print(f"cuBLAS: {toolkit.cublas(tk, o.gpu_cublas)}")
        if inv.gpus and not o.gpu_smi:  # a recorded node's GPUs are not this node's
            _, _, cuda, _ = _program(inv, inv.driver or toolkit.driver_version(),
                                     o.timeout_s or 300.0)
            for g in inv.gpus:
                if (d := cuda.get(g.bus_id)) is not None:
                    print(f"  GPU{g.index} as CUDA sees it (device {d.cuda_index}): compute "
                          f"capability {d.cc}, {d.sms} SMs, L2 {format_bytes(d.l2_bytes)}, "
                          f"memory bus {d.bus_width_bits} bits")
    except (UserError, MeasurementError) as exc:
        print(f"CUDA: {exc}")
    return 0


def check(o: GpuOptions) -> int:
    """`hpcprobe gpu check`: this process's GPUs (as its job sees them) and whether its CPUs
    are local to them; GPUs shared by several jobs while others are idle; the node's GPUs'
    health (memory errors and the resets they need, ECC off, a narrow PCIe link). Exit 1 on
    a finding, so it serves as a job prologue or health check. The Xid events of the kernel
    log are noted: they stay after the reset that cleared them, so they set no exit status;
    so are settings that cap a GPU (a lowered power limit or application clocks) or slow
    each job's start (persistence mode off), which someone may have chosen."""
    inv = inventory(o)
    if not inv.gpus:
        raise UserError(f"no GPU: {inv.none_why}")
    b = gpus.binding(inv, os.environ, sorted(os.sched_getaffinity(0)))
    rank = next((os.environ[v] for v in RANK_VARS if v in os.environ), None)
    who = f"rank {rank}" if rank is not None else f"pid {os.getpid()}"
    print(f"{who}: CPUs {format_cpulist(b.cpus)}; GPUs ({b.source}): " + (", ".join(
        f"GPU{g.index} {g.bus_id} (NUMA {g.numa}, local CPUs "
        f"{format_cpulist(g.local_cpus) or '?'})" for g in b.gpus) or "none"))
    found = [*b.warnings, *gpus.sharing(inv),
             *(f for g in inv.gpus for f in health.findings(g, inv))]
    for w in found:
        print(f"WARNING: {w}")
    for n in (n for g in inv.gpus for n in health.xid_notes(g)):  # events, not states: exit 0
        print(f"NOTE: {n} (an Xid event, logged since boot)")
    for n in (n for g in inv.gpus for n in health.config_notes(g)):  # settings: exit 0
        print(f"NOTE: {n}")
    if not found:
        print("GPU binding: every CPU of this process is local to its GPUs; no GPU shared "
              "while another is idle; no GPU needs a reset or replacing.")
    return 1 if found else 0
