"""The compute benchmark: peak FLOP/s of every peak kernel this CPU runs, on one core and on all,
as a percentage of a peak model built on the clock measured in the same run, and the
core-scaling curve of the headline kernel."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.common.errors import MeasurementError
from hpcprobe.machine import clock, flopmodel
from hpcprobe.machine.placement import active_counts, curve
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import options, sampling
from hpcprobe.measure.family import Flag, RunContext, bound_cpus, option, per_watt
from hpcprobe.native import Team, peak
from hpcprobe.native.peak import PeakKernel
from hpcprobe.probes.clock import clock_point
from hpcprobe.results.findings import Finding, kind
from hpcprobe.results.model import Metric

#: What the peak kernels say about their model
MICROARCHITECTURE = kind("microarchitecture", "how the core was identified for its FLOP model "
                         "(a warning where the table lacks it)", "note", "the compute table",
                             code="HP202", action="none")
ABOVE_MODEL = kind("above_model", "a kernel above its FLOP model: the clock or the model, not "
                   "an efficiency", code="HP203", action="watch")
CLOCK_BRACKET = kind("clock_bracket", "the clock rose while the kernels ran; the model uses the "
                     "higher reading", "note", "the compute table", code="HP204", action="watch")

#: A timed sample lasts at least this long: long enough for a settled vector clock.
SAMPLE_S = 0.01
#: Iterations of the calibration call that sizes the samples.
CALIBRATION_ITERS = 20_000
#: Clock samples (blocks per thread) taken just after a group's kernels, the bracket's end.
AFTER_BLOCKS = 3
#: A rise of the clock across the bracket above this is a finding (below it, noise).
DRIFT_FINDING = 0.01
#: Share of the budget for the peak samples; the clocks of the model get the rest.
PEAK_BUDGET_SHARE = 0.75


@dataclass(frozen=True)
class Settings:
    """What a profile gives the compute family."""

    budget_s: float  # peak FLOPs of every kernel, their clocks and the core-scaling curve


SETTINGS = {"quick": Settings(2.5), "default": Settings(5.0), "thorough": Settings(60.0),
            "check": Settings(0.6)}


@dataclass(frozen=True)
class ComputeOptions:
    """Options that narrow `hpcprobe run compute`."""

    isa: str | None = None  # only this ISA variant (default: every one this CPU runs)
    precisions: tuple[str, ...] | None = option(Flag(
        "--precision", "peak kernels in double or single precision (default: both)",
        choices=("dp", "sp", "both"), convert=options.all_or_one))
    threads: tuple[int, ...] | None = option(options.THREADS)
    placement: str | None = option(options.PLACEMENT, note="the order of their cores")
    headline_only: bool = False  # the headline kernel alone (the health tier)


def check_options(ctx: RunContext) -> ComputeOptions:
    """The health tier's measurement: the headline FMA kernel of the ISA run, double
    precision, on every core."""
    cores = len(place(ctx.topo, "one-per-core").cpus)
    return ComputeOptions(isa=ctx.isa, precisions=("dp",), threads=(cores,), headline_only=True)


@dataclass(frozen=True)
class PeakPoint:
    """One measurement: a kernel on the first threads of the placement."""

    kernel: PeakKernel
    cpus: tuple[int, ...]
    phase: str  # "peak" (the table at 1 and N cores) or "scaling" (the curve's other counts)
    scaling: bool = False  # a point of the core-scaling curve (the headline kernel)

    @property
    def label(self) -> str:
        return f"{self.kernel.label} {len(self.cpus)}T"


def plan(topo: Topology, opts: ComputeOptions, isas: list[str], max_points: int | None
         ) -> tuple[str, list[PeakPoint]]:
    """Every built kernel of the ISAs at 1 and all cores (or the --threads counts), then the
    headline kernel of the best ISA at the other counts of the scaling curve."""
    name, cores, counts = curve(topo, opts.placement, opts.threads, max_points, "peak compute")
    table = counts if opts.threads else sorted({1, len(cores)})
    head = peak.headline(isas[-1], (opts.precisions or peak.PRECISIONS)[0])
    built = [k for k in ([head] if opts.headline_only else
                         peak.kernels(isas, opts.precisions or peak.PRECISIONS))
             if native.peak_shape(k.isa, k.precision, k.op) is not None]
    points = [PeakPoint(k, cores[:t], "peak", k == head and not opts.threads)
              for k in built for t in table]
    if not opts.threads:
        points += [PeakPoint(head, cores[:t], "scaling", True)
                   for t in active_counts(len(cores), max_points) if t not in table]
    return name, points


def measure_peak(ctx: RunContext, team: Team, pt: PeakPoint, budget_s: float) -> list[float]:
    """GFLOP/s samples of one point (first sample dropped); raises MeasurementError when the
    chains do not end at their analytic values."""
    k = pt.kernel

    def timed(iters: int, calls: int, reps: int) -> tuple[list[list[float]], list[list[bool]]]:
        times, migrated = team.peak_measure(k.isa, k.precision, k.op, iters, calls, reps)
        if any(t < 0 for sample in times for t in sample):
            raise MeasurementError(f"compute {pt.label}: the FMA/add chains did not end at "
                                   "their analytic values; figure discarded")
        return times, migrated

    took = max(timed(CALIBRATION_ITERS, 1, 1)[0][0])
    total = math.ceil(SAMPLE_S / max(took, 1e-9) * CALIBRATION_ITERS)
    calls = math.ceil(total / min(total, native.peak_max_iters(k.precision), 1 << 22))
    iters = math.ceil(total / calls)

    def take(n: int) -> list[float | None]:
        times, moved = timed(iters, calls, n)
        return [None if any(m) else peak.gflops(k, iters, calls, len(pt.cpus), max(t))
                for t, m in zip(times, moved, strict=True)]

    got = sampling.sample(take, ctx.profile.repetition, budget_s)
    if got.rejected:
        ctx.warnings.append(f"compute {pt.label}: {got.rejected} sample(s) dropped, a thread left "
                            "its CPU; is something else changing affinities?")
    if not got.samples:
        raise MeasurementError(f"compute {pt.label}: every sample had a migrated thread")
    return ctx.record("compute", pt.label, got)


class _Models:
    """The peak model of each kernel, set by its first measurement (one core where measured):
    the table's FLOPs per cycle, or the measured throughput where the table has no row for this
    CPU or its row is beaten."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.ident = flopmodel.identify(flopmodel.read_cpuid())
        self.models: dict[PeakKernel, flopmodel.Model] = {}
        # a core the table lacks is said once, not once per kernel
        ctx.find(Finding("compute", MICROARCHITECTURE, self.ident.note, {
            "how": self.ident.how, "microarch": self.ident.arch.name if self.ident.arch else None},
            severity="note" if self.ident.arch else "warning",
            warning=f"{self.ident.note}; each kernel's model is its measured single-core "
                    "throughput"))

    def add_group(self, measured: list[tuple[PeakPoint, Metric]], clk: Metric,
                  side: str) -> None:
        """The models of a group's points (one clock), then a finding for each point above its
        model (even the low end of its CI: flopmodel.above_model), which names the likelier
        cause from its siblings on the same clock samples."""
        both = {pt: self.add(pt, metric, clk, side) for pt, metric in measured}
        pcts = {pt: pct for pt, (pct, _) in both.items()}
        within = [pt for pt, pct in pcts.items() if pct <= flopmodel.ABOVE_MODEL
                  and self.models[pt.kernel].source == "table"]
        for pt, (pct, low) in both.items():
            if flopmodel.above_model(pct, low):
                self.above(pt, pct, statistics.median(clk.samples), within, pcts)

    def add(self, pt: PeakPoint, peak_metric: Metric, clk: Metric, side: str
            ) -> tuple[float, float]:
        """Store the model of one measured point (GFLOP/s: FLOPs/cycle x cores x each clock
        sample) and the point's samples as % of the model's median; returns the median % and
        the low end of its CI's."""
        k, cores = pt.kernel, len(pt.cpus)
        if k not in self.models:
            per_cycle = peak_metric.summary.median / (cores * clk.summary.median)
            self.models[k], warning = flopmodel.model_for(self.ident, k, per_cycle)
            if warning and self.ident.arch is not None:
                self.ctx.warnings.append(f"compute: {warning}")
        model = self.models[k]
        params = dict(peak_metric.params, model_source=model.source, microarch=model.microarch,
                      flops_per_cycle=round(model.flops_per_cycle, 4), clock_load=k.isa,
                      clock_side=side)
        model_gflops = [model.gflops(cores, g) for g in clk.samples]
        self.ctx.metrics.append(Metric("compute", "peak_model", "GFLOP/s", params,
                                       model_gflops))
        mid = statistics.median(model_gflops)
        self.ctx.metrics.append(Metric("compute", "peak_fraction", "%", dict(params),
                                       [flopmodel.percent_of_model(s, mid)
                                        for s in peak_metric.samples]))
        s = peak_metric.summary
        return flopmodel.percent_of_model(s.median, mid), flopmodel.percent_of_model(s.ci95[0], mid)

    def above(self, pt: PeakPoint, pct: float, ghz: float, within: list[PeakPoint],
              pcts: dict[PeakPoint, float]) -> None:
        """The finding of a point above its model: no core beats its pipes, so either the
        model's row understates what the core does (likelier when a kernel timed on the same
        clock samples reads within its table model) or the clock read low."""
        model = self.models[pt.kernel]
        row = (f"the {model.microarch} row's {model.flops_per_cycle:g} FLOP/cycle for "
               f"{pt.kernel.label}" if model.source == "table" else
               f"the one-core rate the model took ({model.flops_per_cycle:g} FLOP/cycle)")
        clock_cause = (f"the clock the model used ({ghz:.3f} GHz under {pt.kernel.isa} load) "
                       "reading below the clock the kernel ran at (drift between their samples, "
                       "or a busy host)")
        if within and model.source == "table":
            peer = within[0]
            cause, likelier = "model", (
                f"{row}, since {peer.label} read {pcts[peer]:.1f} % of its model on the same "
                f"clock samples; else {clock_cause}")
        else:
            cause, likelier = "clock", f"{clock_cause}; else {row}"
        self.ctx.find(Finding("compute", ABOVE_MODEL, (
            f"{pt.label} measured {pct:.1f} % of its model, which no core can; likelier cause: "
            f"{likelier}; not an efficiency"), {
            "kernel": pt.label, "percent": round(pct, 2), "clock_ghz": round(ghz, 4),
            "likelier": cause, "microarch": model.microarch,
            "flops_per_cycle": round(model.flops_per_cycle, 4)}))


