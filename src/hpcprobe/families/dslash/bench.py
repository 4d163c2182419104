"""The dslash benchmark on one node: Grid's per-node Dslash table (Wilson and domain wall over
local volumes L^4, Mflop/s per node, best over the kernel variants), its comparison point under
each named definition, and the robustness (worst / best over the variants at one volume).
Every variant is checked against the reference on a small lattice before any of its figures
counts. One rank runs in this process on a team of threads; several ranks (a --layout, --ranks,
--hosts or a node with several NUMA domains) run the proxies' MPI program (ranks.py), with the
halo exchange, both comms policies and Grid's halo table."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hpcprobe import native
from hpcprobe.common import lazy
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.families.dslash import kernel as K
from hpcprobe.families.dslash import ranks as R
from hpcprobe.machine.sizing import elems_for, free_memory
from hpcprobe.measure import options, sampling
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, bound_cpus, option
from hpcprobe.mpi import find, layouts
from hpcprobe.native import Team
from hpcprobe.probes import proxy, stream
from hpcprobe.results.model import Metric

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

METRICS = (MetricSpec("dslash", "Mflop/s"), MetricSpec("comparison_point", "Mflop/s"),
           MetricSpec("robustness", "1", derived=True), MetricSpec("axpy", "GB/s"),
           MetricSpec("comms_share", "%", "lower", derived=True), MetricSpec("halo", "MB/s"),
           MetricSpec("halo_bidir", "MB/s"))
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
    return options.once(text, vals)


def slices(text: str) -> tuple[int, ...]:
    """Ls values, e.g. 16,12: 1 to K.MAX_LS."""
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        vals = ()
    if not vals or any(not 1 <= v <= K.MAX_LS for v in vals):
        raise argparse.ArgumentTypeError(f"{text}: give domain-wall slice counts Ls from 1 to "
                                         f"{K.MAX_LS}, e.g. 16,12")
    return options.once(text, vals)


def lattice(text: str) -> tuple[int, int, int, int]:
    """A global lattice XxYxZxT, each extent even and at least 4."""
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 4 or any(v < 4 or v % 2 for v in dims):
        raise argparse.ArgumentTypeError(f"{text}: give the lattice as XxYxZxT, each even and at "
                                         "least 4, e.g. 16x16x16x32")
    return dims[0], dims[1], dims[2], dims[3]


@dataclass(frozen=True)
class DslashOptions(proxy.RankOptions):
    """What narrows `hpcprobe run dslash`."""

    l: tuple[int, ...] | None = option(Flag(  # noqa: E741 (Grid's name for it)
        "--l", "local volumes L^4 a rank, e.g. 8,12,16 (default: per profile; Grid's table: "
        "8,12,16,24,32)", parse=volumes, metavar="L"))
    lattice: tuple[int, int, int, int] | None = option(Flag(
        "--lattice", "a global lattice split over the ranks instead of --l (strong scaling), "
        "e.g. 16x16x16x32", parse=lattice, metavar="XxYxZxT"))
    actions: tuple[str, ...] | None = option(Flag(
        "--action", "wilson, dwf or both (default: both)", choices=("wilson", "dwf", "both"),
        convert=options.all_or_one))
    ls: tuple[int, ...] | None = option(Flag(
        "--ls", "domain-wall slice counts (default: 16,12, Grid's before and since 2020)",
        parse=slices, metavar="LS"))
    comms: tuple[str, ...] | None = option(Flag(
        "--comms", "halo exchange: sequential (then compute), overlapped (with the interior "
        "sites) or both (default: both; the table takes the best)",
        choices=("sequential", "overlapped", "both"), convert=options.all_or_one))


@dataclass(frozen=True)
class Point:
    """One figure: an action on a local lattice, with its slice count, on one kernel variant."""

    action: str  # "wilson" or "dwf"
    dims: tuple[int, int, int, int]
    ls: int
    isa: str

    @property
    def l(self) -> int | str:  # noqa: E743
        """L of an L^4 volume (Grid's tables), else XxYxZxT."""
        text = R.label(self.dims)
        return int(text) if text.isdigit() else text

    @property
    def label(self) -> str:
        what = "Wilson" if self.action == "wilson" else f"DWF Ls={self.ls}"
        return f"{what} L={self.l} {self.isa}"


def field_bytes(dims: tuple[int, ...], ls: int) -> int:
    """Bytes of one application's fields: two half-lattice spinors, links at both parities."""
    half = math.prod(dims) // 2
    return 2 * half * 24 * ls * 4 + 2 * half * 4 * 18 * 4


def _ls_of(opts: DslashOptions) -> dict[str, tuple[int, ...]]:
    return {"wilson": (1,), "dwf": opts.ls or DWF_LS}


def too_big(ctx: RunContext, opts: DslashOptions, d: R.Decomposition | None
            ) -> dict[tuple[tuple[int, int, int, int], int], str]:
    """(local volume, Ls) -> why it is not measured: its fields, for all of a node's ranks,
    take more than MEMORY_SHARE of the memory available where it runs (none known for a
    recorded machine). Skipped, where one rank in this process measures the profile's volumes;
    a user error where the user chose the volumes (--l, --lattice) or the ranks measure them
    (one launch measures every volume). The a x + y fields of a volume are smaller (288 B a
    site against at least 384 B)."""
    avail = free_memory(ctx.topo)
    if not avail:
        return {}
    per_node = d.layout.ranks // d.nodes if d else 1
    pts = points(ctx, opts, d)
    big = {}
    for dims in dict.fromkeys(p.dims for p in pts):
        for ls in sorted({p.ls for p in pts}):
            need = per_node * field_bytes(dims, ls)
            if need > MEMORY_SHARE * avail:
                ranks = f" for {per_node} ranks a node" if per_node > 1 else ""
                what = f"L={R.label(dims)}" + (f" Ls={ls}" if ls > 1 else "")
                big[(dims, ls)] = (f"{what} needs {format_bytes(need)} of fields{ranks}, "
                                   f"more than {MEMORY_SHARE:.0%} of the {format_bytes(avail)} "
                                   "available")
    if big and (opts.l or opts.lattice or d is not None):
        raise OptionError(f"dslash: {next(iter(big.values()))}; choose a smaller <l> or <lattice>"
                          + (" or fewer ranks a node" if per_node > 1 else ""))
    return big


def points(ctx: RunContext, opts: DslashOptions, d: R.Decomposition | None) -> list[Point]:
    """Every (action, volume, Ls) of the table on every variant this CPU runs (or the ISA
    asked), on the ranks' local lattices (d) or in this process (None)."""
    isas = [ctx.isa] if ctx.isa_asked else native.supported_isas()
    out = []
    for dims in d.locals if d else _local_volumes(ctx, opts, (1, 1, 1, 1)):
        for action in opts.actions or ("wilson", "dwf"):
            out += [Point(action, dims, ls, isa) for ls in _ls_of(opts)[action] for isa in isas]
    return out


def _local_volumes(ctx: RunContext, opts: DslashOptions, grid: tuple[int, ...]
                   ) -> tuple[tuple[int, int, int, int], ...]:
    if opts.lattice and opts.l:
        raise OptionError("give the local volumes (<l>) or the global lattice (<lattice>), not "
                          "both")
    if opts.lattice:
        x, y, z, t = layouts.split(opts.lattice, grid, "--lattice", 4, True)
        return ((x, y, z, t),)
    return tuple((v, v, v, v) for v in _volumes(ctx, opts))


def decomposition(ctx: RunContext, opts: DslashOptions) -> R.Decomposition | None:
    """The ranks (None: one rank in this process) and each rank's local lattices; a lattice
    that does not divide over the ranks is a user error."""
    pl = opts.placement(ctx, 4)
    if pl is None:
        return None
    return R.Decomposition(pl.ranks, pl.layout, pl.grid, _local_volumes(ctx, opts, pl.grid))


def labels(ctx: RunContext, opts: DslashOptions | None) -> list[str]:
    opts = opts or DslashOptions()
    d = decomposition(ctx, opts)
    big = too_big(ctx, opts, d)  # the run's refusal, or what it skips
    if d is not None:
        where = (f"{d.layout.ranks} rank(s) x {d.ranks.threads} thread(s) ({d.ranks.layout} "
                 f"layout, rank grid {d.grid_text}, {d.nodes} node(s))")
        pts = points(ctx, opts, d)
        lss = sorted({p.ls for p in pts})
        per_node = d.layout.ranks // d.nodes
        return [*(f"a x + y over L={R.label(v)} for {per_node} rank(s) of this node"
                  for v in d.locals),
                f"check each kernel variant and comms policy across the ranks against the "
                f"reference on {R.CHECK_L}^4 a rank, Ls {','.join(map(str, lss))}",
                *(f"{p.label}, {', '.join(_policies(opts))}, {where}" for p in pts),
                *([f"halo exchange (the MPI family's halo test), Ls {','.join(map(str, lss))}"]
                  if d.layout.ranks > 1 else [])]
    n = len(opts.cores(ctx))
    return ["check each kernel variant against the reference on a "
            f"{'x'.join(map(str, CHECK_LATTICE))} lattice",
            *(f"a x + y over L={R.label(v)}, {n} thread(s)"
              for v in _local_volumes(ctx, opts, (1, 1, 1, 1))),
            *(f"{p.label}, {n} thread(s)" + (f" (skipped: {big[(p.dims, p.ls)]})"
                                              if (p.dims, p.ls) in big else "")
              for p in points(ctx, opts, None))]


def _policies(opts: DslashOptions) -> tuple[str, ...]:
    return opts.comms or tuple(R.POLICIES)


def _volumes(ctx: RunContext, opts: DslashOptions) -> tuple[int, ...]:
    return opts.l or SETTINGS[ctx.profile.name].volumes


def axpy(ctx: RunContext, team: Team, cores: tuple[int, ...], dims: tuple[int, ...],
         budget_s: float, ranks: int = 1) -> None:
    """Grid's a x + y memory figure at one volume (three fields of L^4 x 96 B for each of the
    node's ranks, on all their cores: GB/s per node)."""
    l = R.label(dims)  # noqa: E741
    elems = elems_for("triad", ranks * 3 * math.prod(dims) * AXPY_SITE_BYTES, len(cores))
    m = stream.Measurement("axpy", "triad", "regular", "one-per-core", cores, elems, "")
    team.select(cores)
    team.stream_prepare(elems)
    samples = stream.measure(ctx, team, m, budget_s, "dslash")
    ctx.metrics.append(Metric("dslash", "axpy", "GB/s", {
        "l": int(l) if l.isdigit() else l, "size_bytes": m.size_bytes, "threads": len(cores),
        "ranks": ranks, "kernel": "triad"}, samples))


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


def operator(team: Team, dims: tuple[int, int, int, int], ls: int, rng: np.random.Generator
             ) -> K.Operator:
    """Random fields of a lattice in the kernel's layout, first touched by the threads that
    use them, built without the full-lattice complex arrays (a tiled pool of SU(3) links,
    Gaussian spinors)."""
    lat = K.Lattice(dims)
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
    d = decomposition(ctx, opts)
    if d is None:
        _run_here(ctx, opts)
    else:
        proxy.across_or_here(ctx, "dslash", opts, lambda: _run_ranks(ctx, opts, d),
                             lambda: _run_here(ctx, opts))
    _derived(ctx)


def _run_ranks(ctx: RunContext, opts: DslashOptions, d: R.Decomposition) -> None:
    """Every point across the ranks, each variant and policy checked in the same launch; the
    figures of one that fails its check are discarded (and the run fails)."""
    pts = points(ctx, opts, d)
    policies = _policies(opts)
    lss = tuple(dict.fromkeys(p.ls for p in pts))
    too_big(ctx, opts, d)
    find.find(opts.mpi_prefix)  # no MPI: said before anything is measured
    rule = ctx.profile.repetition
    budget = SETTINGS[ctx.profile.name].budget_s
    reps = R.reps_for((1 - AXPY_SHARE) * budget, len(pts) * len(policies), SAMPLE_S,
                      rule.min_samples, rule.max_samples)
    where = opts.where()
    ctx.progress.start("dslash", len(d.locals) + (2 if d.layout.ranks > 1 else 1))
    # Grid's memory table on this node: every local rank's fields, on all their cores
    per_node = d.layout.ranks // d.nodes
    cores = tuple(sorted({c for r in range(per_node) for c in d.layout.cpuset(r)}))
    with Team(cores) as team:
        for v in d.locals:
            axpy(ctx, team, cores, v, AXPY_SHARE * budget / len(d.locals), per_node)
            ctx.progress.advance(f"dslash: a x + y L={R.label(v)}")
    checks, samples, got = R.measure(ctx, d, lss, list(dict.fromkeys(p.isa for p in pts)),
                                     policies, reps, SAMPLE_S, where)
    ctx.progress.advance(f"dslash: {d.layout.ranks} rank(s)")
    passed = set()
    for c in checks:
        key = (c["isa"], c["policy"], c["ls"])
        if c["error"] < CHECK_TOLERANCE:
            passed.add(key)
        else:
            ctx.errors.append(f"dslash: the {c['isa']} kernel with {c['policy']} comms does not "
                              f"match the reference across {d.layout.ranks} ranks (Ls={c['ls']}: "
                              f"relative error {c['error']:.2e}); its figures are discarded")
    if got.outcome.error:
        ctx.errors.append(f"dslash: {got.outcome.error}; the figures checked and measured "
                          "before are kept")
    ctx.metrics += R.metrics(d, samples, passed, got.binding, got.mpi)
    if d.layout.ranks > 1:
        ctx.metrics += R.halo(ctx, d, lss, where)
        ctx.progress.advance("dslash: halo exchange")


def _run_here(ctx: RunContext, opts: DslashOptions) -> None:
    """One rank in this process: the a x + y table, then every point on the team."""
    pts = points(ctx, opts, None)
    cores = opts.cores(ctx)
    budget = SETTINGS[ctx.profile.name].budget_s
    big = too_big(ctx, opts, None)
    vols = _local_volumes(ctx, opts, (1, 1, 1, 1))
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
            ctx.progress.advance(f"dslash: a x + y L={R.label(v)}")
        deadline = time.perf_counter() + (1 - AXPY_SHARE) * budget
        done = 0  # points measured or passed over, for each one's share of the budget
        for (dims, ls), group in _by_fields(pts).items():
            if (dims, ls) in big:
                ctx.warnings.append(f"dslash: {big[(dims, ls)]}; skipped")
                for pt in group:
                    ctx.progress.advance(pt.label)
                done += len(group)
                continue
            op = operator(team, dims, ls, rng)
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
                    "action": pt.action, "l": pt.l, "ls": ls, "isa": pt.isa,
                    "threads": len(cores), "cpus": binding, "ranks": 1,
                    "flops_per_site": K.FLOPS_PER_SITE}, samples))


