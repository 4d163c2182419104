"""The retest rule: a suspect figure is measured again, once, before a node fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hpcprobe.analysis.verdict import Row, Verdict
from hpcprobe.results import conditions
from hpcprobe.results.model import Run

#: Measures the named families again at the check profile: their run
Measure = Callable[[Sequence[str]], Run]


def suspects(v: Verdict) -> list[Row]:
    """The verdict's figures below their reference, and those it could not judge for a
    disturbance or noise (they have an expected value)."""
    return [r for r in v.rows if r.mark == "below"
            or (r.mark == "not judged" and r.expected is not None)]


def retest(run: Run, v: Verdict, measure: Measure) -> tuple[Run, list[str]]:
    """Measure again, once, the families whose headline was below its reference or could not
    be judged for a disturbance or noise: their figures replace the first ones (the derived
    ones are derived again). The labels re-tested, [] where none was."""
    rows = suspects(v)
    if not rows:
        return run, []
    names = sorted({r.headline.metric.benchmark for r in rows})
    again = measure(names)
    redone = set(names) | {m.benchmark for m in again.metrics}
    merged = replace(run, metrics=[m for m in run.metrics if m.benchmark not in redone]
                     + again.metrics,
                     findings=[f for f in run.findings if f.get("benchmark") not in redone]
                     + again.findings,
                     warnings=run.warnings + again.warnings, errors=run.errors + again.errors)
    merged.provenance = {**run.provenance, "retested": names}
    conditions.update(merged.provenance, sentinel=again.conditions.sentinel)
    return merged, [f"{r.headline.label} ({r.mark}{': ' + r.why if r.why else ''})"
                    for r in rows]
