"""Runs and checks for a monitoring system, through `prometheus_client` (its registry, its
text and OpenMetrics exposition, its atomic textfile writer): each headline figure's median,
its ceiling and its reference's expected value in Prometheus's base units (bytes, seconds,
ratios 0-1), one metric per kind and unit, named `hpcprobe_<kind>_<unit>` with the figure's
key, host and profile as labels, read from the verdict's judgement records; each figure's
verdict and a check's outcome as state sets (1 for the state it is in, 0 for the others); when
the run or check was made. node_exporter's textfile collector reads the file written (`*.prom`
in its directory)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime

from hpcprobe.analysis.health import EXIT
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.common.errors import OptionError
from hpcprobe.results.findings import Kind
from hpcprobe.results.judgement import FIGURE_MARKS, Judgement
from hpcprobe.results.model import Run

#: A check's outcomes
OUTCOMES = tuple(EXIT)
#: Unit parts in Prometheus's base units (its naming guide: seconds, bytes, ratios 0-1), as
#: the word a metric name spells and the factor a value in that part is multiplied by
_BASE: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1.0), "bit": ("bytes", 0.125), "b": ("bytes", 0.125),
    "s": ("seconds", 1.0), "ms": ("seconds", 1e-3), "us": ("seconds", 1e-6),
    "µs": ("seconds", 1e-6), "ns": ("seconds", 1e-9), "%": ("ratio", 0.01), "1": ("ratio", 1.0),
    "FLOP": ("flops", 1.0), "flop": ("flops", 1.0), "Hz": ("hertz", 1.0),
    "op": ("operations", 1.0), "ops": ("operations", 1.0),
    "IOPS": ("operations_per_second", 1.0), "tx": ("transactions", 1.0),
    "tps": ("transactions_per_second", 1.0), "messages": ("messages", 1.0),
    "count": ("count", 1.0), "W": ("watts", 1.0), "J": ("joules", 1.0)}
#: A base unit after "per", in the singular
_ONE = {"seconds": "second", "bytes": "byte", "watts": "watt", "joules": "joule"}
#: SI and binary prefixes
_PREFIX = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 2.0 ** 10,
           "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40}


def _part(part: str) -> tuple[str, float]:
    """One side of a unit in base units: (its word, the factor to it)."""
    if part in _BASE:
        return _BASE[part]
    for prefix, factor in sorted(_PREFIX.items(), key=lambda kv: -len(kv[0])):
        if part.startswith(prefix) and part[len(prefix):] in _BASE:
            word, more = _BASE[part[len(prefix):]]
            return word, factor * more
    return re.sub(r"[^a-z0-9]+", "_", part.lower()).strip("_") or "ratio", 1.0


def base_unit(unit: str) -> tuple[str, float]:
    """A figure's unit in Prometheus's base units: the metric name's suffix and the factor its
    values are multiplied by (GB/s -> bytes_per_second x 1e9, us -> seconds x 1e-6, % ->
    ratio x 0.01, GFLOP/s -> flops_per_second x 1e9); an unknown unit sanitised, factor 1."""
    top, *under = unit.split("/")
    word, factor = _part(top)
    for part in under:
        below, f = _part(part)
        word, factor = f"{word}_per_{_ONE.get(below, below)}", factor / f
    return word, factor


_DOC = {"figure": "a headline figure, the median of its samples",
        "ceiling": "what the hardware can deliver for a headline figure",
        "expected": "a headline figure's reference value"}


def registry(entries: Sequence[tuple[Run, Verdict]]) -> object:
    """A prometheus_client registry of these runs' headline figures and verdicts."""
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    gauges: dict[str, Gauge] = {}

    def gauge(name: str, doc: str, labels: Iterable[str]) -> Gauge:
        if name not in gauges:
            gauges[name] = Gauge(name, doc, list(labels), registry=reg)
        return gauges[name]

    for run, v in entries:
        base = {"host": run.host, "profile": run.profile}
        gauge("hpcprobe_run_timestamp_seconds", "when the run was made (Unix time)",
              base).labels(**base).set(datetime.fromisoformat(run.created).timestamp())
        for figure, judged in _by_figure(v.judgements()).items():
            first = next(iter(judged.values()))
            unit, factor = base_unit(first.unit)
            labels = {**base, "figure": figure}
            ceiling, ref = judged.get("ceiling"), judged.get("reference")
            for kind, value in (("figure", first.value),
                                ("ceiling", ceiling.expected if ceiling else None),
                                ("expected", ref.expected if ref else None)):
                if value is not None:
                    # one metric for every unit of its base unit (GB/s and MB/s figures alike)
                    gauge(f"hpcprobe_{kind}_{unit}", f"{_DOC[kind]}, in base units",
                          labels).labels(**labels).set(value * factor)
            said = ceiling.mark if ceiling and ceiling.mark == "above ceiling" else \
                ref.mark if ref else "not judged"
            mark = gauge("hpcprobe_figure_verdict", "a headline figure's verdict: 1 for its "
                         "mark, 0 for the others", [*labels, "verdict"])
            for m in FIGURE_MARKS:
                mark.labels(**labels, verdict=m).set(1.0 if said == m else 0.0)
    return reg


