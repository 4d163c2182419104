"""The hpl benchmark: the real HPL (Debian's hpcc, or the user's xhpl) driven with an input
derived from the machine, its Rmax against an Rpeak built on the clock measured under the
widest ISA's load just before, and DGEMM through the same BLAS on one core and on all, with
which kernels that BLAS chose."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcprobe import native
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.common.parts import Part
from hpcprobe.families.hpl import binding, blas, inputs, output
from hpcprobe.families.hpl.blas import Blas
from hpcprobe.families.hpl.inputs import Problem
from hpcprobe.machine import cpufreq, energy, flopmodel, sysinfo
from hpcprobe.machine.provenance import blas as provenance_blas
from hpcprobe.measure import options
from hpcprobe.measure.family import (
    Flag,
    MetricSpec,
    RunContext,
    option,
    per_watt,
    per_watt_specs,
    specs,
)
from hpcprobe.mpi import find, launch, launchers, layouts
from hpcprobe.mpi.launchers import Launcher, Layout
from hpcprobe.mpi.layouts import Ranks
from hpcprobe.native import Team, peak
from hpcprobe.probes.clock import clock_point
from hpcprobe.results.findings import Finding, kind
from hpcprobe.results.model import Metric

#: What HPL's figures say about the BLAS or the peak model
BLAS_BELOW_ISA = kind("blas_below_isa", "the BLAS runs kernels of a narrower ISA than the CPU "
                      "has, with the fix", code="HP205", action="watch")
ABOVE_PEAK_KIND = kind("above_peak", "HPL above the Rpeak on the measured clock: the clock or "
                       "the flop model, not an efficiency", code="HP206", action="watch")
ABOVE_BASE = kind("above_base", "HPL above the base-clock Rpeak: the cores ran above their "
                  "base clock", "note", "the HPL table", code="HP207", action="watch")

METRICS = (*specs("GFLOP/s", "higher", "rmax", "dgemm", "nb_search"),
           *specs("GFLOP/s", "higher", "rpeak", "rpeak_base", derived=True),
           *specs("%", "higher", "efficiency", "efficiency_base", "dgemm_fraction", derived=True),
           MetricSpec("hpl_time", "s", "lower"), MetricSpec("residual", "1", "lower"),
           *specs("GHz", "higher", "clock", "scaling_cur_freq"),
           *per_watt_specs(("dgemm", "GFLOP/s"), ("rmax", "GFLOP/s")))
#: HPL sized by time runs at about this share of the all-core DGEMM rate (for its N and the
#: expected time of the progress bar).
HPL_OF_DGEMM = 0.8
#: The matrix may fill at most this share of the nodes' memory (the rest: the OS, MPI, hpcc).
USABLE = 0.9
#: hpcc runs its other tests (PTRANS, RandomAccess, FFT, STREAM, b_eff) before HPL, sized from
#: HPL's matrix: about this long plus this long per GiB of matrix (measured here: 20 s at N
#: 7104, 0.38 GiB; 95 s at N 12480, 1.16 GiB), for the expected time only.
HPCC_OTHERS_S = 5.0
HPCC_OTHERS_S_PER_GIB = 70.0
#: Without --timeout an HPL launch may take this many times its expected time, plus start-up.
TIMEOUT_FACTOR, TIMEOUT_SLACK_S = 3.0, 120.0
#: Seconds of clock samples for the Rpeak model, per clock measured.
CLOCK_BUDGET_S = 0.5
#: `--tune`: each block size gets a problem of about this many seconds, or of the profile's
#: HPL run where that is shorter (the quick profile's half second: the block size best there)
TUNE_S = 3.0
#: Timed calls of the FMA kernel where the flop model has no row for this CPU (the fastest
#: counts: a throughput cannot be beaten, only disturbed).
PEAK_SAMPLES = 7
POLL_S = 0.5
#: The ranks' binding is read from /proc at every poll, the latest reading kept (Open MPI
#: starts a rank on one CPU and binds it to its set inside MPI_Init), until it has not changed
#: for BINDING_SETTLED_S; polls come every BINDING_POLL_S for the first QUICK_POLLS_S, so a
#: short run is seen too.
BINDING_POLL_S, QUICK_POLLS_S, BINDING_SETTLED_S = 0.1, 2.0, 5.0
#: HPL's power is read over its timed solve, as the polls bracket it; under this share of the
#: solve bracketed (a solve of a few polls), no power and no figure per watt
SOLVE_COVERED = 0.5
#: xhpl's progress lines set the expected time once this share of the work is done.
PROGRESS_TRUSTED = 0.02


@dataclass(frozen=True)
class HplUsed:
    """What a run records of the HPL it launched (its provenance part `hpl`): the program
    (hpcc or xhpl) and its path, the MPI and launcher, the BLAS libraries tried."""

    program: str | None = None
    path: str | None = None
    mpi: str | None = None
    launcher: str | None = None
    blas: list[str] = field(default_factory=list)


HPL = Part("hpl", HplUsed)


@dataclass(frozen=True)
class Settings:
    """What a profile gives the hpl family."""

    seconds: float | None  # N sized for about this long an HPL run; None: by memory share
    runs: int  # HPL runs of the same N in one launch
    dgemm_reps: int  # timed DGEMM calls per figure


SETTINGS = {"quick": Settings(0.5, 1, 3), "default": Settings(4.0, 1, 5),
            "thorough": Settings(None, 3, 10)}
#: `hpcprobe hpl` in the default profile: the TOP500-style run, N from 80 % of memory.
FULL = Settings(None, 1, 5)
#: The memory share of N sized by memory (TOP500 practice: about 80 %).
MEMORY_SHARE = 0.8


def share(text: str) -> float:
    """0.8 or 80%: a share of memory in (0, 0.95]."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 0.95:
        raise argparse.ArgumentTypeError(f"{text}: give a share of memory, e.g. 0.8 or 80% "
                                         "(at most 95%)")
    return value


