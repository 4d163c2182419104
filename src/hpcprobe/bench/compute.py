"""The compute benchmark: peak FLOP/s of every peak kernel this CPU runs, on one core and on all,
as a percentage of a peak model built on the clock measured in the same run, and the
core-scaling curve of the headline kernel."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

from .. import _native, flopmodel, peak
from .._native import Team
from ..cpulist import format_cpulist
from ..errors import MeasurementError
from ..peak import PeakKernel
from ..placement import active_counts
from ..results import Metric
from ..topology import Topology
from .base import Benchmark, RunContext, bound_cpus
from .frequency import clock_point, curve, find_clock

#: A timed sample lasts at least this long: long enough for a settled vector clock.
SAMPLE_S = 0.01
#: Iterations of the calibration call that sizes the samples.
CALIBRATION_ITERS = 20_000
#: Share of the budget for the peak samples; the clocks of the model (when the frequency
#: benchmark did not measure them) get the rest.
PEAK_BUDGET_SHARE = 0.75


@dataclass(frozen=True)
class ComputeOptions:
    """Options that narrow `hpcprobe run compute`."""

    isa: str | None = None  # only this ISA variant (default: every one this CPU runs)
    precisions: tuple[str, ...] | None = None
    threads: tuple[int, ...] | None = None
    placement: str | None = None


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
    built = [k for k in peak.kernels(isas, opts.precisions or peak.PRECISIONS)
             if _native.peak_shape(k.isa, k.precision, k.op) is not None]
    head = peak.headline(isas[-1], (opts.precisions or peak.PRECISIONS)[0])
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

    start = time.perf_counter()
    took = max(timed(CALIBRATION_ITERS, 1, 1)[0][0])
    total = math.ceil(SAMPLE_S / max(took, 1e-9) * CALIBRATION_ITERS)
    calls = math.ceil(total / min(total, _native.peak_max_iters(k.precision), 1 << 22))
    iters = math.ceil(total / calls)
    timed(iters, calls, 1)  # the dropped first sample: the vector units and clock settle
    samples: list[float] = []
    migrated = 0
    rep = ctx.profile.repetition
    while (more := rep.more(samples, time.perf_counter() - start, budget_s)) > 0 and \
            migrated < rep.max_samples:
        times, moved = timed(iters, calls, more)
        for t, m in zip(times, moved, strict=True):
            if any(m):
                migrated += 1
            else:
                samples.append(peak.gflops(k, iters, calls, len(pt.cpus), max(t)))
    if migrated:
        ctx.warnings.append(f"compute {pt.label}: {migrated} sample(s) dropped, a thread left "
                            "its CPU; is something else changing affinities?")
    if not samples:
        raise MeasurementError(f"compute {pt.label}: every sample had a migrated thread")
    return samples


def _model(ctx: RunContext, team: Team, placement: str, measured: list[tuple[PeakPoint, Metric]],
           budget_s: float) -> None:
    """The model of each measured point: the table's (or the measured) FLOPs per cycle x cores x
    the clock under the kernel's ISA load on the same CPUs, measured in this run."""
    ident = flopmodel.identify(flopmodel.read_cpuid())
    ctx.findings.append({"benchmark": "compute", "kind": "microarchitecture", "how": ident.how,
                         "microarch": ident.arch.name if ident.arch else None,
                         "message": ident.note})
    models: dict[PeakKernel, flopmodel.Model] = {}
    todo = sorted(measured, key=lambda pm: len(pm[0].cpus))  # one core first: it sets a model
    for i, (pt, metric) in enumerate(todo):
        k, cpus = pt.kernel, pt.cpus
        clk = find_clock(ctx.metrics, k.isa, format_cpulist(cpus))
        if clk is None:
            clk = clock_point(ctx, team, k.isa, cpus, placement, budget_s / (len(todo) - i),
                              "compute")
        if clk is None:
            continue
        if k not in models:
            per_cycle = metric.summary.median / (len(cpus) * clk.summary.median)
            models[k], warning = flopmodel.model_for(ident, k, per_cycle)
            if warning:
                ctx.warnings.append(f"compute: {warning}")
        model = models[k]
        params = dict(metric.params, model_source=model.source, microarch=model.microarch,
                      flops_per_cycle=round(model.flops_per_cycle, 4), clock_load=k.isa)
        model_gflops = [model.gflops(len(cpus), g) for g in clk.samples]
        ctx.metrics.append(Metric("compute", "peak_model", "GFLOP/s", params, model_gflops))
        mid = statistics.median(model_gflops)
        ctx.metrics.append(Metric("compute", "peak_fraction", "%", dict(params),
                                  [flopmodel.percent_of_model(s, mid) for s in metric.samples]))


def run(ctx: RunContext, opts: ComputeOptions | None) -> None:
    opts = opts or ComputeOptions()
    isas = [opts.isa] if opts.isa else _native.supported_isas()
    name, points = plan(ctx.topo, opts, isas, ctx.profile.curve_points)
    cores = tuple(dict.fromkeys(c for pt in points for c in pt.cpus))
    ctx.progress.start("compute", len(points))
    measured: list[tuple[PeakPoint, Metric]] = []
    budget = ctx.profile.compute_budget_s
    deadline = time.perf_counter() + budget * PEAK_BUDGET_SHARE
    with Team(cores) as team:
        for i, pt in enumerate(points):
            team.select(pt.cpus)
            binding = bound_cpus(ctx, team, "compute")
            try:
                samples = measure_peak(ctx, team, pt, max(0.0, deadline - time.perf_counter())
                                       / (len(points) - i))
            except MeasurementError as exc:
                ctx.errors.append(str(exc))
                continue
            finally:
                ctx.progress.advance(pt.label)
            k = pt.kernel
            params = {"isa": k.isa, "precision": k.precision, "op": k.op,
                      "threads": len(pt.cpus), "placement": name, "cpus": binding,
                      "phase": pt.phase, "scaling": pt.scaling, "width_bits": k.width_bits}
            metric = Metric("compute", "peak", "GFLOP/s", params, samples)
            ctx.metrics.append(metric)
            measured.append((pt, metric))
        _model(ctx, team, name, measured, budget * (1 - PEAK_BUDGET_SHARE))


BENCHMARK = Benchmark("compute", "peak FLOP/s per ISA and precision against a measured-clock "
                      "model, core scaling", run)
