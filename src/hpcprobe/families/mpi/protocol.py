"""Where the MPI changes protocol: a point-to-point bandwidth that falls from one message size to
the next. Within one protocol, bandwidth grows with the message; it falls where the MPI stops
copying messages through its own buffers (eager) and hands them over by rendezvous, a handshake
and then one copy. The fall is a finding with the setting that places it, read from the MPI
where it reports them (`hpcprobe.mpi.params`). A collective's time per byte, flat or falling
with the message in one algorithm, rises where the MPI switches algorithm (or the protocol of
the messages underneath): that is a finding too, with the variables that choose the algorithm."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from hpcprobe.common.units import format_bytes
from hpcprobe.families.mpi.views import layout, layout_key
from hpcprobe.mpi.params import Threshold
from hpcprobe.results.findings import Finding, kind
from hpcprobe.results.model import Metric

KIND = kind("protocol_switch", "point-to-point bandwidth falls from one message size to the "
            "next, where the MPI changes protocol", code="HP209", action="none")
#: The streaming curves judged (latency grows at every size; the message rate is per message).
CURVES = ("bandwidth", "bibw")
#: A fall to less than this share of the previous size's figure, with the two 95 % CIs apart.
FALL = 0.8
#: The collectives judged by their time per byte (a barrier carries no message).
SIZED = ("allreduce", "bcast", "alltoall")
COLLECTIVE_KIND = kind("collective_switch", "a collective's time per byte rises from one size "
                       "to the next, where the MPI changes its algorithm",
                           code="HP210", action="none")


def _steps(metrics: list[Metric], names: tuple[str, ...]) -> list[tuple[Metric, Metric]]:
    """Each curve of these tests (one per rank layout), as its pairs of consecutive sizes."""
    curves: dict[tuple[Any, ...], list[Metric]] = defaultdict(list)
    for m in metrics:
        if m.benchmark == "mpi" and m.name in names and m.samples:
            curves[(m.name, *layout_key(m.params))].append(m)
    return [pair for curve in curves.values()
            for pair in pairwise(sorted(curve, key=lambda m: m.params["size_bytes"]))]


def falls(metrics: list[Metric]) -> dict[tuple[int, int], list[tuple[Metric, Metric]]]:
    """(smaller size, larger size) -> each curve's figures at the two sizes, where it fell."""
    out: dict[tuple[int, int], list[tuple[Metric, Metric]]] = defaultdict(list)
    for a, b in _steps(metrics, CURVES):
        sa, sb = a.summary, b.summary
        if sb.median < FALL * sa.median and sb.ci95[1] < sa.ci95[0]:
            out[(a.params["size_bytes"], b.params["size_bytes"])].append((a, b))
    return dict(out)


def jumps(metrics: list[Metric]) -> dict[tuple[int, int], list[tuple[Metric, Metric]]]:
    """(smaller size, larger size) -> each collective's figures at the two sizes, where its
    time per byte rose by more than 1/FALL: a rate (bytes over time) that fell as a
    point-to-point bandwidth falls."""
    out: dict[tuple[int, int], list[tuple[Metric, Metric]]] = defaultdict(list)
    for a, b in _steps(metrics, SIZED):
        na, nb = a.params["size_bytes"], b.params["size_bytes"]
        sa, sb = a.summary, b.summary
        if na > 0 and sb.median / nb > sa.median / na / FALL and sb.ci95[0] / nb > sa.ci95[1] / na:
            out[(na, nb)].append((a, b))
    return dict(out)


#: What a point-to-point fall no reported threshold explains may be.
UNEXPLAINED = ("An MPI's bandwidth falls like this where it changes protocol, at its eager "
               "limit (`hpcprobe mpi info` lists those it reports; UCX: UCX_RNDV_THRESH), or "
               "where its buffers outgrow a cache.")


