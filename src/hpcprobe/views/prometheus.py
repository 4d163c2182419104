"""Runs and checks for a monitoring system, through `prometheus_client` (its registry, its
text and OpenMetrics exposition, its atomic textfile writer): each headline figure's median,
its ceiling and its reference's expected value, one metric per kind and unit, named
`hpcprobe_<kind>_<unit>` with the figure's key, host and profile as labels; each figure's
verdict and a check's outcome as state sets (1 for the state it is in, 0 for the others);
when the run or check was made. node_exporter's textfile collector reads the file written
(`*.prom` in its directory)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime

from hpcprobe.analysis.health import EXIT
from hpcprobe.analysis.verdict import MARKS, Verdict
from hpcprobe.common.errors import OptionError
from hpcprobe.results.model import Run

#: A check's outcomes
OUTCOMES = tuple(EXIT)
#: Unit parts as Prometheus's naming spells them (base units, spelled out, snake_case)
_PREFIX = {"k": "kilo", "M": "mega", "G": "giga", "T": "tera", "P": "peta"}
_BASE = {"B": "bytes", "FLOP": "flops", "Hz": "hertz", "s": "seconds", "ns": "nanoseconds",
         "us": "microseconds", "µs": "microseconds", "ms": "milliseconds", "%": "percent",
         "bit": "bits", "b": "bits", "op": "operations", "ops": "operations", "IOPS": "iops",
         "tps": "transactions_per_second", "flop": "flops", "tx": "transactions",
         "messages": "messages", "count": "count", "1": "ratio"}


_DOC = {"figure": "a headline figure, the median of its samples",
        "ceiling": "what the hardware can deliver for a headline figure",
        "expected": "a headline figure's reference value"}


def unit_suffix(unit: str) -> str:
    """A figure's unit as a metric name's suffix: GB/s -> gigabytes_per_second, GFLOP/s ->
    gigaflops_per_second, GHz -> gigahertz, ns -> nanoseconds; an unknown one sanitised."""
    out = []
    for i, part in enumerate(unit.split("/")):
        word = _BASE.get(part)
        if word is None and len(part) > 1 and part[0] in _PREFIX and part[1:] in _BASE:
            word = _PREFIX[part[0]] + _BASE[part[1:]]
        word = word or re.sub(r"[^a-z0-9]+", "_", part.lower()).strip("_") or "ratio"
        out.append(word if i == 0 else f"per_{'second' if word == 'seconds' else word}")
    return "_".join(out)


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
        for r in v.rows:
            h, unit = r.headline, unit_suffix(r.headline.metric.unit)
            labels = {**base, "figure": h.key}
            for kind, value in (("figure", h.metric.summary.median), ("ceiling", h.ceiling),
                                ("expected", r.expected.value if r.expected else None)):
                if value is not None:
                    gauge(f"hpcprobe_{kind}_{unit}", f"{_DOC[kind]} ({h.metric.unit})",
                          labels).labels(**labels).set(value)
            mark = gauge("hpcprobe_figure_verdict", "a headline figure's verdict: 1 for its "
                         "mark, 0 for the others", [*labels, "verdict"])
            for m in MARKS:
                mark.labels(**labels, verdict=m).set(1.0 if r.mark == m else 0.0)
    return reg


def add_check(reg: object, host: str, status: str, reasons: int, when: float,
              seconds: float) -> None:
    """A check's outcome (a state set), its fail reasons' count, when it ran and how long."""
    from prometheus_client import Gauge

    lab = {"host": host}
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