@dataclass(frozen=True)
class HplOptions:
    """What narrows `hpcprobe run hpl` and `hpcprobe hpl`."""

    xhpl: str | None = option(Flag(
        "--xhpl", "run this HPL binary (built against your MPI and BLAS) instead of Debian's "
        "hpcc", metavar="PATH"))
    blas: tuple[str, ...] | None = option(Flag(
        "--blas", "BLAS libraries to run DGEMM and HPL with, in turn: openblas, "
        "openblas:CORETYPE (e.g. openblas:SkylakeX), blis, reference, or a libblas.so.3 path "
        "(default: the system's libblas.so.3)", parse=options.names))
    n: int | None = option(Flag(
        "--n", "HPL problem size N on one node; on k hosts N x sqrt(k), the memory per node "
        "kept (default: 80% of memory with hpcprobe hpl, else sized for the profile's time)",
        parse=options.at_least(1, "a problem size")))
    memory: float | None = option(Flag(
        "--memory", "N from this share of the nodes' memory, e.g. 0.8 or 80%", parse=share,
        metavar="SHARE"))
    nb: int | None = option(Flag(
        "--nb", "HPL block size (default: from the BLAS's kernels, 192 for AVX2, 384 for "
        "AVX-512; --tune searches)", parse=options.at_least(1, "a block size")))
    pq: str | None = option(Flag(
        "--pq", "HPL process grid PxQ, P x Q = ranks (default: near square, P <= Q)",
        metavar="PxQ"))
    tune: bool = option(Flag("--tune", "search the block size first: one short HPL per "
                                       "candidate NB, the fastest is used", switch=True), False)
    runs: int | None = option(Flag(
        "--runs", "HPL runs of the same N per BLAS (default: per profile)",
        parse=options.at_least(1, "a run count")))
    layout: str | None = option(options.LAYOUT, note="default core")
    ranks: int | None = option(options.RANKS)
    launcher: str | None = option(options.LAUNCHER)
    hosts: tuple[str, ...] | None = option(options.HOSTS)
    mpi_prefix: str | None = option(options.MPI_PREFIX)
    timeout_s: float | None = option(options.TIMEOUT, note="on one HPL launch (default: 3x its "
                                     "expected time plus start-up)")


@dataclass(frozen=True)
class Program:
    """The HPL that runs: hpcc (its HPL report goes to hpccoutf.txt) or an xhpl (stdout)."""

    kind: str  # "hpcc" or "xhpl"
    path: str

    @property
    def report(self) -> str | None:
        return "hpccoutf.txt" if self.kind == "hpcc" else None


def program(opts: HplOptions) -> Program:
    """--xhpl, else Debian's hpcc on PATH; neither is the user's to fix."""
    if opts.xhpl:
        path = shutil.which(opts.xhpl) if "/" not in opts.xhpl else opts.xhpl
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise OptionError(f"<xhpl> {opts.xhpl}: not an executable file")
        return Program("xhpl", os.path.abspath(path))
    path = shutil.which("hpcc")
    if path is None:
        raise OptionError("no HPL found: install Debian's hpcc (apt install hpcc; it contains HPL) "
                          "or give your own with <xhpl> PATH")
    return Program("hpcc", path)


def settings_of(ctx: RunContext) -> Settings:
    return FULL if ctx.standalone and ctx.profile.name == "default" else \
        SETTINGS[ctx.profile.name]