def bracket(ctx: RunContext, before: Metric, after: list[float]) -> tuple[Metric, str]:
    """The clock for the model, from the samples just before a group's kernels and those just
    after them (stored as `clock_after`): the side with the higher median, since the kernels
    ran at no more than the higher clock of the two within the drift between them. An
    after-side more than DRIFT_FINDING higher is a finding. Returns the clock metric used and
    its side."""
    if not after:
        return before, "before"
    end = Metric("compute", "clock_after", "GHz", dict(before.params), after)
    ctx.metrics.append(end)
    if end.summary.median <= before.summary.median:
        return before, "before"
    if end.summary.median > (1 + DRIFT_FINDING) * before.summary.median:
        ctx.find(Finding(
            "compute", CLOCK_BRACKET,
            f"clock under {before.params['load']} load on {before.params['cpus']} rose from "
            f"{before.summary.median:.3f} to {end.summary.median:.3f} GHz while the kernels "
            "ran; the model uses the higher",
            {**before.params, "before_ghz": round(before.summary.median, 4),
             "after_ghz": round(end.summary.median, 4)}))
    return end, "after"


def groups(points: list[PeakPoint]) -> list[tuple[tuple[str, tuple[int, ...]], list[PeakPoint]]]:
    """Points grouped by (ISA, CPUs), fewest CPUs first: each group's clock is measured just
    before its kernels, and one core's figure sets a kernel's model before more cores run it."""
    out: dict[tuple[str, tuple[int, ...]], list[PeakPoint]] = {}
    for pt in points:
        out.setdefault((pt.kernel.isa, pt.cpus), []).append(pt)
    return sorted(out.items(), key=lambda g: len(g[0][1]))


