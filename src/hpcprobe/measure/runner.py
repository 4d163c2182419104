"""Run families on this machine and assemble the run: provenance, metrics (and those derived
from them), findings, warnings, errors."""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hpcprobe import native
from hpcprobe.common import signals
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.machine import energy, provenance, sentinel, steal
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.family import Derives, Family, OtherDevice, Progress, RunContext
from hpcprobe.measure.profiles import Profile
from hpcprobe.mpi import find as mpi_find
from hpcprobe.results import conditions
from hpcprobe.results.findings import Finding
from hpcprobe.results.model import Run


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, where the command turns it into one) during a run that had measured
    something: the run as far as it got, its interruption among its errors (and the runs it
    summarises, for a series)."""

    def __init__(self, run: Run, parts: Sequence[Run] = ()) -> None:
        super().__init__()
        self.run = run
        self.parts = list(parts)


def node_provenance(topo: Topology, isa: str) -> dict[str, Any]:
    """What a run records of the node and the build (machine.provenance) and the MPI found."""
    return {**provenance.collect(topo, isa), mpi_find.FOUND.key: mpi_find.found()}


def resolve_isa(requested: str | None) -> str:
    """The ISA variant to run: the one asked for if this CPU has it, else the best one."""
    have = native.supported_isas()
    if requested is None:
        return native.best_isa()
    if requested not in native.isa_names():
        raise OptionError(f"<isa> {requested!r} is unknown; variants: "
                          f"{', '.join(native.isa_names())} (this CPU runs {', '.join(have)})")
    if requested not in have:
        raise OptionError(f"<isa> {requested}: this CPU lacks it; it supports {', '.join(have)}")
    return requested


def plan(topo: Topology, profile: Profile, families: Sequence[Family], isa: str,
         options: Mapping[str, Any], oversubscribe: bool = False, isa_asked: bool = False,
         standalone: bool = False) -> list[tuple[str, list[str]]]:
    """(family, what it will measure) for each family that measures, without measuring."""
    ctx = RunContext(topo, profile, isa, oversubscribe, isa_asked=isa_asked,
                     standalone=standalone)
    return [(f.name, f.plan(ctx, options.get(f.name)) if f.plan else ["(no plan declared)"])
            for f in families if f.run is not None]


#: What the CPUs' time taken by others says of a family's figures: the run's condition its
#: share is kept as, the share from which it is a finding, the finding's kind and its message
_TAKEN = (
    ("steal", steal.WARN, steal.STEAL,
     "the hypervisor took {pct:.1f} % of this guest's CPU time while it ran (steal time): its "
     "figures carry the host's other load; a host that is not oversubscribed, or dedicated "
     "CPUs, give steadier ones"),
    ("others", steal.OTHERS, steal.BUSY,
     "other processes used {pct:.0f} % of its CPUs' time while it ran (another job, a daemon, "
     "a second benchmark): its figures are those of a shared node and are not judged; run it "
     "again on an idle node"),
)


def _steal(ctx: RunContext, name: str, before: steal.Times | None,
           taken: dict[str, dict[str, float]]) -> None:
    """The shares of the CPUs' time the hypervisor took and other processes used while a
    family ran: kept per family, a warning and a finding from `steal.WARN` and
    `steal.OTHERS` on."""
    after = steal.read()
    shares = (steal.share(before, after), steal.others(before, after))
    for (key, at, kind, says), share in zip(_TAKEN, shares, strict=True):
        if share is None:
            continue
        taken.setdefault(key, {})[name] = pct = round(100 * share, 2)
        if share >= at:
            ctx.find(Finding(name, kind, says.format(pct=100 * share), {"percent": pct}))


def _drop_undeclared(ctx: RunContext, families: Sequence[Family]) -> None:
    """A metric whose family did not declare it (its name, unit and direction) is a bug of the
    family: an error of the run, not stored."""
    by_name = {f.name: f for f in families}
    undeclared = [m for m in ctx.metrics
                  if m.benchmark in by_name and not by_name[m.benchmark].declares(m)]
    for benchmark, what in sorted({(m.benchmark, f"{m.name} ({m.unit}, {m.better} is better)")
                                   for m in undeclared}):
        ctx.errors.append(f"{benchmark}: metric {what} is not declared by the family; dropped")
    ctx.metrics = [m for m in ctx.metrics if m not in undeclared]


@dataclass
class _Watch:
    """What the runner reads around each family: the hypervisor's steal and other processes'
    time, the node sentinel, the energy counters, and the seconds each family took (its
    sentinel reading after it included)."""

    brackets: sentinel.Brackets
    meter: energy.Meter
    taken: dict[str, dict[str, float]] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)

    def keep(self, run: Run, ctx: RunContext) -> None:
        """What the run keeps of how it ran: the families' provenance, what was watched and
        the node sentinel's readings (or why it went unwatched)."""
        run.provenance.update(ctx.provenance)
        run.provenance[energy.KEY] = self.meter.provenance()
        conditions.update(run.provenance, seconds=self.spent, **self.taken,
                          sentinel=conditions.sentinel(self.brackets.provenance()))
        if (why := self.brackets.warning()) is not None:
            ctx.warnings.append(why)


