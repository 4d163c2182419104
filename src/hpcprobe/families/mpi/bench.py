"""The mpi benchmark: OSU-convention point-to-point tests for each kind of rank pair the node
has, multi-pair message rate, collectives at a ladder of rank counts, and a 4-D halo exchange,
run out of process with the user's MPI; every sample stored, the binding read back."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import OptionError
from hpcprobe.families.mpi import protocol
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import thread_ladder
from hpcprobe.machine.topology import Topology, relation
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, option
from hpcprobe.measure.sampling import Sampled
from hpcprobe.mpi import build, find, launch, launchers, params
from hpcprobe.mpi.launchers import Layout
from hpcprobe.mpi.program import COLLECTIVES, PT2PT, UNITS
from hpcprobe.results.model import Metric

TESTS = (*PT2PT, "message_rate", *COLLECTIVES, "halo")
#: Pair kinds and the topology relations of their two CPUs.
PAIR_KINDS = {"intra-l3": ("same-l3",), "intra-socket": ("same-numa", "same-package"),
              "inter-socket": ("cross-package",), "inter-node": ()}
#: Every metric it emits: the tests, the slowest and fastest rank of collectives, the halo's
#: bidirectional figure.
METRICS = (*(MetricSpec(t, *UNITS[t]) for t in UNITS),
           *(MetricSpec(f"{c}_rank_{end}", "us", "lower") for c in COLLECTIVES
             for end in ("max", "min")),
           MetricSpec("halo_bidir", "MB/s"))
#: Grid's halo volumes (local L^4) and a Wilson half spinor in single precision per site:
#: 2 spins x 3 colours x complex float = 48 B; Ls = 1 (Wilson; DWF would be 12 or 16).
HALO_L = (8, 12, 16, 24, 32)
#: Least samples per test and size with OSU's iteration counts (`hpcprobe mpi`).
FULL_SAMPLES = 10
SITE_BYTES = 48


@dataclass(frozen=True)
class Settings:
    """What a profile gives the mpi family (its time follows OSU's iteration counts)."""

    full_iterations: bool  # `hpcprobe mpi`: OSU's iteration counts, not a tenth of them


SETTINGS = {"quick": Settings(False), "default": Settings(True), "thorough": Settings(True)}


@dataclass(frozen=True)
class MpiOptions:
    """What `hpcprobe mpi` asks for; None everywhere is `hpcprobe run`'s short section."""

    np: int | None = option(Flag("--np", "ranks (default: one per CPU of the placement)",
                                 parse=options.at_least(1, "a rank count")))
    launcher: str | None = option(options.LAUNCHER)
    placement: str | None = option(options.PLACEMENT, note="rank i on CPU i")
    tests: tuple[str, ...] | None = option(Flag(
        "--tests", "latency, bandwidth, bibw, message_rate, allreduce, bcast, alltoall, "
        "barrier, halo (default: all)", parse=options.names))
    pairs: tuple[str, ...] | None = option(Flag(
        "--pairs", "also run point-to-point tests between two ranks of each kind: intra-l3, "
        "intra-socket, inter-socket, inter-node", parse=options.names))
    hosts: tuple[str, ...] | None = option(options.HOSTS)
    mpi_prefix: str | None = option(options.MPI_PREFIX)
    timeout_s: float | None = option(options.TIMEOUT, note="on a test (one size) that makes no "
                                     "progress (default 600; 30 in hpcprobe run)")
    max_size: int | None = option(Flag(
        "--max-size", "largest message (default: 4MiB; collectives 1MiB)", parse=options.size))
    full: bool = False  # OSU iteration counts (hpcprobe mpi) instead of a tenth of them


@dataclass(frozen=True)
class Step:
    """One launch: a rank layout, the tests it runs, and how its layout was chosen."""

    layout: Layout
    tests: tuple[str, ...]
    placement: str
    pair: str | None = None  # the pair kind of ranks 0 and 1, for point-to-point figures


def pair_cpus(topo: Topology, kind: str) -> tuple[int, int] | None:
    """Two cores whose relation is of this kind (intra-L3, intra-socket, inter-socket), the
    first such in topology order; None where the node has no such pair."""
    cores = place(topo, "one-per-core").cpus
    for i, a in enumerate(cores):
        for b in cores[i + 1:]:
            if relation(topo, a, b) in PAIR_KINDS[kind]:
                return a, b
    return None


def pair_kind(topo: Topology, a: int, b: int) -> str:
    rel = relation(topo, a, b)
    return next((k for k, rels in PAIR_KINDS.items() if rel in rels), rel)


def check_tests(tests: tuple[str, ...]) -> None:
    for t in tests:
        if t not in TESTS:
            raise OptionError(f"<tests> {t!r} is unknown; tests: {', '.join(TESTS)}")


def plan(topo: Topology, opts: MpiOptions, oversubscribe: bool, max_points: int | None
         ) -> list[Step]:
    """The launches. `hpcprobe mpi`: the asked tests on --np ranks of the placement, and a
    two-rank launch per asked pair kind. `hpcprobe run`: every test on one rank per core, a
    two-rank launch for each other pair kind the node has, collectives at fewer ranks."""
    tests = opts.tests or TESTS
    check_tests(tests)
    name = opts.placement or "one-per-core"
    hosts = opts.hosts or ()
    if hosts and opts.np and opts.np % len(hosts):
        raise OptionError(f"<np> {opts.np}: not a multiple of the {len(hosts)} hosts")
    avail = len(place(topo, name).cpus)
    # ranks per host: --np split over the hosts, else one per CPU of the placement (every host
    # is taken to look like this one)
    per_host = opts.np // max(1, len(hosts)) if opts.np else avail
    if per_host * max(1, len(hosts)) < 2:
        raise OptionError(f"<np> {opts.np}: the MPI tests need at least 2 ranks" if opts.np else
                          f"placement {name} yields {avail} CPU here; the MPI tests need 2 ranks: "
                          "use <np> 2 <oversubscribe>")
    if per_host > avail and not oversubscribe:
        raise OptionError(f"<np> {opts.np}: placement {name} yields {avail} CPU(s) here; use "
                          f"<np> <= {avail * max(1, len(hosts))} or <oversubscribe>")
    cpus = place(topo, name, per_host, oversubscribe).cpus
    main = Layout(cpus * len(hosts), tuple(h for h in hosts for _ in cpus)) if hosts else \
        Layout(cpus)
    a, b = main.cpus[:2]
    first_pair = ("inter-node" if main.hosts and main.hosts[0] != main.hosts[1] else
                  "same-cpu" if a == b else pair_kind(topo, a, b))
    steps = [Step(main, tests, name, first_pair)]
    pt2pt = tuple(t for t in tests if t in PT2PT)
    kinds = opts.pairs if opts.pairs is not None else (
        () if opts.np else tuple(k for k in PAIR_KINDS if k != "inter-node"))
    for kind in kinds:
        if kind not in PAIR_KINDS:
            raise OptionError(f"<pairs> {kind!r} is unknown; pair kinds: {', '.join(PAIR_KINDS)}")
        if not pt2pt or kind == first_pair:
            continue
        if kind == "inter-node":
            if len(hosts) < 2:
                raise OptionError("<pairs> inter-node needs two hosts: <hosts> A,B")
            steps.append(Step(Layout((cpus[0], cpus[0]), hosts[:2]), pt2pt, name, kind))
            continue
        pair = pair_cpus(topo, kind)
        if pair is None:
            if opts.pairs is not None:
                raise OptionError(f"<pairs> {kind}: this node has no {kind} pair of cores")
            continue
        steps.append(Step(Layout(pair), pt2pt, f"pair {kind}", kind))
    colls = tuple(t for t in tests if t in COLLECTIVES)
    if colls and opts.np is None and not hosts:
        counts = [k for k in thread_ladder(len(cpus)) if 2 <= k < len(cpus)]
        if max_points is not None:
            counts = counts[:max_points]
        steps += [Step(Layout(cpus[:k]), colls, name) for k in counts]
    return steps


def _command(exe: Path, step: Step, opts: MpiOptions, reps: tuple[int, int]) -> list[str]:
    args = [str(exe), "--tests", ",".join(step.tests), "--reps", str(reps[1]),
            "--min-reps", str(reps[0]),
            "--iter-scale", "1" if opts.full else "0.1",
            "--halo-l", ",".join(map(str, HALO_L)), "--site-bytes", str(SITE_BYTES)]
    if opts.max_size is not None:
        args += ["--max-size", str(opts.max_size),
                 "--coll-max-size", str(min(opts.max_size, 1 << 20))]
    return args


def _binding(ctx: RunContext, step: Step, bindings: list[dict[str, Any]]) -> str:
    """Each rank's CPUs as read back ("0;1" for ranks 0 and 1); one that differs from the one
    asked for is a warning."""
    got = {b["rank"]: b for b in bindings}
    out = []
    for r, cpu in enumerate(step.layout.cpus):
        b = got.get(r)
        cpus = b["cpus"] if b else []
        out.append(format_cpulist(cpus) if cpus else "?")
        if cpus != [cpu]:
            ctx.warnings.append(f"mpi: rank {r} asked for CPU {cpu}, bound to "
                                f"{format_cpulist(cpus) if cpus else 'unknown CPUs'} "
                                f"({len(step.layout.cpus)} ranks, {step.placement})")
    return ";".join(out)


def _metrics(step: Step, outcome: launch.Outcome, launcher: str, mpi: find.Mpi,
             binding: str) -> list[Metric]:
    """One metric per test and size (every sample kept); collectives add the slowest and the
    fastest rank, the halo its bidirectional figure."""
    base: dict[str, Any] = {"ranks": step.layout.ranks, "launcher": launcher,
                            "placement": step.placement,
                            "cpus": format_cpulist(step.layout.cpus), "binding": binding,
                            "hosts": ",".join(dict.fromkeys(step.layout.hosts or ())),
                            "mpi": f"{mpi.implementation} {mpi.version}"}
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in outcome.samples:
        groups.setdefault((s["test"], s["size"]), []).append(s)
    out = []
    for (test, size), samples in groups.items():
        unit, better = UNITS[test]
        params = dict(base, size_bytes=size, pairs=samples[0].get("pairs", 1 if test in PT2PT
                                                                 else step.layout.ranks // 2))
        if test in PT2PT:
            params["pair"] = step.pair
        if test == "halo":
            s0 = samples[0]
            params.update(l=s0["l"], ls=s0["ls"], site_bytes=SITE_BYTES, faces=s0["faces"],
                          dims="x".join(map(str, s0["dims"])))
        out.append(Metric("mpi", test, unit, params, [s["value"] for s in samples], better))
        if test in COLLECTIVES:
            out.append(Metric("mpi", f"{test}_rank_max", unit, dict(params),
                              [s["max"] for s in samples], better))
            out.append(Metric("mpi", f"{test}_rank_min", unit, dict(params),
                              [s["min"] for s in samples], better))
        if test == "halo":
            out.append(Metric("mpi", "halo_bidir", unit, dict(params),
                              [s["bidir"] for s in samples], better))
    return out


def _one_cpu(ctx: RunContext, opts: MpiOptions) -> str | None:
    """Why `hpcprobe run` leaves the MPI tests out on a node (or cpuset) of one CPU, where no
    rank count or host was asked for; None where they run (`hpcprobe mpi` refuses instead)."""
    if ctx.standalone or opts.np or opts.hosts:
        return None
    name = opts.placement or "one-per-core"
    avail = len(place(ctx.topo, name).cpus)
    return None if avail >= 2 else (f"placement {name} yields {avail} CPU here and the MPI "
                                    "tests need 2 ranks (--np 2 --oversubscribe runs them)")


def labels(ctx: RunContext, opts: MpiOptions | None) -> list[str]:
    """Each launch: its ranks, placement and tests."""
    opts = opts or MpiOptions()
    if (why := _one_cpu(ctx, opts)) is not None:
        return [f"skipped: {why}"]
    steps = plan(ctx.topo, opts, ctx.oversubscribe, ctx.profile.curve_points)
    return [f"{s.layout.ranks} ranks, {s.placement}"
            + (f" ({s.pair} pair)" if s.pair and s.pair not in s.placement else "")
            + ": " + ", ".join(s.tests) for s in steps]


def run(ctx: RunContext, opts: MpiOptions | None) -> None:
    standalone = ctx.standalone
    opts = opts or MpiOptions()
    if standalone and SETTINGS[ctx.profile.name].full_iterations:
        opts = replace(opts, full=True)
    if (why := _one_cpu(ctx, opts)) is not None:
        ctx.warnings.append(f"mpi: skipped: {why}")
        return
    try:
        mpi = find.find(opts.mpi_prefix)
    except find.MpiNotFound as exc:
        if standalone:
            raise
        ctx.warnings.append(f"mpi: skipped: {exc}")
        return
    steps = plan(ctx.topo, opts, ctx.oversubscribe, ctx.profile.curve_points)
    exe = build.build(mpi)
    launcher, path = launchers.choose(mpi, opts.launcher)
    params.MPI.put(ctx.provenance, params.provenance(mpi, launcher.name, path))
    # the samples share OSU's iteration count between them (the C program splits it): up to the
    # profile's most samples where OSU runs many iterations (small messages), which costs no
    # more time and narrows the CI of the median; at least `least` where it runs a handful
    rule = ctx.profile.repetition
    least = max(rule.min_samples, FULL_SAMPLES if opts.full else 0)
    reps = (least, max(least, rule.max_samples))
    timeout = opts.timeout_s or (600.0 if opts.full else 30.0)
    ctx.progress.start("mpi", len(steps))
    for step in steps:
        with tempfile.TemporaryDirectory(prefix="hpcprobe-mpi-") as tmp:
            spec = launcher.build(path, mpi, step.layout, _command(exe, step, opts, reps),
                                  Path(tmp), {})
            outcome = launch.run(spec, timeout, launcher.name)
        what = f"{step.layout.ranks} ranks, {step.placement}"
        if outcome.info is None and not outcome.samples and standalone and step is steps[0]:
            # the launcher never got the ranks going (no Slurm controller, no hosts, a broken
            # MPI): nothing was measured, so nothing is stored
            raise OptionError(f"mpi: the {launcher.name} launcher could not start the ranks "
                              f"({outcome.error}); nothing was measured or stored. Where the MPI "
                              "failed in MPI_Init, check its variables in the environment "
                              "(OMPI_MCA_*, MPIR_CVAR_*, UCX_*); where the launcher cannot run "
                              "here, choose another <launcher> (`hpcprobe mpi info` lists the "
                              "usable ones)")
        ctx.progress.advance(f"mpi {what}")
        binding = _binding(ctx, step, outcome.bindings)
        got = _metrics(step, outcome, launcher.name, mpi, binding)
        ctx.metrics.extend(got)
        for m in got:  # the figures (not the slowest/fastest rank) against the CI target
            if m.name in UNITS:
                label = f"{m.name} {m.params['size_bytes']} B, {what}"
                ctx.record("mpi", label, Sampled(m.samples, steady=True, target=rule.target))
        if outcome.error:
            ctx.errors.append(f"mpi ({what}): {outcome.error}; the figures measured before "
                              "are kept")
    # the thresholds were read for the provenance already (one listing per environment)
    found = protocol.findings([m for m in ctx.metrics if m.benchmark == "mpi"],
                              params.thresholds(mpi), mpi.implementation)
    for f in found:
        ctx.find(f)


def info(opts: MpiOptions) -> int:
    """`hpcprobe mpi info`: the MPI found, its fingerprint, the test program, the launchers."""

    mpi = find.find(opts.mpi_prefix)
    exe = build.program(mpi)
    print(f"MPI:          {mpi.implementation} {mpi.version} (MPI standard {mpi.standard})")
    print(f"prefix:       {mpi.prefix}")
    print(f"mpicc:        {mpi.mpicc}")
    print(f"wrapper:      {mpi.wrapper_flags}")
    print(f"fingerprint:  {mpi.fingerprint}")
    print(f"test program: {exe} ({'built' if exe.is_file() else 'built on first use'})")
    if known := params.thresholds(mpi):
        print("thresholds:")
        for t in known:
            print(f"  {t.variable} = {t.size} B, {t.scope}: from there {t.above}")
    print("launchers:")
    for name, path in launchers.available(mpi).items():
        ln = launchers.LAUNCHERS[name]
        print(f"  {name:8s} {path or 'not usable here'}  ({ln.description})")
    return 0


#: `hpcprobe scale mpi`: the collective and message size (a rank's) held across the counts.
SCALE_TEST, SCALE_SIZE = "allreduce", 1 << 20


def scaled(ctx: RunContext, opts: MpiOptions | None, k: int, mode: str, first: int
           ) -> MpiOptions:
    """A collective (--tests, default allreduce) on k ranks, each rank's message held (--max-size,
    default 1 MiB; weak scaling: the data reduced grows with the ranks)."""
    opts = opts or MpiOptions()
    tests = tuple(t for t in (opts.tests or (SCALE_TEST,)) if t in COLLECTIVES)
    if not tests or tests[0] == "barrier":
        raise OptionError("hpcprobe scale mpi runs a collective that moves data: <tests> "
                          "allreduce, bcast or alltoall")
    return replace(opts, np=k, tests=tests[:1], pairs=(),
                   max_size=opts.max_size or SCALE_SIZE)


def aggregate(metrics: list[Metric]) -> list[float]:
    """GB/s of the whole collective at its largest size: ranks x bytes a rank / time."""
    figures = [m for m in metrics if m.benchmark == "mpi" and m.name in COLLECTIVES
               and m.name != "barrier"]
    if not figures:
        return []
    m = max(figures, key=lambda m: m.params["size_bytes"])
    return [m.params["ranks"] * m.params["size_bytes"] / (us * 1e-6) / 1e9 for us in m.samples
            if us > 0]
