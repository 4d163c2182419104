"""The one judgement record: what was judged (a figure, a node's state), on which basis, against
what, and its mark. Every judge gives its answer as these records as well as in its own words:
the run's verdict (ceilings and a reference, `analysis/verdict.py` by the rules of
`judge/run.py`), the peers judge (a node, link or GPU against its peers, `judge/peers.py`),
a history's change points (`history/changes.py`) and the health tier's rules (`check`); the
JSON documents of `check` and `cluster report` list them under `judgements`, one shape for
every basis, so that a tool reads every kind of judgement the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: What a figure or state is judged against, each by its own judge and rule:
#: ceiling: what the hardware allows (a figure above it: the ceiling or the figure is wrong);
#: reference: a reference file's or the host's previous runs' value and tolerance;
#: peers: the median of the nodes (links, GPUs) of the same hardware, by robust z-scores;
#: history: the figure's own earlier runs, by change points;
#: health rule: a rule of the health tier (a state that differs, a counter that rose).
BASES = ("ceiling", "reference", "peers", "history", "health rule")

#: The marks of a figure, worst first as a verdict counts them
FIGURE_MARKS = ("below", "ok", "not judged", "above ceiling")
#: Every mark: a figure's, and a broken health rule's
MARKS = (*FIGURE_MARKS, "failed")


@dataclass(frozen=True)
class Judgement:
    """One judgement. `expected` is what the basis gives (the ceiling, the reference's value,
    the peers' median, the level before a change), `tolerance` how far from it (relative) is
    still fine where the rule has one, `ci` the 95 % CI of the value's median, `why` the
    judge's words, `subject` whose figure (a node, a link, a GPU; empty for the run's own)."""

    figure: str
    basis: str
    mark: str
    value: float | None = None
    unit: str = ""
    expected: float | None = None
    tolerance: float | None = None
    ci: tuple[float, float] | None = None
    why: str = ""
    subject: str = ""
    #: how a person names the figure (a headline's label: "memory DRAM triad"), else `figure`
    label: str = ""
    #: the samples behind the value (None: not a sampled figure)
    n: int | None = None

    def __post_init__(self) -> None:
        if self.basis not in BASES or self.mark not in MARKS:
            raise ValueError(f"a judgement's basis {self.basis!r} or mark {self.mark!r} is "
                             "not one of BASES and MARKS")

    def to_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "basis": self.basis, "mark": self.mark,
                "value": self.value, "unit": self.unit, "expected": self.expected,
                "tolerance": self.tolerance,
                "ci": None if self.ci is None else [self.ci[0], self.ci[1]], "why": self.why,
                "subject": self.subject, "label": self.label or self.figure, "n": self.n}

    @property
    def named(self) -> str:
        """How the figure is named to a person."""
        return self.label or self.figure

    @property
    def change(self) -> float | None:
        """The value against what its basis expects (0.05: 5 % above), None without both."""
        if self.value is None or not self.expected:
            return None
        return self.value / self.expected - 1.0
