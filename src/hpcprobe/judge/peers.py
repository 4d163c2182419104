"""The peers judge: each member of a fleet (a node among nodes of the same hardware, a link
among links, a GPU among its node's GPUs of its model) against the others, figure by figure.

A figure is flagged when it is worse than the peers' median by more than `z` robust z-scores
(median and 1.4826 MAD of the peers, on the logarithm of the figure) AND by more than `worse`
(a practical threshold: a tight fleet does not make a 1 % wobble a verdict) AND even the best
end of the 95 % CI of its own median is worse than the peers' median. Its assumptions: most
members are healthy (the median and the MAD are the healthy ones'), a member's samples are
independent draws of its figure (the CI of its median), and `min_peers` members at least have
the figure (fewer: not judged). Pure: reads metrics only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.compare import NotJoined, describe_params, joined_params
from hpcprobe.common import lazy
from hpcprobe.common.jsondoc import text_key
from hpcprobe.results.judgement import Judgement
from hpcprobe.results.model import Metric, Params

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")


@dataclass(frozen=True)
class Thresholds:
    z: float = 3.5  # robust z-scores beyond the peers' median
    worse: float = 0.04  # and at least this much worse (relative)
    min_peers: int = 3  # fewer nodes with a figure: not judged
    min_links: int = 5  # fewer links (not through a slow node or endpoint): not judged
    #: this many times worse than the peers' median is flagged however spread the peers are
    far: float = 3.0
    #: a node flagged on one measured figure within this factor of either threshold (less
    #: than this many times `worse` worse, or a z-score under this many times `z`) and not
    #: `far` is a suspect (said, not drained): one marginal figure is no verdict on a node
    marginal: float = 2.0


@dataclass(frozen=True)
class Deviation:
    """One flagged figure of a node or link."""

    metric: str
    value: float
    median: float
    unit: str
    z: float  # robust z-score in the worse direction
    worse: float  # relative, 0.12 = 12 % worse than the median
    far: bool = False  # `far` times worse than the median, however spread the peers

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "median": self.median,
                "unit": self.unit, "z": finite(self.z),
                "worse": self.worse if np.isfinite(self.worse) else None}

    def judgement(self, subject: str, th: Thresholds) -> Judgement:
        """This flagged figure as a judgement record: below its peers' median, by the
        thresholds' practical share at least (`worse`)."""
        return Judgement(self.metric, "peers", "below", self.value, self.unit,
                         self.median, th.worse, why=self.text(), subject=subject)

    def text(self) -> str:
        z = f"(z {finite(self.z) or 'inf'})"
        if not np.isfinite(self.worse):  # the peers' median is 0: loss, retransmits, errors
            return f"{self.metric} {self.value:.3g} {self.unit} where the peers' median is 0 {z}"
        return f"{self.metric} {-self.worse:+.1%} {z}"


def finite(x: float) -> float | None:
    return round(x, 2) if np.isfinite(x) else None


def _label(benchmark: str, name: str, params: dict[str, Any], ignore: frozenset[str]) -> str:
    inner = describe_params(joined_params(params, ignore))
    return f"{benchmark}.{name}" + (f" {inner}" if inner else "")


@lru_cache(maxsize=1 << 16)
def _cached_label(benchmark: str, name: str, key: Any, ignore: frozenset[str]) -> str:
    return _label(benchmark, name, dict(zip(key[0], key[2], strict=True)), ignore)


def label(m: Metric, ignore: NotJoined | frozenset[str]) -> str:
    """The figure a metric is, as `compare` joins figures (without the params in `ignore`:
    where or how it was taken, or those of its benchmark already), once per distinct figure
    (a fleet repeats the same ones), by `jsondoc.text_key` (1 and True are equal in Python;
    their labels are not)."""
    left_out = ignore if isinstance(ignore, frozenset) else ignore.of(m.benchmark)
    return params_label(m.benchmark, m.name, m.params, left_out)


def params_label(benchmark: str, name: str, params: dict[str, Any], left_out: frozenset[str]
                 ) -> str:
    """`label` of a figure given by its parts (`left_out`: the params it leaves out)."""
    key = params.key if type(params) is Params else text_key(params)
    try:
        if key is not None:
            return _cached_label(benchmark, name, key, left_out)
    except TypeError:  # a param that is a list: not hashable, not cached
        pass
    return _label(benchmark, name, params, left_out)


#: A figure of a node or link: the median of its samples and the best end of the 95 % CI of
#: that median (the end in the better direction), its unit and which way is better.
Fig = tuple[float, float, str, str]


def figure(m: Metric) -> Fig:
    """A metric's figure, from its summary (made once a metric: a fleet's verdicts ask for
    each figure's again)."""
    s = m.summary
    return (s.median, s.ci95[1] if m.better == "higher" else s.ci95[0], m.unit, m.better)


def figures(metrics: Iterable[Metric], ignore: NotJoined) -> dict[str, Fig]:
    """label -> figure of each of the metrics that has samples."""
    left_out: dict[str, frozenset[str]] = {}  # per benchmark, made once a node, not a figure
    out = {}
    for m in metrics:
        if m.samples:
            if m.benchmark not in left_out:
                left_out[m.benchmark] = ignore.of(m.benchmark)
            out[label(m, left_out[m.benchmark])] = figure(m)
    return out


