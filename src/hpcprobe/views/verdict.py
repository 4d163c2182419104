"""The verdict as view blocks (the terminal and the HTML report show the same): one line that
says it, the headline figures with their CI, share of ceiling, change against the reference
and mark, and where the reference came from; and a run's warnings folded one line per kind.
The figures are read from the verdict's judgement records (results/judgement.py), as `check`,
its JSON and Prometheus read them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcprobe.analysis.verdict import Verdict
from hpcprobe.results import findings
from hpcprobe.results.judgement import FIGURE_MARKS, Judgement
from hpcprobe.viewkit.table import Block, Lines, Table

#: The widest line the verdict and the folded warnings take
WIDTH = 100


def number(x: float) -> str:
    """A figure in four significant digits, without an exponent below a million."""
    return f"{x:.0f}" if abs(x) >= 1e4 and abs(x) < 1e6 else f"{x:.4g}"


@dataclass(frozen=True)
class _Figure:
    """One figure of the verdict: its judgement against its reference, and against its
    ceiling where it has one."""

    reference: Judgement
    ceiling: Judgement | None

    @property
    def mark(self) -> str:
        c = self.ceiling
        return "above ceiling" if c is not None and c.mark == "above ceiling" else \
            self.reference.mark


def _figures(v: Verdict) -> list[_Figure]:
    """The verdict's figures in order, from its records (a figure's ceiling's, then its
    reference's)."""
    out, ceiling = [], None
    for j in v.judgements():
        if j.basis == "ceiling":
            ceiling = j
        else:
            out.append(_Figure(j, ceiling))
            ceiling = None
    return out


def _mark(f: _Figure) -> str:
    """ok, BELOW, ABOVE CEILING, or why it is not judged (the reason alone: noisy, node
    moved, steal, n=1; nothing without a reference)."""
    if f.mark == "not judged":
        return "-" if f.reference.why == "no reference" else f.reference.why
    return {"below": "BELOW", "above ceiling": "ABOVE CEILING"}.get(f.mark, f.mark)


def _summary(v: Verdict, figures: list[_Figure]) -> str:
    counts = [f"{n} {m}" for m in FIGURE_MARKS if (n := sum(f.mark == m for f in figures))]
    named = "; ".join(f"{f.reference.named} {100 * (f.reference.change or 0):+.1f} %"
                      for f in figures if f.mark == "below")
    head = "Verdict: " + (f"BELOW the reference: {named}" if named else
                          "nothing below the reference" if v.reference and v.reference.figures
                          else "no reference to judge against")
    return f"{head} ({', '.join(counts)})"


def blocks(v: Verdict) -> list[Block]:
    """The verdict box: what it says, the table of headline figures, where the reference came
    from and what to do without one."""
    if not v.rows:  # the run's tables follow
        return []
    ref = v.reference is not None and bool(v.reference.figures)
    figures = _figures(v)
    t = Table(title=_summary(v, figures), narrow=True)
    for col, just in (("figure", "left"), ("value", "right"), ("±CI", "right"),
                      ("of ceiling", "right"), *((("vs ref", "right"),) if ref else ()),
                      ("mark", "left")):
        t.add_column(col, just)
    for f in figures:
        j, c = f.reference, f.ceiling
        assert j.value is not None
        share = None if c is None or c.change is None else 1 + c.change
        cells = [j.named, f"{number(j.value)} {j.unit}", _ci(j),
                 "-" if share is None else f"{100 * share:.0f}%"]
        if ref:
            cells.append("-" if j.change is None else f"{100 * j.change:+.1f}%")
        t.add_row(*cells, _mark(f))
    return [t, Lines(_sources(v))]


def _ci(j: Judgement) -> str:
    """The CI's half-width as a share of the value ("n=1" for one sample)."""
    if (j.n is not None and j.n < 2) or j.ci is None or j.value is None:
        return "n=1"
    return "inf%" if j.value == 0 else f"{100 * (j.ci[1] - j.ci[0]) / 2 / abs(j.value):.1f}%"