def _cause(lo: int, hi: int, known: list[Threshold], scopes: set[str], mpi: str,
           otherwise: str = UNEXPLAINED) -> str:
    """The settings that put a protocol change between these sizes, where the MPI says;
    `otherwise` where none lies there."""
    there = [t for t in known if lo < t.size <= hi and t.scope in scopes]
    if not there:
        return otherwise
    said = "; ".join(f"{mpi}'s {t.variable} is {t.size} B: from there a message goes "
                     f"{t.above}" for t in there)
    knobs = " or ".join(dict.fromkeys(k for t in there for k in t.knobs))
    return f"{said}. {knobs} in a sweep configuration's env measures another setting."


def _scopes(pairs: list[tuple[Metric, Metric]]) -> set[str]:
    return {"inter-node" if a.params.get("pair") == "inter-node"
            or "," in (a.params.get("hosts") or "") else "intra-node" for a, _ in pairs}


def _said(pairs: list[tuple[Metric, Metric]], digits: int) -> tuple[str, list[str]]:
    """The figures that moved ("bandwidth 18000 -> 2800 MB/s (x0.16)", medians to `digits`
    decimals), grouped by rank layout; the layouts."""
    by_layout: dict[str, list[str]] = defaultdict(list)
    for a, b in pairs:
        ma, mb = a.summary.median, b.summary.median
        by_layout[layout(a.params, where=False)].append(
            f"{a.name} {ma:.{digits}f} -> {mb:.{digits}f} {a.unit} (x{mb / ma:.2f})")
    return "; ".join(f"{', '.join(figs)} on {where}" for where, figs in by_layout.items()), \
        sorted(by_layout)


def _algorithm(names: list[str], mpi: str) -> str:
    """How to choose a collective's algorithm in this MPI (both families' where unknown)."""
    ompi = ("OMPI_MCA_coll_tuned_use_dynamic_rules=1 with "
            + " or ".join(f"OMPI_MCA_coll_tuned_{c}_algorithm=N" for c in names)
            + " (Open MPI's coll/tuned)")
    mpich = " or ".join(f"MPIR_CVAR_{c.upper()}_INTRA_ALGORITHM" for c in names) + " (MPICH)"
    return ompi if mpi == "Open MPI" else mpich if mpi == "MPICH" else f"{ompi}, {mpich}"


def findings(metrics: list[Metric], known: list[Threshold], mpi: str = "the MPI"
             ) -> list[Finding]:
    """One finding per step of sizes where some point-to-point bandwidth fell, and one per
    step where some collective's time per byte rose; `known`: the MPI's thresholds, `mpi` its
    name."""
    out = []
    for (lo, hi), pairs in sorted(falls(metrics).items()):
        said, layouts = _said(pairs, 0)
        msg = (f"point-to-point bandwidth falls from {format_bytes(lo)} to {format_bytes(hi)} "
               f"messages: {said}. {_cause(lo, hi, known, _scopes(pairs), mpi)}")
        out.append(Finding("mpi", KIND, msg, {"sizes": [lo, hi], "layouts": layouts}))
    for (lo, hi), pairs in sorted(jumps(metrics).items()):
        said, layouts = _said(pairs, 2)
        names = sorted({a.name for a, _ in pairs})
        under = _cause(lo, hi, known, _scopes(pairs), mpi,
                       "Or the protocol of its messages changes there (their eager limit; "
                       "`hpcprobe mpi info` lists those the MPI reports).")
        msg = (f"collective time per byte rises by more than x{1 / FALL:.2f} from "
               f"{format_bytes(lo)} to {format_bytes(hi)} messages (x{hi / lo:.0f} the bytes): "
               f"{said}. A collective slows like this where the MPI changes the algorithm it "
               f"runs for the size; {_algorithm(names, mpi)} in a sweep configuration's env "
               f"measures another. {under}")
        out.append(Finding("mpi", COLLECTIVE_KIND, msg, {"sizes": [lo, hi], "collectives": names,
                                                         "layouts": layouts}))
    return out