def _by_fields(pts: list[Point]) -> dict[tuple[tuple[int, int, int, int], int], list[Point]]:
    """Points that share their fields (one allocation per volume and Ls)."""
    out: dict[tuple[tuple[int, int, int, int], int], list[Point]] = {}
    for p in pts:
        out.setdefault((p.dims, p.ls), []).append(p)
    return out


def best(figures: list[Metric], action: str, l: int | str, ls: int  # noqa: E741
         ) -> Metric | None:
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



def scaled(ctx: RunContext, opts: DslashOptions | None, k: int, mode: str, first: int
           ) -> DslashOptions:
    """The options on k ranks for `hpcprobe scale`: one action and Ls (the first asked; DWF
    Ls=16 by default), one volume (--l, else the profile's largest up to 16^4 a rank), ranks
    one per core unless --layout; weak: that volume a rank; strong: the global lattice of the
    first count (or --lattice) split over k."""
    opts = opts or DslashOptions()
    if opts.rank_grid:
        raise OptionError("<rank_grid>: hpcprobe scale chooses the rank grid of each count")
    if opts.lattice:
        local = layouts.split(opts.lattice, layouts.grid(first, 4), "--lattice", 4, True)
    else:
        v = opts.l[0] if opts.l else max(x for x in SETTINGS[ctx.profile.name].volumes
                                         if x <= 16)
        local = (v, v, v, v)
    grid = layouts.grid(k if mode == "weak" else first, 4)
    whole = tuple(a * b for a, b in zip(local, grid, strict=True))
    action = (opts.actions or ("dwf",))[0]
    return replace(opts, l=None, lattice=(whole[0], whole[1], whole[2], whole[3]),
                   actions=(action,), ls=(opts.ls or DWF_LS)[:1], ranks=k,
                   layout=opts.layout or "core")


def total_rate(metrics: list[Metric]) -> list[float]:
    """GFLOP/s of the whole run: the best variant and policy's Mflop/s per node x nodes."""
    figures = [m for m in metrics if m.benchmark == "dslash" and m.name == "dslash"]
    if not figures:
        return []
    m = max(figures, key=lambda m: m.summary.median)
    return [v * m.params.get("nodes", 1) / 1000 for v in m.samples]