def points_of(ctx: RunContext, opts: ComputeOptions) -> tuple[str, list[PeakPoint]]:
    """The placement and the points of a run: every ISA this CPU runs unless one was asked."""
    isas = [opts.isa or ctx.isa] if opts.isa or ctx.isa_asked else native.supported_isas()
    return plan(ctx.topo, opts, isas, ctx.profile.curve_points)


def labels(ctx: RunContext, opts: ComputeOptions | None) -> list[str]:
    """What a run measures: each group's clock under its ISA's load, then its kernels."""
    out = []
    for (isa, cpus), pts in groups(points_of(ctx, opts or ComputeOptions())[1]):
        out += [f"clock {isa} load, {len(cpus)} active core(s)", *(pt.label for pt in pts)]
    return out


def run(ctx: RunContext, opts: ComputeOptions | None) -> None:
    opts = opts or ComputeOptions()
    name, points = points_of(ctx, opts)
    cores = tuple(dict.fromkeys(c for pt in points for c in pt.cpus))
    plan_groups = groups(points)
    ctx.progress.start("compute", len(points))
    models = _Models(ctx)
    budget = SETTINGS[ctx.profile.name].budget_s
    deadline = time.perf_counter() + budget
    done = 0
    with Team(cores) as team:
        for g, ((isa, cpus), pts) in enumerate(plan_groups):
            # the clock under this ISA's load on these cores, just before their peaks, so the
            # model sees the clock the kernels run at
            left = max(0.0, deadline - time.perf_counter())
            clk = clock_point(ctx, team, isa, cpus, name,
                              left * (1 - PEAK_BUDGET_SHARE) / (len(plan_groups) - g), "compute")
            binding = bound_cpus(ctx, team, "compute")
            measured: list[tuple[PeakPoint, Metric]] = []
            for pt in pts:
                left = max(0.0, deadline - time.perf_counter())
                try:
                    with ctx.metered() as drew:
                        samples = measure_peak(ctx, team, pt, left * PEAK_BUDGET_SHARE
                                               / (len(points) - done))
                except MeasurementError as exc:
                    ctx.errors.append(str(exc))
                    continue
                finally:
                    done += 1
                    ctx.progress.advance(pt.label)
                k = pt.kernel
                params = {"isa": k.isa, "precision": k.precision, "op": k.op,
                          "threads": len(pt.cpus), "placement": name, "cpus": binding,
                          "phase": pt.phase, "scaling": pt.scaling, "width_bits": k.width_bits}
                metric = Metric("compute", "peak", "GFLOP/s", params, samples)
                ctx.metrics.append(metric)
                if pt.phase == "peak":  # the table's points: 1 and all cores, every kernel
                    ctx.metrics += per_watt(metric, drew.window)
                measured.append((pt, metric))
            if clk is not None and measured:
                # the clock again just after the kernels: the model takes the higher side of
                # the bracket, so a clock that rose while they ran cannot put them above it
                team.select(cpus)
                after = [g for g in clock.samples(team, isa, AFTER_BLOCKS) if g is not None]
                used, side = bracket(ctx, clk, after)
                models.add_group(measured, used, side)
