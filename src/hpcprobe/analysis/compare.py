"""Compare runs: metrics joined on (benchmark, name, params), each against the first run with
the ratio of medians, its 95 % CI and a Mann-Whitney U p-value; rows by effect size. Pure: the
runs come in, a table goes out."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hpcprobe.analysis import fingerprint
from hpcprobe.common import stats
from hpcprobe.common.errors import UserError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import sentinel, steal
from hpcprobe.results.model import Metric, Run

ALPHA = 0.05
FEW = 5


@dataclass(frozen=True)
class Row:
    """One metric of one run against the same metric of the baseline run."""

    benchmark: str
    name: str
    unit: str
    better: str
    params: str
    run: str
    baseline_median: float
    median: float
    ratio: float
    ratio_ci_low: float
    ratio_ci_high: float
    p_value: float
    significant: bool
    n_baseline: int
    n: int

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)

    @property
    def effect(self) -> float:
        return abs(math.log(self.ratio)) if self.ratio > 0 else math.inf

    @property
    def few_samples(self) -> bool:
        return min(self.n, self.n_baseline) < FEW

    @property
    def verdict(self) -> str:
        """`~` where not significant at ALPHA, else better or worse for this metric."""
        if not self.significant:
            return "~"
        return "better" if (self.ratio > 1) == (self.better == "higher") else "worse"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change_pct": self.change_pct, "verdict": self.verdict,
                "few_samples": self.few_samples}


@dataclass(frozen=True)
class Comparison:
    runs: list[str]  # labels, the baseline first
    differences: list[tuple[str, list[str]]]  # fingerprint labels whose values differ
    rows: list[Row]
    only_in: dict[str, int]  # metrics of each run without a partner in the baseline
    #: runs stopped by Ctrl-C or SIGTERM -> the benchmark they stopped in (their later figures
    #: are missing, not lost by the join)
    interrupted: dict[str, str] = field(default_factory=dict)
    #: runs during which the hypervisor took CPU time enough for a warning -> benchmark -> the
    #: share (%): their figures there carry the host's load
    steal: dict[str, dict[str, float]] = field(default_factory=dict)
    #: runs during which the node sentinel moved -> benchmark -> after/before of its readings
    changed: dict[str, dict[str, float]] = field(default_factory=dict)
    #: later runs whose first sentinel reading differs from the baseline's -> (the baseline's
    #: median, theirs), GB/s: the node streamed differently before anything was measured
    started: dict[str, tuple[float, float]] = field(default_factory=dict)


def label(run: Run) -> str:
    return f"{run.run_id}" + (f" ({run.tag})" if run.tag else f" ({run.host})")


@dataclass(frozen=True)
class NotJoined:
    """Per benchmark, the params that say where or how its figures were taken, not what they
    are (each family's not_joined): a join ignores them for that benchmark's metrics only, so
    one family's param names never change another's joins; `every` for all benchmarks."""

    by_benchmark: Mapping[str, frozenset[str]] = field(default_factory=dict)
    every: frozenset[str] = frozenset()
    #: "benchmark.name" of the metrics derived from others (a share of a model, a ridge
    #: point): joined and shown as the others, never a node's verdict alone
    derived: frozenset[str] = frozenset()

    def of(self, benchmark: str) -> frozenset[str]:
        return self.by_benchmark.get(benchmark, frozenset()) | self.every

    def __or__(self, more: frozenset[str]) -> NotJoined:
        return NotJoined(self.by_benchmark, self.every | more, self.derived)


def joined_params(params: dict[str, Any], ignore: frozenset[str]) -> str:
    """The params a join compares (without those in `ignore`), as canonical JSON."""
    return json.dumps({k: v for k, v in params.items() if k not in ignore}, sort_keys=True)


def _key(m: Metric, ignore: NotJoined) -> tuple[str, str, str]:
    return m.benchmark, m.name, joined_params(m.params, ignore.of(m.benchmark))


def describe_params(params_json: str) -> str:
    """A compact label of the joined params: sizes in binary units, booleans only when set."""
    out = []
    for k, v in json.loads(params_json).items():
        if isinstance(v, bool):
            if v:
                out.append(k)
        elif k.endswith("_bytes") and isinstance(v, int):
            out.append(f"{k[:-6]}={format_bytes(v)}")
        else:
            out.append(f"{k}={v}")
    return " ".join(out)


def compare(runs: list[Run], ignore: NotJoined) -> Comparison:
    """Every later run against the first, metrics joined on (benchmark, name, params) without
    the params in `ignore`: those that record where or how a figure was taken rather than what
    it is (another binding, MPI or model; each family declares its own). Refuses runs that
    share no metric with the first."""
    if len(runs) < 2:
        raise UserError("compare needs at least two runs")
    base = {_key(m, ignore): m for m in runs[0].metrics}
    rows: list[Row] = []
    only: dict[str, int] = {}
    for run in runs[1:]:
        theirs = {_key(m, ignore): m for m in run.metrics}
        common = [k for k in theirs if k in base]
        if not common:
            raise UserError(f"runs {label(runs[0])} and {label(run)} have no metric in common "
                            f"(benchmarks {', '.join(runs[0].benchmarks)} vs "
                            f"{', '.join(run.benchmarks)}); compare runs of the same benchmarks")
        only[label(run)] = len(theirs) - len(common)
        for k in common:
            a, b = base[k], theirs[k]
            ma, mb = a.summary.median, b.summary.median
            if ma == 0:
                continue  # no ratio to a zero figure
            lo, hi = stats.median_ratio_ci(a.samples, b.samples)
            p = stats.mann_whitney_p(a.samples, b.samples)
            rows.append(Row(a.benchmark, a.name, a.unit, a.better, describe_params(k[2]),
                            label(run), ma, mb, mb / ma, lo, hi, p, p < ALPHA, len(a.samples),
                            len(b.samples)))
    rows.sort(key=lambda r: (-r.effect, r.benchmark, r.name, r.params))
    cut = {label(r): stop.benchmark for r in runs
           if (stop := r.conditions.interrupted) is not None}
    stolen = {label(r): hot for r in runs if (hot := {
        b: pct for b, pct in r.conditions.steal.items() if steal.warns(pct)})}
    changed = {label(r): moves for r in runs if (moves := sentinel.changes(r.findings))}
    return Comparison([label(r) for r in runs], fingerprint.differences(runs), rows, only, cut,
                      stolen, changed, _started(runs))


def _first_reading(run: Run) -> tuple[float, ...] | None:
    kept = run.conditions.sentinel
    return None if kept is None else kept.first()


def _started(runs: list[Run]) -> dict[str, tuple[float, float]]:
    """Later runs whose node streamed differently from the baseline's before their first
    benchmark (the sentinel's rule), with both medians."""
    base = _first_reading(runs[0])
    out = {}
    for r in runs[1:]:
        theirs = _first_reading(r)
        if base and theirs and sentinel.moved(base, theirs) is not None:
            out[label(r)] = (stats.summarize(base).median, stats.summarize(theirs).median)
    return out


def notes(c: Comparison) -> list[str]:
    """What the reader of a comparison should know of its runs: those interrupted (their later
    figures are missing), the benchmarks whose host took CPU time (steal) or around which the
    node sentinel moved, and runs whose node streamed differently from the baseline's before
    anything was measured."""
    return ([f"Run {run} was interrupted during {where}: the figures it would have measured "
             "from there on are missing from it." for run, where in c.interrupted.items()]
            + [f"Run {run}: the hypervisor took CPU time while "
               + ", ".join(f"{b} ran ({pct:.1f} %)" for b, pct in stolen.items())
               + " (steal time): those figures carry the host's load too."
               for run, stolen in c.steal.items()]
            + [f"Run {run}: the node's DRAM triad (its sentinel) moved while "
               + ", ".join(f"{b} ran (x{ratio:.2f})" for b, ratio in moves.items())
               + ": those figures may mix two states of the node."
               for run, moves in c.changed.items()]
            + [f"Run {run}: before its first benchmark its node streamed {theirs:.1f} GB/s "
               f"against the baseline's {base:.1f} (x{theirs / base:.2f}, the sentinel's DRAM "
               "triad): memory-bound differences may be the node's state or memory "
               "configuration, not what the runs were to compare."
               for run, (base, theirs) in c.started.items()])


CSV_COLUMNS = ("benchmark", "name", "params", "unit", "better", "run", "baseline_median",
               "median", "ratio", "ratio_ci_low", "ratio_ci_high", "change_pct", "p_value",
               "verdict", "n_baseline", "n", "few_samples")


def to_json(c: Comparison) -> dict[str, Any]:
    return {"runs": c.runs, "baseline": c.runs[0],
            "differences": [{"what": k, "values": v} for k, v in c.differences],
            "rows": [r.to_dict() for r in c.rows], "only_in": c.only_in,
            "interrupted": c.interrupted, "steal_percent": c.steal,
            "node_changed": c.changed,
            "sentinel_start": {run: {"baseline": base, "run": theirs}
                               for run, (base, theirs) in c.started.items()}}