def _family(ctx: RunContext, family: Family, opts: Any, watch: _Watch) -> bool:
    """One family's measurements and their bookkeeping (done whole, a signal held till
    after); whether a signal arrived meanwhile."""
    assert family.run is not None
    began = time.perf_counter()
    before = steal.read()
    watch.meter.take(None)  # the family's energy alone, not the sentinel's reading before it
    try:
        family.run(ctx, opts)
    except MeasurementError as exc:  # named once: "fio: …", not "fio: fio: …"
        said = str(exc)
        ctx.errors.append(said if re.match(rf"{re.escape(family.name)}\b", said)
                          else f"{family.name}: {said}")
    except KeyboardInterrupt:  # what was measured and validated before it is kept
        ctx.interrupted = True
    found = None
    with signals.deferred() as arrived:  # the bookkeeping of what it measured, whole
        ctx.close_ledgers()
        _steal(ctx, family.name, before, watch.taken)
        for m in [m for m in ctx.metrics if not m.samples]:  # a family's bug: no figure
            ctx.errors.append(f"{m.benchmark}: {m.name} {m.params} has no sample; dropped")
        ctx.metrics = [m for m in ctx.metrics if m.samples]
        watch.meter.take(family.name)
        if not ctx.interrupted:  # read after every family: it brackets the next
            found = watch.brackets.take(family.name)
    watch.spent[family.name] = round(time.perf_counter() - began, 2)
    if found is not None and family.capability(OtherDevice) is None and any(
            m.benchmark == family.name for m in ctx.metrics):
        ctx.find(found)  # a family with no figure has none to mix up
    return bool(arrived)


def _families(ctx: RunContext, measured: Sequence[Family], options: Mapping[str, Any],
              watch: _Watch) -> conditions.Stop | None:
    """The families in order; where one was interrupted, what it was and what was not run."""
    for i, family in enumerate(measured):
        if _family(ctx, family, options.get(family.name), watch) or ctx.interrupted:
            n = sum(m.benchmark == family.name for m in ctx.metrics)
            rest = [f.name for f in measured[i + 1:]]
            ctx.errors.append(f"{family.name}: interrupted (Ctrl-C or SIGTERM); the {n} "
                              "figure(s) it had measured are kept"
                              + (f"; not run: {', '.join(rest)}" if rest else ""))
            return conditions.Stop(family.name, tuple(rest))
    return None


def execute(topo: Topology, profile: Profile, families: Sequence[Family], isa: str,
            options: Mapping[str, Any], progress: Progress, oversubscribe: bool = False,
            tag: str | None = None, isa_asked: bool = False, standalone: bool = False) -> Run:
    """Run the families that measure, in order (a family's failure is recorded and the others
    go on), then add what the deriving ones derive from all the metrics. Every family plans
    first: a mistake in its options is said before anything is measured. Interrupted (Ctrl-C)
    after a figure was measured, it stops there and raises `Interrupted` with the run so far."""
    t0 = time.perf_counter()
    ctx = RunContext(topo, profile, isa, oversubscribe, progress, isa_asked=isa_asked,
                     standalone=standalone)
    measured = [f for f in families if f.run is not None]
    for family in measured:
        if family.plan is not None:
            family.plan(ctx, options.get(family.name))
    run = Run(run_id=uuid.uuid4().hex[:12],
              created=datetime.now(UTC).isoformat(timespec="seconds"),
              host=socket.gethostname(), profile=profile.name,
              benchmarks=[f.name for f in measured],
              provenance=node_provenance(topo, isa), topology=topo.to_dict(), tag=tag)
    watch = _Watch(sentinel.Brackets(topo, isa), energy.Meter.of())
    watch.brackets.take(None)
    ctx.meter = watch.meter
    watch.meter.start()
    try:
        watch.meter.rest(profile.idle_s)  # the node's idle power, before the first benchmark
        interrupted = _families(ctx, measured, options, watch)
    finally:
        watch.meter.stop()
    for family in families:
        if (derives := family.capability(Derives)) is not None:
            ctx.metrics.extend(derives.derive(ctx.metrics))
    _drop_undeclared(ctx, families)
    watch.keep(run, ctx)
    run.metrics = ctx.metrics
    run.findings = ctx.findings
    run.warnings = ctx.warnings
    run.errors = ctx.errors
    run.duration_s = round(time.perf_counter() - t0, 3)
    if interrupted is not None:
        if not run.metrics:
            raise KeyboardInterrupt
        conditions.update(run.provenance, interrupted=interrupted)
        raise Interrupted(run)
    return run
