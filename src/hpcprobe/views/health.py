"""A check's answer as lines for the terminal: the outcome and its reasons first, then each
figure against its reference, what the state was compared with, what was measured again;
with details the state value by value and the warnings."""

from __future__ import annotations

from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.results.model import Run

_HEAD = {health.PASS: "PASS", health.FAIL: "FAIL", health.UNJUDGED: "CANNOT JUDGE"}


def _figures(v: Verdict) -> list[str]:
    out = []
    for r in v.rows:
        m, e = r.headline.metric, r.expected
        ref = f"{e.value:.4g} ±{100 * e.tolerance:.0f}%" if e is not None else "-"
        change = f"{100 * r.change:+.1f}%" if r.change is not None else ""
        mark = r.mark + (f" ({r.why})" if r.why else "")
        out.append(f"  {r.headline.label[:30]:<30} {m.summary.median:>9.4g} {m.unit:<8} "
                   f"{ref:>13} {change:>7}  {mark}"[:100])
    return out


def lines(run: Run, v: Verdict, out: health.Outcome, node: str, seconds: float,
          details: bool = False) -> list[str]:
    """The check's screen: its outcome in the first line."""
    ref = v.reference
    against = ref.source if ref is not None else "no reference"
    said = [f"{_HEAD[out.status]}  {node}: hpcprobe check in {seconds:.1f} s, against "
            f"{against}"]
    said += [f"  - {r}" for r in out.reasons]
    if out.status == health.UNJUDGED:
        said += [f"  - cannot judge: {u}" for u in out.unjudged]
    if v.rows:
        said.append(f"  {'figure':<30} {'value':>9} {'unit':<8} {'reference':>13} "
                    f"{'change':>7}  mark")
        said += _figures(v)
    if out.retested:
        said.append(f"Measured again once before judging: {'; '.join(out.retested)}")
    now = health.state_of(run)
    kept = health.CHECK.of(run.provenance)
    counts = kept.counters if kept else {}
    said.append(f"State: {len(ref.state) if ref is not None else 0} value(s) compared with the "
                "reference's; "
                f"{len(counts)} error counter(s) watched; temporary space and the GPUs' "
                "health read")
    if details:
        for k, val in now.items():
            mark = "" if ref is None or k not in ref.state else \
                ("  (as the reference)" if not health.differences({k: val}, {k: ref.state[k]})
                 else f"  (reference: {ref.state[k]})")
            said.append(f"  {k}: {val}{mark}")
        said += [f"warning: {w}" for w in run.warnings]
    return said
