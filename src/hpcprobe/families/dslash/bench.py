"""The dslash benchmark on one node: Grid's per-node Dslash table (Wilson and domain wall over
local volumes L^4, Mflop/s per node, best over the kernel variants), its comparison point under
each named definition, and the robustness (worst / best over the variants at one volume).
Every variant is checked against the reference on a small lattice before any of its figures
counts. One rank: the halo exchange and the comms policies come with the multi-rank version."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np

from hpcprobe import native
from hpcprobe.common.errors import MeasurementError
from hpcprobe.families.dslash import kernel as K
from hpcprobe.machine import sysinfo
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import elems_for
from hpcprobe.measure import options, sampling
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, bound_cpus, option
from hpcprobe.native import Team
from hpcprobe.probes import stream
from hpcprobe.results.model import Metric

METRICS = (MetricSpec("dslash", "Mflop/s"), MetricSpec("comparison_point", "Mflop/s"),
           MetricSpec("robustness", "1"), MetricSpec("axpy", "GB/s"))
#: Grid's memory benchmark streams z = a x + y over fields of L^4 sites of 12 complex singles
#: (96 B a site); it is measured with the STREAM triad kernel (a = b + s c: the same traffic,
#: three fields, STREAM's byte counting) on fields of that size.
AXPY_SITE_BYTES = 96
#: Share of the budget for the a x + y table.
AXPY_SHARE = 0.2
#: Grid's domain-wall slice counts: Ls 16 (ITT until 2020), Ls 12 (since).
DWF_LS = (16, 12)
#: The comparison point's definitions: name -> (Ls, the volumes whose DWF figures are averaged).
DEFINITIONS = {"DiRAC-ITT 2017": (16, (16,)), "ITT 2017-2020": (16, (12, 16)),
               "ITT 2020 onward": (12, (24, 32))}
#: Each variant is checked on this lattice (extents differ, so a mixed-up direction shows).
CHECK_LATTICE = (4, 6, 2, 8)
CHECK_TOLERANCE = 1e-5
#: A sample lasts at least this long (calls per sample sized from one call).
SAMPLE_S = 0.02
#: The fields may take at most this share of the memory available.
MEMORY_SHARE = 0.5
#: Distinct random links, tiled over the lattice (the figures do not depend on the values).
LINK_POOL = 4096


@dataclass(frozen=True)
class Settings:
    """What a profile gives the dslash family."""

    volumes: tuple[int, ...]  # L of the local volume L^4
    budget_s: float


SETTINGS = {"quick": Settings((8, 12), 4.0), "default": Settings((8, 12, 16, 24), 20.0),
            "thorough": Settings((8, 12, 16, 24, 32), 120.0)}


def volumes(text: str) -> tuple[int, ...]:
    """L values, e.g. 8,12,16: even, at least 4."""
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        vals = ()
    if not vals or any(v < 4 or v % 2 for v in vals):
        raise argparse.ArgumentTypeError(f"{text}: give local volumes L (even, at least 4), "
                                         "e.g. 8,12,16")
    return vals


@dataclass(frozen=True)
class DslashOptions:
    """What narrows `hpcprobe run dslash`."""

    l: tuple[int, ...] | None = option(Flag(  # noqa: E741 (Grid's name for it)
        "--l", "local volumes L^4, e.g. 8,12,16 (default: per profile; Grid's table: "
        "8,12,16,24,32)", parse=volumes, metavar="L"))
    actions: tuple[str, ...] | None = option(Flag(
        "--action", "wilson, dwf or both (default: both)", choices=("wilson", "dwf", "both"),
        convert=options.all_or_one))
    threads: tuple[int, ...] | None = option(options.THREADS)


@dataclass(frozen=True)
class Point:
    """One figure: an action at a local volume, with its slice count, on one kernel variant."""

    action: str  # "wilson" or "dwf"
    l: int  # noqa: E741
    ls: int
    isa: str

    @property
    def label(self) -> str:
        what = "Wilson" if self.action == "wilson" else f"DWF Ls={self.ls}"
        return f"{what} L={self.l} {self.isa}"


def field_bytes(l: int, ls: int) -> int:  # noqa: E741
    """Bytes of one application's fields: two half-lattice spinors, links at both parities."""
    half = l ** 4 // 2
    return 2 * half * 24 * ls * 4 + 2 * half * 4 * 18 * 4


