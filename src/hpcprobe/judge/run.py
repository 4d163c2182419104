"""The run judge: a run's headline figures against the ceilings their sources declare and
against a reference, and any other figure of the run against its ceiling.

The rules, with their assumptions stated as benchstat states its own:
- a figure above its ceiling by more than ABOVE_CEILING (1 %), even at the low end of the
  95 % CI of its median, is marked "above ceiling", whatever its reference: the ceiling or the
  figure is wrong, and no comparison with a reference means anything until one is mended; a
  median above it whose CI reaches back to it is judged against its reference as any figure
  (its ceiling judgement: not judged), as "below" asks the whole CI past its threshold;
- a figure is "below" its reference when even the better end of the 95 % CI of its median is
  worse than the reference's threshold (value x (1 - tolerance) where higher is better): the
  samples are taken as independent draws of the figure (the CI of the median is
  distribution-free) and the reference's tolerance as what a healthy node moves by;
- it is "ok" when its median is within the threshold and its CI no wider than the tolerance
  (a CI wider than the tolerance cannot tell ok from below: "not judged", noisy);
- it is "not judged", with the reason, without a reference value, with fewer than 3 samples,
  with fewer of the reference's runs behind it than the reference needs, or when its
  benchmark ran while the node was disturbed (the sentinel moved, the hypervisor stole time,
  other processes were busy: `analysis.verdict.DISTURBED`).
Pure: reads run documents and a reference only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hpcprobe.analysis.verdict import (
    Expected,
    Headline,
    Picker,
    Reference,
    Row,
    Verdict,
    disturbed,
    headlines,
)
from hpcprobe.results import ceilings
from hpcprobe.results.ceilings import Bound
from hpcprobe.results.model import Run


def judge(h: Headline, expected: Expected | None, noisy: str | None) -> Row:
    """Mark one headline: below when its whole CI is past the reference's threshold; ok when
    its median is within it and its CI no wider than the tolerance; else not judged, with the
    reason in a few words."""
    s = h.metric.summary
    if h.above_ceiling:
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


def bounded(pick: Picker, bounds: Sequence[Bound], run: Run) -> list[Headline]:
    """A family's headlines of a run, each with the ceiling its sources declare (`bounds`)."""
    out = []
    for h in pick(run):
        c = ceilings.of(run, h.metric, bounds)
        out.append(h if c is None else replace(h, ceiling=c.value, ceiling_source=c.source))
    return out


def _above(run: Run, bounds: Sequence[Bound], shown: Sequence[Headline]) -> list[Headline]:
    """The run's other figures above their ceilings (a cache figure above its ports), each a
    headline of its own, labelled with what tells it apart."""
    out = []
    keyed: dict[tuple[str, str], list[Bound]] = {}  # a fleet's run: 180 figures, a few bounded
    for b in bounds:
        keyed.setdefault((b.benchmark, b.name), []).append(b)
    headlines = {id(h.metric) for h in shown}
    for m in run.metrics:
        mine = keyed.get((m.benchmark, m.name))
        if not mine or id(m) in headlines:
            continue
        c = ceilings.of(run, m, mine)
        h = None if c is None else Headline(f"{m.benchmark}.{m.name}", "", m, c.value, c.source)
        if h is None or not h.above_ceiling:
            continue
        what = ", ".join(f"{m.params[k]}" for k in ("level", "kernel", "stores", "precision")
                         if k in m.params)
        threads = m.params.get("threads")
        label = f"{m.benchmark} {m.name}" + (f", {what}" if what else "") + \
            (f", {threads} cores" if threads else "")
        out.append(replace(h, label=label))
    return out


@dataclass(frozen=True)
class Bounded:
    """What judging a run needs of its metrics: its headlines with their ceilings (`shown`) and
    its other figures above their ceilings (`above`). Made once a run (`bounded_all`), it can be
    kept beside it (judge/kept.py): a fleet's report then reads no node run whole."""

    shown: list[Headline]
    above: list[Headline]


def bounded_all(run: Run, pickers: Sequence[Picker], bounds: Sequence[Bound]) -> Bounded:
    """The run's headlines (`pickers`, which bound them) and its other figures above the
    ceilings `bounds` give them."""
    shown = headlines(run, pickers)
    return Bounded(shown, _above(run, bounds, shown))


def judged(run: Run, b: Bounded, reference: Reference | None) -> Verdict:
    """The run's verdict from what `bounded_all` made of it: its headlines judged against the
    reference (none: only their ceilings), then its other figures above their ceilings."""
    noisy = disturbed(run)
    rows = []
    for h in b.shown:
        e = reference.figures.get(h.key) if reference else None
        few = f"{e.runs} run(s), {reference.min_runs} needed" \
            if reference and e and e.runs < reference.min_runs else None
        rows.append(judge(h, e, noisy.get(h.metric.benchmark) or few))
    return Verdict(rows + [judge(h, None, None) for h in b.above], reference)


def verdict(run: Run, pickers: Sequence[Picker], reference: Reference | None,
            bounds: Sequence[Bound] = ()) -> Verdict:
    """The run's headline figures judged against the reference (none: only their ceilings),
    then any other figure above the ceiling `bounds` give it."""
    return judged(run, bounded_all(run, pickers, bounds), reference)