@dataclass
class _Fleet:
    """Per figure: the peers' median, and their median and robust spread on the scale the
    z-score is taken on: the logarithm of a positive figure (performance varies by factors: a
    node 40x slower among nodes that differ by 25 % is an outlier, which a z-score on the
    values of four nodes cannot say), the values themselves otherwise."""

    median: Any
    log: Any  # bool per figure: z on log values
    centre: Any  # median on that scale
    spread: Any  # 1.4826 MAD on that scale
    lower_better: Any  # bool per figure

    def judge(self, values: Any) -> tuple[Any, Any]:
        """(z, worse) of values (rows x figures), both in the worse direction."""
        sign = np.where(self.lower_better, 1.0, -1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            diff = (_scaled(values, self.log) - self.centre) * sign
            z = np.where(self.spread > 0, diff / self.spread,
                         np.where(diff > 0, np.inf, np.where(diff < 0, -np.inf, 0.0)))
            worse = (values - self.median) * sign / np.abs(self.median)
        return z, worse


def _scaled(values: Any, log: Any) -> Any:
    """The log of the figures where `log`, the figures elsewhere."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(log, np.log(np.where(values > 0, values, np.nan)), values)


def _fleet(values: Any, lower_better: Any, min_peers: int) -> _Fleet:
    import warnings

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: not judged
        log = np.all((values > 0) | np.isnan(values), axis=0)
        scaled = _scaled(values, log)
        med = np.nanmedian(values, axis=0)
        centre = np.nanmedian(scaled, axis=0)
        spread = 1.4826 * np.nanmedian(np.abs(scaled - centre), axis=0)
    few = np.sum(np.isfinite(values), axis=0) < min_peers
    med = np.where(few, np.nan, med)
    return _Fleet(med, log, centre, spread, lower_better)


def _matrix(rows: Sequence[dict[str, Fig]], labels: list[str]) -> tuple[Any, Any]:
    """(medians, best ends) of the rows' figures, rows x labels; NaN where a row lacks one."""
    index = {lb: j for j, lb in enumerate(labels)}
    m = np.full((2, len(rows), len(labels)), np.nan)
    for i, row in enumerate(rows):
        for lb, (med, best, _, _) in row.items():
            if lb in index:  # a figure the others do not have is not compared
                m[0, i, index[lb]] = med
                m[1, i, index[lb]] = best
    return m[0], m[1]


class Peers:
    """Rows of figures (nodes or links) judged against the fleet of those rows."""

    def __init__(self, rows: Sequence[dict[str, Fig]], th: Thresholds,
                 floor: Mapping[str, float] | None = None) -> None:
        """`floor`: per label, the least spread (on the z-score's scale) the fleet's is taken
        as: what the rows' own scatter alone would give them."""
        self.labels = list(dict.fromkeys(lb for row in rows for lb in row))
        info = {lb: (u, b) for row in rows for lb, (_, _, u, b) in row.items()}
        self.units = [info[lb][0] for lb in self.labels]
        self.lower = np.array([info[lb][1] == "lower" for lb in self.labels], dtype=bool)
        self.values, self.best = _matrix(rows, self.labels)
        self.fleet = _fleet(self.values, self.lower, th.min_peers)
        if floor:
            least = np.array([floor.get(lb, 0.0) for lb in self.labels])
            self.fleet = replace(self.fleet, spread=np.where(
                self.fleet.log, np.fmax(self.fleet.spread, least), self.fleet.spread))
        self.th = th
        self.z, worse = self.fleet.judge(self.values)
        self.flagged = self._flag(self.values, self.best, self.z, worse)

    def deviations(self, values: Any, best: Any) -> list[list[Deviation]]:
        """The flagged figures of each row of other values, worst first."""
        return self._flag(values, best, *self.fleet.judge(values))

    def _flag(self, values: Any, best: Any, z: Any, worse: Any) -> list[list[Deviation]]:
        """Beyond the robust z (or `far` times worse than the peers' median, which peers too
        spread for a z-score must not hide) and the practical threshold, and even the best end
        of its CI worse than the peers' median (a figure whose own samples reach the median is
        not a verdict)."""
        _, best_worse = self.fleet.judge(best)
        with np.errstate(invalid="ignore"):
            far = worse >= np.where(self.lower, self.th.far - 1.0, 1.0 - 1.0 / self.th.far)
            flags = ((z > self.th.z) | far) & (worse > self.th.worse) & (best_worse > 0)
        return [worst([Deviation(self.labels[j], float(values[i, j]),
                                  float(self.fleet.median[j]), self.units[j], float(z[i, j]),
                                  float(worse[i, j]), bool(far[i, j]))
                           for j in np.flatnonzero(row)])
                for i, row in enumerate(flags)]

    def of(self, rows: Sequence[dict[str, Fig]]) -> list[list[Deviation]]:
        """Other rows (earlier measurements) against this fleet."""
        return self.deviations(*_matrix(rows, self.labels))


def outliers(rows: Sequence[dict[str, Fig]], th: Thresholds | None = None
             ) -> list[list[Deviation]]:
    """Each row's figures flagged against the other rows' (the rules above, measured once),
    worst first; a figure fewer than `min_peers` rows have is not judged."""
    return Peers(rows, th or Thresholds()).flagged


def worst(evidence: list[Deviation]) -> list[Deviation]:
    """The flagged figures, the worst first."""
    return sorted(evidence, key=lambda d: -d.worse)
