"""`hpcprobe scale`: a family that declares its problem size (Family.sized) run at a ladder of
rank counts in weak mode (the size a rank held) and strong mode (the total held). Each count's
run is a run of its own (its provenance says which series, mode and count it belongs to), and
a summary run holds the family's total rate at each count as `scale` metrics, from which the
views derive the speedup against the first count (bootstrap CI), the parallel efficiency and
the ideal line."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.common.parts import Part
from hpcprobe.machine.sizing import thread_ladder
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import runner, scaling_views
from hpcprobe.measure.family import Family, Progress, RunContext, Sized
from hpcprobe.measure.profiles import Profile
from hpcprobe.measure.summary import Summary
from hpcprobe.results import conditions
from hpcprobe.results.model import Metric, Run

MODES = ("weak", "strong")
#: The benchmark name of the scaling figures.
BENCHMARK = "scale"


@dataclass(frozen=True)
class Scaled:
    """What a run of a scaling series records (its provenance part `scale`): each count's run
    its series, mode and rank count; the series' summary run its series, family, counts,
    modes, and each count's run (mode, ranks, run id)."""

    series: str | None = None
    mode: str | None = None
    ranks: int | None = None
    family: str | None = None
    counts: list[int] | None = None
    modes: list[str] | None = None
    runs: list[dict[str, Any]] | None = None


SCALE = Part("scale", Scaled)
#: The series' summary run: the rate at each count, the speedup and the efficiency.
SUMMARY = Summary(BENCHMARK, (scaling_views.tables,), (scaling_views.figures,),
                  frozenset({"run", "base_ranks"}))


def sized(family: Family) -> Sized:
    """The family's problem size, which a scaling study needs."""
    got = family.capability(Sized)
    if got is None or family.plan is None:
        raise UserError(f"{family.name} declares no problem size to scale")
    return got


def ladder(topo: Topology, family: Family, asked: Sequence[int] | None) -> list[int]:
    """The rank counts: those asked for, else 1, 2, 4, ... up to the cores (from the fewest
    the family runs on)."""
    least = sized(family).least
    return list(asked or [k for k in thread_ladder(topo.counts()["cores"]) if k >= least]
                or [least])


def chosen_modes(family: Family, asked: str, opts: Any = None) -> tuple[str, ...]:
    """The modes of `--mode` (both: every one the family scales in with these options)."""
    size = sized(family)
    if asked != "both":
        return (asked,)
    return size.modes_for(opts) if size.modes_for is not None else size.modes


def steps(ctx: RunContext, family: Family, opts: Any, counts: Sequence[int],
          modes: Sequence[str]) -> list[tuple[str, int, Any]]:
    """(mode, ranks, the family's options) of every run, each planned (a size that does not
    divide over a count, a count the layout cannot give: said before anything runs)."""
    size = sized(family)
    assert family.plan is not None
    for mode in modes:
        if mode not in size.modes:
            raise OptionError(f"<mode> {mode}: {family.name} scales {' or '.join(size.modes)}"
                              " only")
    if min(counts) < size.least:
        raise OptionError(f"<ranks> {min(counts)}: {family.name} needs at least "
                          f"{size.least} ranks")
    out = []
    for mode in modes:
        for k in counts:
            o = size.at(ctx, opts, k, mode, counts[0])
            family.plan(ctx, o)
            out.append((mode, k, o))
    return out


def execute(topo: Topology, profile: Profile, family: Family, isa: str, opts: Any,
            counts: Sequence[int], modes: Sequence[str], progress: Progress,
            oversubscribe: bool = False, tag: str | None = None, isa_asked: bool = False
            ) -> tuple[Run, list[Run]]:
    """Every (mode, count) run of the family, and the summary run of the series. Interrupted
    (Ctrl-C), it raises `runner.Interrupted` with the summary of the counts that ended and,
    among its parts, the figures of the count it stood in (no point of the series)."""
    ctx = RunContext(topo, profile, isa, oversubscribe, isa_asked=isa_asked, standalone=True)
    todo = steps(ctx, family, opts, counts, modes)
    size = sized(family)
    series = uuid.uuid4().hex[:12]
    runs: list[tuple[str, int, Run]] = []
    cut: Run | None = None  # the count a signal stopped, as far as it got
    stopped: conditions.Stop | None = None
    for i, (mode, k, o) in enumerate(todo):
        try:
            run = runner.execute(topo, profile, [family], isa, {family.name: o}, progress,
                                 oversubscribe, tag, isa_asked, standalone=True)
        except KeyboardInterrupt as stop:
            cut = stop.run if isinstance(stop, runner.Interrupted) else None
            if cut is not None:
                SCALE.put(cut.provenance, Scaled(series, mode, k))
            if not runs:
                raise
            stopped = conditions.Stop(f"{family.name} at {k} rank(s), {mode}",
                                      tuple(f"{kk} rank(s), {mm}" for mm, kk, _ in todo[i + 1:]))
            break
        SCALE.put(run.provenance, Scaled(series, mode, k))
        runs.append((mode, k, run))
    first = runs[0][2]
    out = replace(first, run_id=series, benchmarks=[BENCHMARK], metrics=[], findings=[],
                  warnings=[], errors=[], duration_s=sum(r.duration_s for _, _, r in runs))
    out.provenance = dict(first.provenance)
    SCALE.put(out.provenance, Scaled(series, family=family.name, counts=list(counts),
                                     modes=list(modes), runs=[{"mode": mode, "ranks": k,
                                                               "run_id": r.run_id}
                                                              for mode, k, r in runs]))
    if readings := _sentinel(family.name, runs):
        what = next(s for _, _, r in runs if (s := r.conditions.sentinel) is not None)
        conditions.update(out.provenance, sentinel=replace(what, readings=readings))
    for mode, k, run in runs:
        where = f"{k} rank(s), {mode}"
        out.warnings += [f"{where}: {w}" for w in run.warnings]
        out.errors += [f"{where}: {e}" for e in run.errors]
        rate = size.rate(run.metrics)
        if rate:
            unit = size.unit_of(run.metrics) if size.unit_of else size.unit
            out.metrics.append(Metric(BENCHMARK, "rate", unit, {
                "family": family.name, "mode": mode, "ranks": k, "base_ranks": counts[0],
                "figure": size.what, "run": run.run_id}, rate))
        else:
            out.errors.append(f"{where}: no {size.what} measured; this count has no "
                              "point")
    if stopped is not None:
        rest = stopped.not_run
        out.errors.append(f"interrupted (Ctrl-C or SIGTERM) during {stopped.benchmark}"
                          + ("; the figures it had measured are kept in a run of their own, "
                             "no point of the series" if cut is not None else "")
                          + (f"; not run: {'; '.join(rest)}" if rest else ""))
        conditions.update(out.provenance, interrupted=stopped)
        raise runner.Interrupted(out, [r for _, _, r in runs] + ([cut] if cut else []))
    return out, [r for _, _, r in runs]


def _sentinel(name: str, runs: list[tuple[str, int, Run]]) -> tuple[conditions.Reading, ...]:
    """The node sentinel's readings of the whole series, in order: each count's, the
    benchmark they follow named with its count."""
    out: list[conditions.Reading] = []
    after = None
    for mode, k, run in runs:
        kept = run.conditions.sentinel
        for r in () if kept is None else kept.readings:
            if r.after == name:
                after = f"{name} at {k} rank(s), {mode}"
            out.append(replace(r, after=after))
    return tuple(out)
