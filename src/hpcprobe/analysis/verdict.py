"""The records of a run's verdict: each headline figure its families pick (`Headline`), what a
reference expects of it (`Expected`: a value and a tolerance, in a `Reference`), its mark
(`Row`) and the run's rows (`Verdict`). The rules that mark them are the judge wing's
(`judge/run.py`). Pure data."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hpcprobe.machine.sentinel import NODE_CHANGED
from hpcprobe.machine.steal import BUSY, STEAL
from hpcprobe.results.judgement import Judgement
from hpcprobe.results.model import Metric, Run

#: The tolerance no reference is tighter than where a family states none: run-to-run changes
#: smaller than this are within what a node's figures do from one day to the next
FLOOR = 0.05
#: Findings of the run that leave a benchmark's figures unjudged: another state of the node
#: (the sentinel moved), the hypervisor's steal, other processes on its CPUs -> the reason in a
#: few words
DISTURBED = {NODE_CHANGED.name: "node moved", STEAL.name: STEAL.name,
             BUSY.name: "node busy"}


#: A figure above its ceiling by more than this (the whole CI of its median) is a finding about
#: the ceiling (or the figure)
ABOVE_CEILING = 1.01


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

    @property
    def above_ceiling(self) -> bool:
        """Above its ceiling: even the low end of its median's 95 % CI more than ABOVE_CEILING
        above it. A median above it whose CI reaches back to it is a figure at its ceiling
        within its own noise (a shared host's clock moving between the ceiling's measurement
        and the figure's), not a finding."""
        return self.ceiling is not None and self.ceiling > 0 and \
            self.metric.summary.ci95[0] / self.ceiling > ABOVE_CEILING

    @property
    def near_ceiling(self) -> bool:
        """Its median above ABOVE_CEILING of its ceiling, its CI reaching back to it: whether
        it is above cannot be told (its ceiling judgement: not judged)."""
        return not self.above_ceiling and (self.of_ceiling or 0.0) > ABOVE_CEILING


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
        """The figure against its reference (0.05 = 5 % above the expected value): its
        reference judgement's."""
        return self.judgements()[-1].change

    def judgements(self) -> list[Judgement]:
        """This row as judgement records: against its ceiling where it has one, then against
        its reference (not judged where it is above its ceiling: the reference is not
        asked). A row's records end with its reference's: views pair them so."""
        h, s = self.headline, self.headline.metric.summary
        out = []
        if h.ceiling is not None:
            over = self.mark == "above ceiling"
            mark, said = ("above ceiling", self.why) if over else \
                ("not judged", "its CI reaches back to its ceiling") if h.near_ceiling else \
                ("ok", "")
            out.append(Judgement(h.key, "ceiling", mark, s.median, h.metric.unit, h.ceiling,
                                 ci=s.ci95, why=(said + "; " if said else "")
                                 + (h.ceiling_source or ""), label=h.label, n=s.n))
        over = self.mark == "above ceiling"
        e = self.expected
        out.append(Judgement(h.key, "reference", "not judged" if over else self.mark, s.median,
                             h.metric.unit, None if e is None else e.value,
                             None if e is None else e.tolerance, s.ci95,
                             "above its ceiling" if over else self.why, label=h.label, n=s.n))
        return out


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

    def judgements(self) -> list[Judgement]:
        """Every row's judgement records, in row order."""
        return [j for r in self.rows for j in r.judgements()]

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


def headlines(run: Run, pickers: Sequence[Picker]) -> list[Headline]:
    """Every family's headline figures of a run, in registry order."""
    return [h for pick in pickers for h in pick(run)]