def points(ctx: RunContext, opts: DslashOptions) -> list[Point]:
    """Every (action, L, Ls) of the table on every variant this CPU runs (or the ISA asked)."""
    ls_of = {"wilson": (1,), "dwf": DWF_LS}
    isas = [ctx.isa] if ctx.isa_asked else native.supported_isas()
    out = []
    for l in _volumes(ctx, opts):  # noqa: E741
        for action in opts.actions or ("wilson", "dwf"):
            out += [Point(action, l, ls, isa) for ls in ls_of[action] for isa in isas]
    return out


def cores_of(ctx: RunContext, opts: DslashOptions) -> tuple[int, ...]:
    """One thread per core, all of them or the first --threads (more with --oversubscribe)."""
    return place(ctx.topo, "one-per-core", max(opts.threads) if opts.threads else None,
                 ctx.oversubscribe).cpus


def labels(ctx: RunContext, opts: DslashOptions | None) -> list[str]:
    opts = opts or DslashOptions()
    n = len(cores_of(ctx, opts))
    return ["check each kernel variant against the reference on a "
            f"{'x'.join(map(str, CHECK_LATTICE))} lattice",
            *(f"a x + y over L={v}, {n} thread(s)" for v in _volumes(ctx, opts)),
            *(f"{p.label}, {n} thread(s)" for p in points(ctx, opts))]


def _volumes(ctx: RunContext, opts: DslashOptions) -> tuple[int, ...]:
    return opts.l or SETTINGS[ctx.profile.name].volumes


def axpy(ctx: RunContext, team: Team, cores: tuple[int, ...], l: int,  # noqa: E741
         budget_s: float) -> None:
    """Grid's a x + y memory figure at one volume (three fields of L^4 x 96 B)."""
    elems = elems_for("triad", 3 * l ** 4 * AXPY_SITE_BYTES, len(cores))
    m = stream.Measurement("axpy", "triad", "regular", "one-per-core", cores, elems, "")
    team.select(cores)
    team.stream_prepare(elems)
    samples = stream.measure(ctx, team, m, budget_s, "dslash")
    ctx.metrics.append(Metric("dslash", "axpy", "GB/s", {
        "l": l, "size_bytes": m.size_bytes, "threads": len(cores), "kernel": "triad"}, samples))


def check(team: Team, isa: str) -> str | None:
    """None when the variant matches the reference (Wilson and domain wall, both parities);
    else how far it is off."""
    lat = K.Lattice(CHECK_LATTICE)
    rng = np.random.default_rng(1)
    u = K.random_gauge(lat, rng)
    for ls in (1, 16):
        psi = K.random_fermion(lat, ls, rng)
        want = K.reference(u, psi).reshape(lat.volume, ls, 4, 3)
        for parity in (0, 1):
            got = K.apply(team, isa, lat, u, psi, parity)
            err = K.relative_error(got, want[lat.parity_sites(parity)])
            if not err < CHECK_TOLERANCE:
                return f"Ls={ls} parity {parity}: relative error {err:.2e}"
    return None


def operator(team: Team, l: int, ls: int, rng: np.random.Generator) -> K.Operator:  # noqa: E741
    """Random fields of an L^4 lattice in the kernel's layout, first touched by the threads that
    use them, built without the full-lattice complex arrays (a tiled pool of SU(3) links,
    Gaussian spinors)."""
    lat = K.Lattice((l, l, l, l))
    half = lat.volume // 2
    pool = K.random_su3(LINK_POOL, rng)
    links = np.stack([pool.real, pool.imag], axis=-1).astype(np.float32)
    tile = math.ceil(half * 4 / LINK_POOL)

    def gauge() -> np.ndarray:
        out = K.placed(team, (half, 4, 3, 3, 2), np.float32)
        tiled = np.tile(links[rng.permutation(LINK_POOL)], (tile, 1, 1, 1))
        out[...] = tiled[:half * 4].reshape(half, 4, 3, 3, 2)
        return out

    source = K.placed(team, (half, 4, 3, 2, ls), np.float32)
    source[...] = rng.standard_normal(source.shape, dtype=np.float32)
    nb = K.placed(team, (half, 8), np.int32)
    nb[...] = lat.neighbours(0)
    out = K.placed(team, source.shape, np.float32)
    return K.Operator(lat, ls, 0, gauge(), gauge(), source, nb, out)


def measure(ctx: RunContext, team: Team, op: K.Operator, pt: Point, budget_s: float
            ) -> list[float]:
    """Mflop/s samples of one point (every thread's share timed; the slowest counts)."""
    one = max(op.measure(team, pt.isa, 1, 1)[0][0])
    calls = max(1, math.ceil(SAMPLE_S / max(one, 1e-9)))

    def take(n: int) -> list[float | None]:
        times, moved = op.measure(team, pt.isa, calls, n)
        return [None if any(m) else op.flops() * calls / max(t) / 1e6
                for t, m in zip(times, moved, strict=True)]

    got = sampling.sample(take, ctx.profile.repetition, budget_s)
    if not got.samples:
        raise MeasurementError(f"dslash {pt.label}: every sample had a migrated thread")
    return ctx.record("dslash", pt.label, got)