def fleet(nodes: Mapping[str, Verdict], details: bool = False) -> list[Block]:
    """Each node's verdict in one box: how many nodes were judged and how, the nodes below
    their reference named with their figures; with `details`, every node's own box."""
    judged = {h: v for h, v in nodes.items() if v.rows}
    if not judged:
        return []
    below = {h: v for h, v in judged.items() if v.failed}
    unjudged = [h for h, v in judged.items() if not v.failed and v.marked("not judged")
                and v.reference is not None and v.reference.figures]
    bare = [h for h, v in judged.items() if v.reference is None or not v.reference.figures]
    if len(bare) == len(judged):
        return [Lines([f"Nodes: none of the {len(judged)} has a reference (no earlier run of "
                       "its own in the store; --against REF.toml judges them by a file)."])]
    sources = dict.fromkeys(v.reference.name for v in judged.values() if v.reference)
    t = Table(title=f"Nodes against {' / '.join(sources)}: {len(below)} of {len(judged)} below"
              + (f", {len(unjudged)} with figures not judged" if unjudged else "")
              + (f", {len(bare)} without a reference" if bare else ""), narrow=True)
    t.add_column("node", "left")
    t.add_column("below its reference", "left")
    for host, v in sorted(below.items()):
        t.add_row(host, "; ".join(f"{f.reference.named} {100 * (f.reference.change or 0):+.1f}%"
                                  for f in _figures(v) if f.mark == "below"))
    out: list[Block] = [t if t.rows else Lines([t.title or ""])]
    if details:
        for host, v in sorted(judged.items()):
            box = blocks(v)
            if box and isinstance(box[0], Table):
                box[0].title = f"{host}: {box[0].title}"
            out += box
    return out


def _sources(v: Verdict) -> list[str]:
    out = [f"History: {line}" for line in v.history]
    if v.reference is not None:
        out.append(f"Against {v.reference.source}; not judged where the CI is wider than the "
                   "tolerance, the node moved (its sentinel), other processes or the "
                   "hypervisor took its CPUs, or fewer runs stand behind a figure than judge "
                   "it.")
    elif v.kept:
        out.append("No reference yet: the next runs here are judged against this one and the "
                   "runs before it, from three on; "
                   "`hpcprobe reference make RUNS -o ref.toml` writes one to judge others by.")
    else:
        out.append("No reference yet, and this run is not stored: no later run is judged "
                   "against it.")
    unknown = dict.fromkeys(r.headline.ceiling_source for r in v.rows
                            if r.headline.ceiling is None and r.headline.ceiling_source)
    for why in unknown:
        out.append(f"No ceiling: {why}.")
    return out


def fold(warnings: Sequence[str], width: int = WIDTH) -> list[str]:
    """A run's warnings one line per kind (the same words but for their figures), with how
    many and where, cut to `width` with their "warning: " label."""
    width -= len("warning: ")
    groups: dict[str, list[tuple[str, str]]] = {}
    for w in warnings:
        where, sep, what = w.partition(": ")
        if not sep:
            where, what = "", w
        key = " ".join(re.sub(r"[-+]?\d[\d.,]*", "#", what).split()[:5])
        groups.setdefault(key, []).append((where, what))
    out = []
    for items in groups.values():
        wheres = list(dict.fromkeys((w if len(items) == 1 else w.split(" ")[0])
                                    for w, _ in items if w))
        line = (f"{len(items)}x " if len(items) > 1 else "") + \
            (f"{', '.join(wheres)}: " if wheres else "") + items[0][1]
        out.append(_cut(line, width))
    return out


def _cut(line: str, width: int) -> str:
    """`line` cut to `width` with "...", keeping the finding's code and action it ends in."""
    if len(line) <= width:
        return line
    tag = m.group(0) if (m := findings.TAG.search(line)) else ""
    return line[:width - 3 - len(tag)] + "..." + tag
