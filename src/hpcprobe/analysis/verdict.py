"""The verdict of a run: each headline figure its families pick (`Headline`), against the
ceiling its hardware sets and against a reference (`Expected`: a value and a tolerance), marked
ok, below, or not judged with the reason. Pure: reads run documents and a reference only."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hpcprobe.machine.sentinel import NODE_CHANGED
from hpcprobe.machine.steal import BUSY, STEAL
from hpcprobe.results import ceilings
from hpcprobe.results.ceilings import Bound
from hpcprobe.results.model import Metric, Run

#: The tolerance no reference is tighter than where a family states none: run-to-run changes
#: smaller than this are within what a node's figures do from one day to the next
FLOOR = 0.05
#: A figure above its ceiling by more than this is a finding about the ceiling (or the figure)
ABOVE_CEILING = 1.01
#: Findings of the run that leave a benchmark's figures unjudged: another state of the node
#: (the sentinel moved), the hypervisor's steal, other processes on its CPUs -> the reason in a
#: few words
DISTURBED = {NODE_CHANGED.name: "node moved", STEAL.name: STEAL.name,
             BUSY.name: "node busy"}


@dataclass(frozen=True)
class Headline:
    """One headline figure a family picks from a run: `key` names it across runs (a reference
    keeps it so: "memory.dram_triad_all"), `label` for the screen, the metric whose median and
    CI it is, its ceiling in the metric's unit where the hardware gives one (`ceiling_source`
    says how, or why there is none), and the practical tolerance (`floor`)."""

    key: str
    label: str
    metric: Metric
    ceiling: float | None = None
    ceiling_source: str | None = None
    floor: float = FLOOR

    @property
    def of_ceiling(self) -> float | None:
        """The figure as a share of its ceiling (1.0 = at it)."""
        if self.ceiling is None or self.ceiling <= 0:
            return None
        return self.metric.summary.median / self.ceiling


def best(metrics: Sequence[Metric]) -> Metric | None:
    """The best of these figures by median (the highest, or the lowest where lower is better),
    None where there are none."""
    if not metrics:
        return None
    sign = 1.0 if metrics[0].better == "higher" else -1.0
    return max(metrics, key=lambda m: sign * m.summary.median)


#: What a family declares to give its headline figures of a run (none: it measured none)
Picker = Callable[[Run], list[Headline]]


@dataclass(frozen=True)
class Expected:
    """A reference's figure: the value expected, its relative tolerance, and what it came
    from (how many runs, their relative spread)."""

    key: str
    label: str
    unit: str
    better: str
    value: float
    tolerance: float
    runs: int
    spread: float | None = None

    @property
    def threshold(self) -> float:
        """The worst value still within the tolerance."""
        sign = -1.0 if self.better == "higher" else 1.0
        return self.value * (1.0 + sign * self.tolerance)


@dataclass(frozen=True)
class Reference:
    """Expected figures by key, and where they came from (one line: a file, previous runs)."""

    source: str
    figures: Mapping[str, Expected] = field(default_factory=dict)
    name: str = ""  # in a few words, for a listing of nodes (the file; previous runs)
    #: the node's state its runs shared (analysis.health.state_of), which a check compares
    state: Mapping[str, str] = field(default_factory=dict)
    #: a figure of fewer runs than this is not judged (a host's previous runs: one or two
    #: runs say nothing of how far a figure moves from run to run)
    min_runs: int = 1


@dataclass(frozen=True)
class Row:
    """One judged headline: its mark, why (for not judged), and its reference if any."""

    headline: Headline
    expected: Expected | None
    mark: str
    why: str = ""

    @property
    def change(self) -> float | None:
        """The figure against its reference (0.05 = 5 % above the expected value)."""
        if self.expected is None or self.expected.value == 0:
            return None
        return self.headline.metric.summary.median / self.expected.value - 1.0


#: The marks a figure's judgement may have, worst first as the verdict counts them (every
#: view and export reads them here)
MARKS = ("below", "ok", "not judged", "above ceiling")


@dataclass(frozen=True)
class Verdict:
    rows: list[Row]
    reference: Reference | None
    #: what the host's history says of its figures (recent change points), one line each
    history: list[str] = field(default_factory=list)
    #: whether the run is kept, so that later runs are judged against it
    kept: bool = True

    def marked(self, mark: str) -> list[Row]:
        return [r for r in self.rows if r.mark == mark]

    @property
    def failed(self) -> bool:
        """A figure is below its reference (the command then exits 1)."""
        return bool(self.marked("below"))


def disturbed(run: Run) -> dict[str, str]:
    """Benchmark -> why its figures cannot be judged (the node changed state while it ran,
    the hypervisor's steal, other processes on its CPUs), from the run's findings."""
    out: dict[str, str] = {}
    for f in run.findings:
        if f.get("kind") in DISTURBED and isinstance(f.get("benchmark"), str):
            out.setdefault(f["benchmark"], DISTURBED[f["kind"]])
    return out


def judge(h: Headline, expected: Expected | None, noisy: str | None) -> Row:
    """Mark one headline: below when its whole CI is past the reference's threshold; ok when
    its median is within it and its CI no wider than the tolerance; else not judged, with the
    reason in a few words."""
    s = h.metric.summary
    if (over := h.of_ceiling) is not None and over > ABOVE_CEILING:
        return Row(h, expected, "above ceiling", "the ceiling or the figure is wrong")
    if expected is None:
        return Row(h, None, "not judged", "no reference")
    if noisy is not None:
        return Row(h, expected, "not judged", noisy)
    if s.n < 3 or not math.isfinite(s.rel_ci_halfwidth):
        return Row(h, expected, "not judged", f"n={s.n}")
    sign = 1.0 if expected.better == "higher" else -1.0
    t = sign * expected.threshold  # worse is below t, on the sign's scale
    far_end = sign * (s.ci95[1] if sign > 0 else s.ci95[0])
    if far_end < t:
        return Row(h, expected, "below")
    if sign * s.median < t or s.rel_ci_halfwidth > expected.tolerance:
        return Row(h, expected, "not judged", f"noisy ±{100 * s.rel_ci_halfwidth:.0f}%")
    return Row(h, expected, "ok")


def headlines(run: Run, pickers: Sequence[Picker]) -> list[Headline]:
    """Every family's headline figures of a run, in registry order."""
    return [h for pick in pickers for h in pick(run)]


def bounded(pick: Picker, bounds: Sequence[Bound], run: Run) -> list[Headline]:
    """A family's headlines of a run, each with the ceiling its sources declare (`bounds`)."""
    out = []
    for h in pick(run):
        c = ceilings.of(run, h.metric, bounds)
        out.append(h if c is None else replace(h, ceiling=c.value, ceiling_source=c.source))
    return out


def _above(run: Run, bounds: Sequence[Bound], shown: Sequence[Headline]) -> list[Row]:
    """The run's other figures above their ceilings (a cache figure above its ports): each a
    row of its own, marked as a headline above its ceiling is."""
    out = []
    for m in run.metrics:
        if any(h.metric is m for h in shown):
            continue
        c = ceilings.of(run, m, bounds)
        if c is None or c.value is None or c.value <= 0 or \
                m.summary.median / c.value <= ABOVE_CEILING:
            continue
        what = ", ".join(f"{m.params[k]}" for k in ("level", "kernel", "stores", "precision")
                         if k in m.params)
        threads = m.params.get("threads")
        label = f"{m.benchmark} {m.name}" + (f", {what}" if what else "") + \
            (f", {threads} cores" if threads else "")
        out.append(judge(Headline(f"{m.benchmark}.{m.name}", label, m, c.value, c.source),
                         None, None))
    return out


def verdict(run: Run, pickers: Sequence[Picker], reference: Reference | None,
            bounds: Sequence[Bound] = ()) -> Verdict:
    """The run's headline figures judged against the reference (none: only their ceilings),
    then any other figure above the ceiling `bounds` give it."""
    noisy = disturbed(run)
    rows = []
    shown = headlines(run, pickers)
    for h in shown:
        e = reference.figures.get(h.key) if reference else None
        few = f"{e.runs} run(s) behind it, {reference.min_runs} needed" \
            if reference and e and e.runs < reference.min_runs else None
        rows.append(judge(h, e, noisy.get(h.metric.benchmark) or few))
    return Verdict(rows + _above(run, bounds, shown), reference)
