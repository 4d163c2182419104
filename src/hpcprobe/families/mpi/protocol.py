"""Where the MPI changes protocol: a point-to-point bandwidth that falls from one message size to
the next. Within one protocol, bandwidth grows with the message; it falls where the MPI stops
copying messages through its own buffers (eager) and hands them over by rendezvous, a handshake
and then one copy. The fall is a finding with the setting that places it, read from the MPI
where it reports them (`hpcprobe.mpi.params`)."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from hpcprobe.common.units import format_bytes
from hpcprobe.families.mpi.views import layout, layout_key
from hpcprobe.mpi.params import Threshold
from hpcprobe.results.model import Metric

KIND = "protocol_switch"
#: The streaming curves judged (latency grows at every size; the message rate is per message).
CURVES = ("bandwidth", "bibw")
#: A fall to less than this share of the previous size's figure, with the two 95 % CIs apart.
FALL = 0.8


def falls(metrics: list[Metric]) -> dict[tuple[int, int], list[tuple[Metric, Metric]]]:
    """(smaller size, larger size) -> each curve's figures at the two sizes, where it fell."""
    curves: dict[tuple[Any, ...], list[Metric]] = defaultdict(list)
    for m in metrics:
        if m.benchmark == "mpi" and m.name in CURVES and m.samples:
            curves[(m.name, *layout_key(m.params))].append(m)
    out: dict[tuple[int, int], list[tuple[Metric, Metric]]] = defaultdict(list)
    for curve in curves.values():
        curve.sort(key=lambda m: m.params["size_bytes"])
        for a, b in pairwise(curve):
            sa, sb = a.summary, b.summary
            if sb.median < FALL * sa.median and sb.ci95[1] < sa.ci95[0]:
                out[(a.params["size_bytes"], b.params["size_bytes"])].append((a, b))
    return dict(out)


def _cause(lo: int, hi: int, known: list[Threshold], scopes: set[str], mpi: str) -> str:
    """The settings that put a protocol change between these sizes, where the MPI says."""
    there = [t for t in known if lo < t.size <= hi and t.scope in scopes]
    if not there:
        return ("An MPI's bandwidth falls like this where it changes protocol, at its eager "
                "limit (`hpcprobe mpi info` lists those it reports; UCX: UCX_RNDV_THRESH), or "
                "where its buffers outgrow a cache.")
    said = "; ".join(f"{mpi}'s {t.variable} is {t.size} B: from there a message goes "
                     f"{t.above}" for t in there)
    knobs = " or ".join(dict.fromkeys(k for t in there for k in t.knobs))
    return f"{said}. {knobs} in a sweep configuration's env measures another setting."


def findings(metrics: list[Metric], known: list[Threshold], mpi: str = "the MPI"
             ) -> list[dict[str, Any]]:
    """One finding per step of sizes where some point-to-point bandwidth fell; `known`: the
    MPI's thresholds, `mpi` its name."""
    out = []
    for (lo, hi), pairs in sorted(falls(metrics).items()):
        by_layout: dict[str, list[str]] = defaultdict(list)
        for a, b in pairs:
            ma, mb = a.summary.median, b.summary.median
            by_layout[layout(a.params, where=False)].append(
                f"{a.name} {ma:.0f} -> {mb:.0f} {a.unit} (x{mb / ma:.2f})")
        scopes = {"inter-node" if a.params.get("pair") == "inter-node" else "intra-node"
                  for a, _ in pairs}
        said = "; ".join(f"{', '.join(figs)} on {where}" for where, figs in by_layout.items())
        msg = (f"point-to-point bandwidth falls from {format_bytes(lo)} to {format_bytes(hi)} "
               f"messages: {said}. {_cause(lo, hi, known, scopes, mpi)}")
        out.append({"benchmark": "mpi", "kind": KIND, "sizes": [lo, hi],
                    "layouts": sorted(by_layout), "message": msg})
    return out