@dataclass(frozen=True)
class Setup:
    """What every BLAS of a run shares: the ranks, the grid, the nodes, the memory."""

    ranks: Ranks
    hosts: tuple[str, ...]
    p: int
    q: int
    mem_bytes: float  # of all the nodes (each taken to be like this one)
    n_ranks: int  # the first ones of the layout (--ranks), on all the hosts

    @property
    def nodes(self) -> int:
        return max(1, len(self.hosts))

    def layout(self) -> Layout:
        return self.ranks.first(self.n_ranks, self.hosts)

    @property
    def cores(self) -> tuple[int, ...]:
        """The cores of one node's ranks."""
        return tuple(c for s in self.ranks.sets[:self.n_ranks // self.nodes] for c in s)


def setup(ctx: RunContext, opts: HplOptions) -> Setup:
    rk = layouts.ranks(ctx.topo, opts.layout or "core")
    hosts = opts.hosts or ()
    n_ranks = opts.ranks or len(rk.sets) * max(1, len(hosts))
    rk.first(n_ranks, hosts)  # a count the layout cannot give: said now
    p, q = inputs.parse_grid(opts.pq, n_ranks) if opts.pq else inputs.grid(n_ranks)
    # HPL is sized by a node's total memory (or its cgroup's limit where lower: a job's --mem):
    # a recorded machine's (a dry run's --input) as it states it, not this node's
    stated = ctx.topo.memory_bytes
    per_node = stated if ctx.topo.recorded and stated else sysinfo.usable_total_bytes() or stated
    return Setup(rk, hosts, p, q, float(per_node) * max(1, len(hosts)), n_ranks)


def size(ctx: RunContext, opts: HplOptions, s: Setup, nb: int, gflops: float | None) -> int:
    """N: --n (one node's, x sqrt(nodes)), else from memory or from the profile's time at the
    measured DGEMM rate; checked against the memory."""
    st = settings_of(ctx)
    if opts.n is not None:
        inputs.check_blocks(opts.n, opts.nb)
        n = inputs.round_n(opts.n * math.sqrt(s.nodes), nb, s.q) if s.nodes > 1 else opts.n
    elif opts.memory is not None or st.seconds is None or gflops is None:
        n = inputs.n_for_memory(s.mem_bytes, opts.memory or MEMORY_SHARE, nb, s.q)
    else:  # one node's size for the time, then the nodes' memory share kept
        one = inputs.n_for_time(st.seconds, gflops * HPL_OF_DGEMM / s.nodes, nb, s.q)
        n = min(inputs.round_n(one * math.sqrt(s.nodes), nb, s.q),
                inputs.n_for_memory(s.mem_bytes, MEMORY_SHARE, nb, s.q))
    inputs.check_memory(n, s.mem_bytes, s.nodes, USABLE)
    return n


def labels(ctx: RunContext, opts: HplOptions | None) -> list[str]:
    """What a run does, in order (N where it depends on a measured rate says so); the options
    a user gives are checked here, before anything runs."""
    opts = opts or HplOptions()
    s = setup(ctx, opts)
    st = settings_of(ctx)
    if opts.xhpl:
        program(opts)
    if opts.blas:
        blas.choose(opts.blas)
    if opts.n is not None:
        size(ctx, opts, s, opts.nb or min(inputs.NB_TABLE.values()), None)
    libs = opts.blas or ("the system's libblas.so.3",)
    how = (f"N {opts.n} per node" if opts.n else
           f"N from {opts.memory or MEMORY_SHARE:.0%} of memory" if opts.memory or not st.seconds
           else f"N sized for ~{st.seconds:g} s at the measured DGEMM rate")
    out = [f"clock under {native.supported_isas()[-1]} load on 1 and {len(s.cores)} "
           "core(s) (the Rpeak model)"]
    for b in libs:
        out += [f"DGEMM through {b} on 1 and {len(s.cores)} core(s)"]
        if opts.tune:
            out.append(f"HPL NB search through {b}: NB {', '.join(map(str, inputs.NB_CANDIDATES))}")
        out.append(f"HPL through {b}: {opts.runs or st.runs} run(s), {how}, "
                   f"{s.n_ranks} rank(s) x {s.ranks.threads} thread(s) ({s.ranks.layout} "
                   f"layout), P x Q = {s.p} x {s.q}, {s.nodes} node(s)")
    return out


class _Model:
    """FLOPs per cycle of the widest ISA's DP FMA (the flop model's table; for a CPU it lacks,
    one core's measured FMA throughput, by the flop model's own rule), the clock measured under
    that ISA's load, and the base clock the CPU states."""

    def __init__(self, ctx: RunContext) -> None:
        self.isa = native.supported_isas()[-1]
        self.kernel = peak.headline(self.isa, "dp")
        cpu = flopmodel.read_cpuid()
        self.ident = flopmodel.identify(cpu)
        arch = self.ident.arch
        table = arch.flops_per_cycle(self.kernel) if arch else None
        self.model = flopmodel.Model(table, "table", arch.name) \
            if arch is not None and table is not None else None
        self.base = cpufreq.base_ghz(cpu.model_name if cpu else ctx.topo.cpu_model)

    @property
    def per_cycle(self) -> float | None:
        return self.model.flops_per_cycle if self.model else None

    @property
    def source(self) -> str | None:
        """Where FLOP/cycle comes from: "table" or "measured"."""
        return self.model.source if self.model else None

    def clock(self, ctx: RunContext, cpus: tuple[int, ...]) -> Metric | None:
        """The clock of `cpus` under the widest ISA's load, now."""
        with Team(cpus) as team:
            return clock_point(ctx, team, self.isa, cpus, "hpl", CLOCK_BUDGET_S, "hpl")

    def measure(self, ctx: RunContext, cpu: int, clk: Metric | None) -> None:
        """Where the table has no row for this CPU: the model from one core's FMA throughput at
        the clock just measured (the chains checked), as the compute family's is."""
        if self.model is not None or clk is None:
            return
        k = self.kernel
        iters = min(native.peak_max_iters(k.precision), 1 << 22)
        with Team((cpu,)) as team:
            times, moved = team.peak_measure(k.isa, k.precision, k.op, iters, 1, PEAK_SAMPLES)
        ok = [t[0] for t, m in zip(times, moved, strict=True) if t[0] > 0 and not any(m)]
        if not ok:
            ctx.warnings.append(f"hpl: {self.ident.note}; its FMA throughput could not be "
                                "measured either: no Rpeak or efficiency")
            return
        measured = peak.gflops(k, iters, 1, 1, min(ok)) / clk.summary.median
        self.model, warning = flopmodel.model_for(self.ident, k, measured)
        if warning:
            ctx.warnings.append(f"hpl: {warning}")

    def params(self) -> dict[str, Any]:
        return {"isa": self.isa, "microarch": self.model.microarch if self.model else "unknown",
                "model_source": self.source, "flops_per_cycle": self.per_cycle,
                "clock_load": self.isa}


def run(ctx: RunContext, opts: HplOptions | None) -> None:
    opts = opts or HplOptions()
    try:
        prog = program(opts)
        mpi = find.find(opts.mpi_prefix)
    except UserError as exc:
        if ctx.standalone or opts.xhpl:
            raise
        ctx.warnings.append(f"hpl: skipped: {exc}")
        return
    libs = blas.choose(opts.blas)
    s = setup(ctx, opts)
    launcher, path = launchers.choose(mpi, opts.launcher)
    HPL.put(ctx.provenance, HplUsed(prog.kind, prog.path, f"{mpi.implementation} {mpi.version}",
                                    launcher.name, [b.name for b in libs]))
    model = _Model(ctx)
    cores = s.cores
    ctx.progress.start("hpl", 1 + 3 * len(libs))
    clocks = {k: model.clock(ctx, cores[:k]) for k in dict.fromkeys((1, len(cores)))}
    model.measure(ctx, cores[0], clocks[1])
    ctx.progress.advance("hpl: clocks measured")
    for b in libs:
        info = _dgemm(ctx, b, cores, model, clocks)
        ctx.progress.advance(f"hpl: DGEMM through {b.name}")
        if info is None:
            continue
        kernel_isa = blas.kernel_isa(info)
        nb = opts.nb or inputs.NB_TABLE[kernel_isa or model.isa]
        rate = info["all_core_gflops"] * s.nodes
        base = {"blas": b.name, "blas_library": info.get("library"),
                "blas_kernels": info.get("kernel"), "blas_isa": kernel_isa,
                "program": prog.kind, "ranks": s.n_ranks, "threads": s.ranks.threads,
                "layout": s.ranks.layout, "nodes": s.nodes, "p": s.p, "q": s.q,
                "launcher": launcher.name, "hosts": ",".join(s.hosts)}
        if steps_aside(ctx, opts, prog):
            continue
        runner = _Launch(ctx, prog, launcher, path, mpi, s, b)
        if opts.tune:
            nb = _tune(ctx, runner, base, rate, nb, opts.n)
        ctx.progress.advance(f"hpl: NB {nb} through {b.name}")
        n = size(ctx, opts, s, nb, rate)
        runs = opts.runs or settings_of(ctx).runs
        clk = model.clock(ctx, cores)  # just before, under the same load
        results = runner.go(Problem((n,) * runs, (nb,), s.p, s.q), rate, opts.timeout_s)
        ctx.progress.advance(f"hpl: HPL through {b.name}")
        params = dict(base, n=n, nb=nb, binding=runner.binding())
        _store(ctx, model, s, params, results, clk, runner.windows)


def steps_aside(ctx: RunContext, opts: HplOptions, prog: Program) -> bool:
    """In the quick profile of a whole run, hpcc's launch steps aside (said once): it runs
    HPCC's whole suite before HPL (about 10 s on two cores, minutes on a node), longer than the
    rest of a quick look; the DGEMM on all cores stands in. Named by its own command, with a
    size (--n), --tune or --xhpl, HPL runs."""
    aside = (ctx.profile.name == "quick" and prog.kind == "hpcc" and not ctx.standalone
             and opts.n is None and not opts.tune)
    if aside and not any(w.startswith("hpl: quick profile") for w in ctx.warnings):
        ctx.warnings.append("hpl: quick profile: HPL not launched (hpcc runs HPCC's whole suite "
                            "before HPL); the all-core DGEMM stands in; the default profile, "
                            "`hpcprobe hpl --quick` or --n N runs HPL")
    return aside


def _dgemm(ctx: RunContext, b: Blas, cores: tuple[int, ...], model: _Model,
           clocks: dict[int, Metric | None]) -> dict[str, Any] | None:
    """DGEMM on one core and on all through `b`, each as a share of the model's peak; a
    finding when its kernels are narrower than the CPU's widest ISA. The BLAS's own words with
    the all-core rate (all_core_gflops), or None when it could not run."""
    reps = settings_of(ctx).dgemm_reps
    info: dict[str, Any] | None = None
    for cpus in dict.fromkeys((cores[:1], cores)):
        got = blas.dgemm(b, cpus, reps, meter=ctx.meter)
        drew = got.pop("window", None)
        if got.get("error") and not got.get("samples"):
            ctx.errors.append(f"hpl: {got['error']}; no HPL through it")
            return None
        if got.get("error"):
            ctx.errors.append(f"hpl: DGEMM through {b.name} computed a wrong product "
                              f"({got['error']}); figure discarded, no HPL through it")
            return None
        info = dict(got, all_core_gflops=statistics.median(got["samples"]))
        params = {"blas": b.name, "blas_library": got["library"], "blas_kernels": got["kernel"],
                  "blas_isa": blas.kernel_isa(got), "threads": len(cpus), "n": got["n"]}
        m = Metric("hpl", "dgemm", "GFLOP/s", params, got["samples"])
        ctx.metrics += [m, *per_watt(m, drew)]
        clk = clocks.get(len(cpus))
        if clk is not None and model.per_cycle:
            peak_gflops = model.per_cycle * len(cpus) * clk.summary.median
            ctx.metrics.append(Metric("hpl", "dgemm_fraction", "%",
                                      dict(params, **model.params()),
                                      [100 * g / peak_gflops for g in got["samples"]]))
    assert info is not None
    kernel_isa = blas.kernel_isa(info)
    if blas.narrower(kernel_isa, model.isa):
        fix = blas.advice(b, info, model.isa)
        msg = (f"{b.name}: its DGEMM runs {info.get('kernel')} kernels ({kernel_isa}) on a CPU "
               f"with {model.isa}: {fix}")
        ctx.find(Finding("hpl", BLAS_BELOW_ISA, msg, {
            "blas": b.name, "kernel": info.get("kernel"), "kernel_isa": kernel_isa,
            "cpu_isa": model.isa}))
    return info


class _Launch:
    """HPL runs through one BLAS: input files in a work directory, the launcher, a progress bar
    with the elapsed and expected time, the timeout, the report parsed."""

    def __init__(self, ctx: RunContext, prog: Program, launcher: Launcher, path: str,
                 mpi: find.Mpi, s: Setup, b: Blas) -> None:
        self.ctx, self.prog, self.launcher, self.path, self.mpi, self.s, self.b = \
            ctx, prog, launcher, path, mpi, s, b
        self.bound: dict[int, list[int]] = {}  # rank -> CPUs, read from /proc while it ran
        self.trail = energy.Trail(ctx.meter)  # the energy counters marked at each poll
        # each result line's last poll before it was printed and the poll that saw it
        self.seen: list[tuple[float, float]] = []
        self.windows: list[energy.Window | None] = []  # the energy of each valid result

    def binding(self) -> str:
        """Each rank's CPUs as read back ("0;1", "?" for a rank not seen: on another host, or
        gone before it was read); a local rank bound elsewhere than asked is a warning."""
        layout = self.s.layout()
        out = []
        for r in range(layout.ranks):
            got = self.bound.get(r)
            out.append(format_cpulist(got) if got else "?")
            local = layout.hosts is None
            if got and local and sorted(got) != sorted(layout.cpuset(r)):
                self.ctx.warnings.append(f"hpl: rank {r} asked for CPUs "
                                         f"{format_cpulist(layout.cpuset(r))}, bound to "
                                         f"{format_cpulist(got)} ({self.launcher.name})")
        return ";".join(out)

    def expected(self, pr: Problem, gflops: float | None) -> float:
        """Seconds the launch should take: the N^3 model at the DGEMM rate (hpcc: its other
        tests too)."""
        rate = (gflops or 1.0) * HPL_OF_DGEMM * 1e9
        hpl = sum(inputs.flops(n) for n in pr.ns) * len(pr.nbs) / rate
        if self.prog.kind == "hpcc":
            hpl += HPCC_OTHERS_S + HPCC_OTHERS_S_PER_GIB * 8.0 * max(pr.ns) ** 2 / 2 ** 30
        return hpl

    def go(self, pr: Problem, gflops: float | None, timeout_s: float | None
           ) -> list[output.Result]:
        """Run HPL on problem `pr`; its valid results (a failed residual check, a crash, a
        timeout or no result is an error of the run, with what was printed before)."""
        expected = self.expected(pr, gflops)
        limit = timeout_s or TIMEOUT_FACTOR * expected + TIMEOUT_SLACK_S
        # hosts: a directory under the current one (shared across the nodes, as a cluster
        # job's working directory is); else a private temporary one
        work = Path(tempfile.mkdtemp(prefix="hpcprobe-hpl-",
                                     dir=os.getcwd() if self.s.hosts else None))
        try:
            inputs.write(work, self.prog.kind, pr)
            text, error = self._follow(pr, work, expected, limit)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results = output.parse(text)
        what = f"HPL through {self.b.name} (N {max(pr.ns)}, NB {','.join(map(str, pr.nbs))})"
        if error is None and not results:
            error = f"{self.prog.kind} printed no HPL result: {_tail(text)}"
        self.windows = [solved(self.trail, self.seen[k] if k < len(self.seen) else None,
                               r.seconds) for k, r in enumerate(results) if r.valid]
        for r in results:
            if not r.valid:
                self.ctx.errors.append(
                    f"hpl: {what}: the residual check " + ("FAILED" if r.passed is False else
                                                           "was not printed")
                    + f" (scaled residual {r.residual}); its {r.gflops:g} GFLOP/s discarded")
        if error:
            self.ctx.errors.append(f"hpl: {what}: {error}" + ("; the runs that finished are "
                                                              "kept" if results else ""))
        return [r for r in results if r.valid]

    def _saw(self, text: str, now: float, before: float) -> None:
        """Note when the report's result lines were first seen (between `before` and `now`)."""
        self.seen += [(before, now)] * (output.printed(text) - len(self.seen))

    def _follow(self, pr: Problem, work: Path, expected: float, limit: float
                ) -> tuple[str, str | None]:
        threads = self.s.ranks.threads
        spec = self.launcher.build(self.path, self.mpi, self.s.layout(), [self.prog.path], work,
                                   self.b.env(threads))
        log = work / "stdout.txt"
        label = f"hpl {self.b.name} N={max(pr.ns)} {self.s.p}x{self.s.q}"
        self.ctx.progress.start(label, max(1, round(expected)))
        start = time.monotonic()
        shown = 0
        settled = 0.0  # when the ranks' binding last changed (or was not seen)
        self.seen, polled = [], self.trail.mark()
        report = work / (self.prog.report or "stdout.txt")
        with open(log, "w") as out:
            try:
                p = subprocess.Popen(spec.argv, stdout=out, stderr=subprocess.STDOUT, cwd=work,
                                     env={**os.environ, **spec.env}, start_new_session=True,
                                     text=True)
            except OSError as exc:
                return "", f"{self.launcher.name} cannot be started: {exc}"
            error = None
            try:
                while p.poll() is None:
                    # quick polls at first: a short run may end within a second
                    time.sleep(BINDING_POLL_S if time.monotonic() - start < QUICK_POLLS_S
                               else POLL_S)
                    elapsed = time.monotonic() - start
                    if elapsed > limit:
                        launch.stop(p)
                        error = (f"no result after {limit:g} s (--timeout; expected "
                                 f"~{expected:.0f} s); stopped")
                        break
                    # the latest reading wins (Open MPI binds a rank again inside MPI_Init);
                    # once it has not changed for a while, /proc is not walked again
                    if elapsed - settled < BINDING_SETTLED_S:
                        seen = binding.ranks(p.pid, self.prog.path)
                        if not seen or seen != self.bound:
                            settled = elapsed
                        self.bound.update(seen)
                    text = _read(report)
                    before, polled = polled, self.trail.mark()
                    self._saw(text, polled, before)
                    phase = output.section(text) or "HPL"
                    frac = output.fraction(text)
                    done = 1 - (1 - frac) ** 3 if frac else 0.0  # xhpl's progress: LU work
                    if done > PROGRESS_TRUSTED:  # done goes as 1 - (1 - columns done)^3
                        expected = elapsed / done
                    while shown < min(elapsed, expected) - 1:
                        shown += 1
                        self.ctx.progress.advance(f"{label}: {phase}, {elapsed:.0f} s of "
                                                  f"~{expected:.0f} s")
            except BaseException:  # Ctrl-C: the ranks run in their own session
                launch.stop(p)
                raise
        self._saw(_read(report), self.trail.mark(), polled)
        text = _read(work / self.prog.report) if self.prog.report else ""
        text += _read(log)
        if error is None and p.returncode != 0:
            error = f"{self.prog.kind} exited with status {p.returncode}: {_tail(_read(log))}"
        return text, error


def solved(trail: energy.Trail, seen: tuple[float, float] | None, seconds: float
           ) -> energy.Window | None:
    """The energy of a timed solve of `seconds`, as far as the trail's polls bracket it: from
    the first mark after the poll that saw its result line (`seen`: that poll and the one
    before), less its seconds, to the last poll before the line (the solve, and at most the
    residual check after it); None where no poll saw the line, or that is under
    SOLVE_COVERED of the solve."""
    if seen is None:
        return None
    before, saw = seen
    got = trail.within(saw - seconds, before)
    return got if got is not None and got.seconds >= SOLVE_COVERED * seconds else None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


#: The launcher's own lines about a rank that failed (Open MPI's, PRRTE's): not the cause
LAUNCHER = ("mpirun", "prterun", "primary job", "process name", "exit code", "the job",
            "the first process", "this may")


def _tail(text: str, lines: int = 4, most: int = 500) -> str:
    """The last lines of a failed launch, after the first line of the program's own that
    says error (mpirun's notice of a failed rank, ten lines, would hide it)."""
    keep = [ln.strip() for ln in text.splitlines() if ln.strip() and set(ln.strip()) != {"-"}]
    tail = " | ".join(keep[-lines:])
    said = next((ln for ln in keep[:-lines] if "error" in ln.lower()
                 and not ln.lower().startswith(LAUNCHER)), None)
    if said is None:
        return tail[-most:] or "no output"
    said = said[:most // 2]
    return f"{said} | ... | {tail[-(most - len(said)):]}"


def _tune(ctx: RunContext, runner: _Launch, base: dict[str, Any], gflops: float | None,
          nb: int, most: int | None) -> int:
    """One short HPL per candidate block size (one launch), at most at N `most` (the size asked
    for: a block size is searched no larger than the problem it is for; never below one block
    of the largest); the fastest, or `nb` when none gave a valid result."""
    nbs = tuple(sorted({*inputs.NB_CANDIDATES, nb}))
    s = runner.s
    seconds = min(TUNE_S, settings_of(ctx).seconds or TUNE_S)
    n = inputs.n_for_time(seconds, (gflops or 1.0) * HPL_OF_DGEMM, max(nbs), s.q)
    n = min(n, inputs.n_for_memory(s.mem_bytes, MEMORY_SHARE, max(nbs), s.q))
    n = max(min(n, most or n), max(nbs))
    results = runner.go(Problem((n,), nbs, s.p, s.q), gflops, None)
    for r in results:
        ctx.metrics.append(Metric("hpl", "nb_search", "GFLOP/s", dict(base, n=r.n, nb=r.nb),
                                  [r.gflops]))
    if not results:
        return nb
    return max(results, key=lambda r: r.gflops).nb


def _store(ctx: RunContext, model: _Model, s: Setup, params: dict[str, Any],
           results: list[output.Result], clk: Metric | None,
           windows: list[energy.Window | None]) -> None:
    """Rmax, time and residual of the valid runs; the power over their timed solves and Rmax
    per watt, where each solve's energy was read (`solved`); Rpeak on the measured
    clock (and the base clock where the CPU states one) and the efficiency against each."""
    if not results:
        return
    rmax = [r.gflops for r in results]
    drew = None if None in windows else energy.joined([w for w in windows if w is not None])
    got = Metric("hpl", "rmax", "GFLOP/s", params, rmax)
    ctx.metrics += [got, *per_watt(got, drew),
                    Metric("hpl", "hpl_time", "s", dict(params), [r.seconds for r in results],
                           "lower"),
                    Metric("hpl", "residual", "1", dict(params),
                           [r.residual for r in results if r.residual is not None], "lower")]
    if clk is None or model.per_cycle is None:
        return
    cores = len(s.cores) * s.nodes
    mp = dict(params, **model.params(), cores=cores, basis="measured clock")
    rpeak = [model.per_cycle * cores * g for g in clk.samples]
    mid = statistics.median(rpeak)
    ctx.metrics += [Metric("hpl", "rpeak", "GFLOP/s", mp, rpeak),
                    Metric("hpl", "efficiency", "%", dict(mp), [100 * g / mid for g in rmax])]
    pct = 100 * statistics.median(rmax) / mid
    ghz = clk.summary.median
    if flopmodel.above_model(pct, 100 * got.summary.ci95[0] / mid):  # the whole CI above
        msg = (f"HPL through {params['blas']} reached {pct:.1f} % of the Rpeak on the clock "
               f"measured under {model.isa} load ({ghz:.3f} GHz): above any machine's peak, so "
               "the cores ran faster during HPL than when the clock was measured (a busy host, "
               "a clock that rose), or the flop model undercounts this core's FMA units")
        ctx.find(Finding("hpl", ABOVE_PEAK_KIND, msg, {
            "blas": params["blas"], "percent": round(pct, 2), "clock_ghz": round(ghz, 4)}))
    if model.base is None:
        return
    base_ghz, source = model.base
    bp = dict(mp, basis=f"base clock ({source})", clock_ghz=base_ghz)
    rpeak_base = model.per_cycle * cores * base_ghz
    ctx.metrics += [Metric("hpl", "rpeak_base", "GFLOP/s", bp, [rpeak_base]),
                    Metric("hpl", "efficiency_base", "%", dict(bp),
                           [100 * g / rpeak_base for g in rmax])]
    pct_base = 100 * statistics.median(rmax) / rpeak_base
    if pct_base > 100:
        ctx.find(Finding(
            "hpl", ABOVE_BASE,
            f"HPL through {params['blas']} reached {pct_base:.1f} % of the base-clock Rpeak: "
            f"the cores ran at {ghz:.2f} GHz under {model.isa} load, above the {base_ghz:.2f} "
            f"GHz base; against the measured clock it is {pct:.1f} %",
            {"blas": params["blas"], "percent": round(pct_base, 2), "base_ghz": base_ghz,
             "clock_ghz": round(ghz, 4)}))



def info(opts: HplOptions) -> int:
    """`hpcprobe hpl info`: the HPL, MPI and BLAS libraries a run would use, the kernels each
    BLAS picks here, and the peak model's parts."""
    try:
        prog: Program | str = program(opts)
    except UserError as exc:
        prog = str(exc)
    try:
        mpi: find.Mpi | str = find.find(opts.mpi_prefix)
    except find.MpiNotFound as exc:
        mpi = str(exc)
    print(f"HPL:          {prog.kind} {prog.path}" if isinstance(prog, Program) else
          f"HPL:          none ({prog})")
    print(f"MPI:          {mpi.implementation} {mpi.version} ({mpi.prefix})"
          if isinstance(mpi, find.Mpi) else f"MPI:          none ({mpi})")
    cpu_isa = native.supported_isas()[-1]
    cpu = flopmodel.read_cpuid()
    ident = flopmodel.identify(cpu)
    per_cycle = ident.arch.flops_per_cycle(peak.headline(cpu_isa, "dp")) if ident.arch else None
    base = cpufreq.base_ghz(cpu.model_name if cpu else None)
    print(f"CPU:          widest ISA {cpu_isa}; {ident.note}; "
          + (f"{per_cycle:g} DP FLOP/cycle/core" if per_cycle else "not in the flop model")
          + (f"; base clock {base[0]:g} GHz ({base[1]})" if base else "; states no base clock"))
    print(f"system BLAS:  {provenance_blas() or 'none'}")
    print("BLAS installed (--blas NAME):")
    for name, lib in blas.installed().items():
        got = blas.dgemm(Blas(name, lib), (os.sched_getaffinity(0).pop(),), 1, 256)
        said = got.get("error") or (f"{got.get('config')}; kernels {got.get('kernel')} "
                                    f"({blas.kernel_isa(got) or '?'})")
        print(f"  {name:10s} {lib}  {said}")
    return 0


def scaled(ctx: RunContext, opts: HplOptions | None, k: int, mode: str, first: int
           ) -> HplOptions:
    """The options on k ranks for `hpcprobe scale`: --n is the first count's problem; weak:
    N x sqrt(k / first) (the matrix a rank held); strong: N."""
    opts = opts or HplOptions()
    if opts.n is None:
        raise OptionError("hpcprobe scale hpl needs <n>, the problem size on the first count")
    if opts.pq:
        raise OptionError("<pq>: hpcprobe scale chooses the process grid of each count")
    n = round(opts.n * math.sqrt(k / first)) if mode == "weak" else opts.n
    return replace(opts, n=n, ranks=k)


def total_rate(metrics: list[Metric]) -> list[float]:
    """Rmax of the best BLAS."""
    figures = [m for m in metrics if m.benchmark == "hpl" and m.name == "rmax"]
    return max(figures, key=lambda m: m.summary.median).samples if figures else []