def run(ctx: RunContext, opts: DslashOptions | None) -> None:
    opts = opts or DslashOptions()
    pts = points(ctx, opts)
    cores = cores_of(ctx, opts)
    budget = SETTINGS[ctx.profile.name].budget_s
    avail = sysinfo.mem_available_bytes() or 0
    vols = _volumes(ctx, opts)
    ctx.progress.start("dslash", len(pts) + len(vols) + 1)
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    with Team(cores) as team:
        failed = {isa: why for isa in dict.fromkeys(p.isa for p in pts)
                  if (why := check(team, isa)) is not None}
        for isa, why in failed.items():
            ctx.errors.append(f"dslash: the {isa} kernel does not match the reference ({why}); "
                              "its figures are discarded")
        ctx.progress.advance("dslash: kernels checked")
        binding = bound_cpus(ctx, team, "dslash")
        for v in vols:
            axpy(ctx, team, cores, v, AXPY_SHARE * budget / len(vols))
            ctx.progress.advance(f"dslash: a x + y L={v}")
        deadline = time.perf_counter() + (1 - AXPY_SHARE) * budget
        done = 0  # points measured or passed over, for each one's share of the budget
        for (l, ls), group in _by_fields(pts).items():  # noqa: E741
            need = field_bytes(l, ls)
            if avail and need > MEMORY_SHARE * avail:
                ctx.warnings.append(f"dslash: L={l} Ls={ls} needs {need / 2 ** 30:.1f} GiB of "
                                    f"fields, more than {MEMORY_SHARE:.0%} of the memory "
                                    "available; skipped")
                for pt in group:
                    ctx.progress.advance(pt.label)
                done += len(group)
                continue
            op = operator(team, l, ls, rng)
            for pt in group:
                ctx.progress.advance(pt.label)
                done += 1
                if pt.isa in failed:
                    continue
                left = max(0.0, deadline - time.perf_counter())
                try:
                    samples = measure(ctx, team, op, pt, left / (len(pts) - done + 1))
                except MeasurementError as exc:
                    ctx.errors.append(str(exc))
                    continue
                ctx.metrics.append(Metric("dslash", "dslash", "Mflop/s", {
                    "action": pt.action, "l": l, "ls": ls, "isa": pt.isa,
                    "threads": len(cores), "cpus": binding, "ranks": 1,
                    "flops_per_site": K.FLOPS_PER_SITE}, samples))
    _derived(ctx)


def _by_fields(pts: list[Point]) -> dict[tuple[int, int], list[Point]]:
    """Points that share their fields (one allocation per L and Ls)."""
    out: dict[tuple[int, int], list[Point]] = {}
    for p in pts:
        out.setdefault((p.l, p.ls), []).append(p)
    return out


def best(figures: list[Metric], action: str, l: int, ls: int) -> Metric | None:  # noqa: E741
    """The best variant's figure of one cell of the table."""
    cell = [m for m in figures if (m.params["action"], m.params["l"], m.params["ls"]) ==
            (action, l, ls)]
    return max(cell, key=lambda m: m.summary.median) if cell else None


def _derived(ctx: RunContext) -> None:
    """The comparison point of each definition whose volumes were measured, and the robustness
    of each cell measured on several variants (one sample each: of the medians)."""
    figures = [m for m in ctx.metrics if m.benchmark == "dslash" and m.name == "dslash"]
    for name, (ls, vols) in DEFINITIONS.items():
        cells = [best(figures, "dwf", v, ls) for v in vols]
        if all(c is not None for c in cells):
            value = statistics.mean(c.summary.median for c in cells if c is not None)
            ctx.metrics.append(Metric("dslash", "comparison_point", "Mflop/s", {
                "definition": name, "ls": ls, "l": ",".join(map(str, vols)),
                "flops_per_site": K.FLOPS_PER_SITE}, [value]))
    keys = {(m.params["action"], m.params["l"], m.params["ls"]) for m in figures}
    for action, l, ls in sorted(keys):  # noqa: E741
        meds = [m.summary.median for m in figures
                if (m.params["action"], m.params["l"], m.params["ls"]) == (action, l, ls)]
        if len(meds) > 1:
            ctx.metrics.append(Metric("dslash", "robustness", "1", {
                "action": action, "l": l, "ls": ls, "over": "kernel variants"},
                [min(meds) / max(meds)]))