def _by_figure(judged: Iterable[Judgement]) -> dict[str, dict[str, Judgement]]:
    """A verdict's judgement records by figure, then by basis (a ceiling's and a
    reference's)."""
    out: dict[str, dict[str, Judgement]] = {}
    for j in judged:
        out.setdefault(j.figure, {})[j.basis] = j
    return out


def add_check(reg: object, host: str, status: str, kinds: Sequence[Kind], when: float,
              seconds: float) -> None:
    """A check's outcome (a state set), its fail reasons' count and their count per code (with
    its kind and action), when it ran and how long."""
    from prometheus_client import Gauge

    lab = {"host": host}
    per = Gauge("hpcprobe_check_fault", "a failed check's reasons of one code (its kind and "
                "the action it asks for)", ["host", "code", "kind", "action"],
                registry=reg)  # type: ignore[arg-type]
    for k in dict.fromkeys(kinds):
        per.labels(**lab, code=k.code, kind=k.name, action=k.action).set(kinds.count(k))
    reasons = len(kinds)
    g = Gauge("hpcprobe_check_outcome", "the health check's outcome: 1 for it, 0 for the "
              "others", ["host", "outcome"], registry=reg)  # type: ignore[arg-type]
    for o in OUTCOMES:
        g.labels(**lab, outcome=o).set(1.0 if o == status else 0.0)
    for name, doc, value in (
            ("hpcprobe_check_reasons", "the reasons the check failed (0 when it did not)",
             reasons),
            ("hpcprobe_check_timestamp_seconds", "when the check ended (Unix time)", when),
            ("hpcprobe_check_duration_seconds", "how long the check took", seconds)):
        Gauge(name, doc, ["host"], registry=reg).labels(**lab).set(  # type: ignore[arg-type]
            value)


def write(path: str, reg: object) -> None:
    """The registry in node_exporter's textfile format, written atomically (a temporary file
    renamed over the old one: the collector never reads half a file)."""
    from prometheus_client import generate_latest, write_to_textfile


    if path == "-":
        sys.stdout.write(generate_latest(reg).decode())  # type: ignore[arg-type]
        return
    try:
        write_to_textfile(path, reg)  # type: ignore[arg-type]
    except OSError as exc:
        raise OptionError(f"<prometheus> {path}: cannot write it ({exc.strerror})") from None


def openmetrics(reg: object) -> bytes:
    """The registry in the OpenMetrics text format (ending in `# EOF`)."""
    from prometheus_client.openmetrics.exposition import generate_latest

    return bytes(generate_latest(reg))  # type: ignore[no-untyped-call]
