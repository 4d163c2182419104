"""A figure's history: its value run after run on one host, and the change points in it.

Change points are found by the penalised exact search (PELT) of `ruptures` (its kernel change
point detection with a linear kernel: the squared error about each segment's mean) on the
logarithm of the runs' medians (a step of x% is the same size at any level), with a penalty
from the series' own noise (the robust spread of successive differences, never below a floor),
and kept only where Welch's t-test between the segments either side says the step is real
(p < ALPHA) and it is larger than the practical floor. Each run counts with the weight its
stored CI gives it (inverse variance: its own CI plus the run-to-run noise), so a noisy run
moves the segments' levels less. Runs marked as disturbed (the node sentinel moved, the
hypervisor stole time, interrupted) are left out of the search and said so. Pure: works on the
points (or columns) it is given; many series are searched on this node's CPUs (`shared`)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple, TypeVar

from hpcprobe.results.judgement import Judgement

#: A step is real when Welch's test between the segments gives p below this
ALPHA = 0.001
#: Steps smaller than this (relative) are not reported, however significant
FLOOR = 0.02
#: The least runs a segment has on either side of a change point
MIN_SEGMENT = 3
#: The least runs a series needs to be searched for change points
MIN_RUNS = 2 * MIN_SEGMENT
#: The penalty of a new segment, in units of the series' noise variance x log(n) (BIC's 2)
PENALTY = 3.0


class Point(NamedTuple):
    """One run's figure: its run, when and where, the median and relative CI half-width, and
    why it is left out of the search (None: it is not). A tuple: a fleet's history makes
    millions."""

    run_id: str
    created: str
    host: str
    tag: str | None
    median: float
    rel_ci: float
    disturbed: str | None = None


@dataclass(frozen=True)
class Change:
    """A change point: the last run before it and the first after, the levels either side
    (weighted means of the medians), the ratio after/before with its 95 % CI, Welch's p."""

    before: Point
    after: Point
    level_before: float
    level_after: float
    ratio: float
    ratio_ci: tuple[float, float]
    p: float
    runs_before: int
    runs_after: int
    differences: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    def judgement(self, figure: str, unit: str, better: str, subject: str) -> Judgement:
        """This change point as a judgement record: the level after against the level before
        (below where it moved the worse way, else ok: a figure that improved is no fault)."""
        worse = self.ratio < 1.0 if better == "higher" else self.ratio > 1.0
        return Judgement(figure, "history", "below" if worse else "ok", self.level_after, unit,
                         self.level_before, why=f"x{self.ratio:.3f} (95 % CI "
                         f"{self.ratio_ci[0]:.3f}-{self.ratio_ci[1]:.3f}, p {self.p:.2g}) from "
                         f"run {self.after.run_id} on", subject=subject)


class Step(NamedTuple):
    """A change point of the runs searched (indices into them): the first segment's start, the
    first run after the change, the end of the segment after it (exclusive); the levels
    either side (weighted means of the medians), the ratio after/before with its 95 % CI,
    Welch's p."""

    lo: int
    cut: int
    hi: int
    level_before: float
    level_after: float
    ratio: float
    ratio_ci: tuple[float, float]
    p: float

    def change(self, before: Point, after: Point) -> Change:
        """The change point between these runs (the last before, the first after)."""
        return Change(before, after, self.level_before, self.level_after, self.ratio,
                      self.ratio_ci, self.p, self.cut - self.lo, self.hi - self.cut)


def median(values: Any) -> float:
    """NumPy's median of finite values (the middle one sorted, or the mean of the middle two),
    without its checks: half the time of a short series' search, and a fleet's history
    searches thousands."""
    import numpy as np

    ordered = np.sort(values)
    half = len(ordered) // 2
    return float(ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2)


def noise(values: Any) -> float:
    """The run-to-run spread of log values: the robust standard deviation of successive
    differences / sqrt(2) (a step moves one difference, not the spread)."""
    import numpy as np

    diffs = np.diff(np.asarray(values, dtype=float))
    if len(diffs) < 2:
        return 0.0
    mad = median(np.abs(diffs - median(diffs)))
    # figures of few samples take few values: most differences 0, a MAD of 0; then the
    # standard deviation, which one step moves by one difference only
    return (1.4826 * mad if mad > 0 else float(np.std(diffs, ddof=1))) / math.sqrt(2)


def _level(logs: Any, weights: Any) -> tuple[float, float]:
    """The weighted mean of log values and its standard error (from the weights and the
    scatter, whichever is larger)."""
    import numpy as np

    w = float(weights.sum())
    mean = float((logs * weights).sum()) / w
    se_w = math.sqrt(1.0 / w)
    if len(logs) > 1:
        return mean, max(se_w, float(np.std(logs, ddof=1)) / math.sqrt(len(logs)))
    return mean, se_w


def _welch(a: Any, b: Any, floor: float) -> float:
    """Welch's test between two segments, each one's standard deviation at least `floor` (the
    series' noise: a segment of a few equal values is no proof of a step): the two-sided p of
    its t with the Welch-Satterthwaite degrees of freedom (as SciPy's ttest_ind_from_stats,
    whose checks cost ten times the test: 60 us a call)."""
    import numpy as np
    from scipy import special

    va, vb = ((max(float(np.std(x, ddof=1)) if len(x) > 1 else 0.0, floor) ** 2) / len(x)
              for x in (a, b))
    t = (float(b.mean()) - float(a.mean())) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / max(len(a) - 1, 1) + vb ** 2 / max(len(b) - 1, 1))
    return float(2 * special.stdtr(df, -abs(t)))


def _breaks(logs: Any, sigma: float) -> list[int]:
    """Candidate segment ends (exclusive indices, the last one len(logs) dropped)."""
    scale = max(sigma, FLOOR / 4)
    # the linear kernel's cost is the squared error about each segment's mean (ruptures'
    # "l2"), searched exactly with a penalty (PELT) in ruptures' C code: the same segments
    # as Pelt(model="l2") in 0.5 ms where that takes 0.9 s for 365 runs
    pen = PENALTY * scale ** 2 * math.log(len(logs))
    search = _pelt_l2()
    if search is None:
        import ruptures

        algo = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT, jump=1)
        return [int(e) for e in algo.fit(logs.reshape(-1, 1)).predict(pen=pen)[:-1]]
    # what KernelCPD(kernel="linear").fit(logs).predict(pen) does: its C search, then the
    # segments' ends read back from the last (tests/test_history.py holds the two equal)
    back = search(logs.reshape(-1, 1).astype(float), pen, MIN_SEGMENT)
    ends, end = [], len(logs)
    while end > 0:
        end = int(back[end])
        ends.append(end)
    return ends[-2::-1]


#: ruptures' C module that KernelCPD searches with
_EKCPD = "ruptures.detection._detection.ekcpd"


@cache
def _pelt_l2() -> Callable[..., Any] | None:
    """ruptures' C search of KernelCPD with a linear kernel by PELT (`ekcpd_pelt_L2`), loaded
    alone: importing ruptures imports SciPy's statistics and spatial modules for its other
    costs (1.2 s here, at a report's or search worker's first search), where this search needs
    none of them (its module loads in 1 ms). None where ruptures has not that module (another
    release's layout): KernelCPD itself then."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    try:
        top = importlib.util.find_spec("ruptures")  # found, not imported
        if top is None or not top.submodule_search_locations:
            return None
        where = Path(next(iter(top.submodule_search_locations)), "detection", "_detection")
        path = next((where / f"ekcpd{s}" for s in importlib.machinery.EXTENSION_SUFFIXES
                     if (where / f"ekcpd{s}").is_file()), None)
        if path is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(_EKCPD, str(path))
        spec = importlib.util.spec_from_file_location(_EKCPD, path, loader=loader)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        search: Callable[..., Any] = module.ekcpd_pelt_L2
        return search
    except (ImportError, OSError, AttributeError):
        return None


def searcher() -> None:
    """What a search needs loaded (before workers fork, or as one begins): ruptures' search
    and SciPy's special functions (Welch's test), a third of a second."""
    from scipy import special  # noqa: F401

    if _pelt_l2() is None:
        import ruptures  # noqa: F401


def steps(medians: Any, rel_ci: Any, alpha: float = ALPHA, floor: float = FLOOR) -> list[Step]:
    """The change points of a series of run medians (oldest first, each above 0; `rel_ci`
    each one's relative 95 % CI half-width, inf where it has none), each tested; [] below
    MIN_RUNS runs. Each run weighs the inverse variance of its log median: its own CI
    (half-width / 1.96) and the run-to-run noise."""
    import numpy as np

    if len(medians) < MIN_RUNS:
        return []
    logs = np.log(np.asarray(medians, dtype=float))
    sigma = noise(logs)
    own = np.asarray(rel_ci, dtype=float) / 1.96
    weights = 1.0 / (np.where(np.isfinite(own), own, 1.0) ** 2 + sigma ** 2 + 1e-12)
    ends = _breaks(logs, sigma)
    bounds = [0, *ends, len(logs)]
    out = []
    for i, cut in enumerate(ends):
        lo, hi = bounds[i], bounds[i + 2]
        a, b = logs[lo:cut], logs[cut:hi]
        p = _welch(a, b, max(sigma, FLOOR / 4))
        (ma, sa), (mb, sb) = _level(a, weights[lo:cut]), _level(b, weights[cut:hi])
        diff, se = mb - ma, math.hypot(sa, sb)
        if p >= alpha or abs(math.exp(diff) - 1) < floor:
            continue
        out.append(Step(lo, cut, hi, math.exp(ma), math.exp(mb), math.exp(diff),
                        (math.exp(diff - 1.96 * se), math.exp(diff + 1.96 * se)), p))
    return out


#: Series a process searches at least before the searches are shared among this node's CPUs
PARALLEL = 100
#: Workers begun ahead of a report's searches (`ahead`), at most
AHEAD = 4
_T = TypeVar("_T")
_R = TypeVar("_R")
_worker = False  # True in a worker of shared() or ahead(): it shares nothing further
_ahead: Any = None  # the workers `ahead` began (their pool, how many), while its block runs


def _in_worker() -> None:
    global _worker
    _worker = True


def _warm() -> None:
    """A worker begun ahead: what a search needs loaded before its first search."""
    searcher()
    _in_worker()


def shared(fn: Callable[[_T], _R], jobs: Sequence[_T], workers: int) -> list[_R]:
    """fn of each job, in order, shared among up to `workers` of the CPUs this process may use
    (forked: the workers have what this process loaded, `searcher` for a search, and read);
    here where fewer than two would work, or in such a worker already."""
    import os

    workers = min(len(os.sched_getaffinity(0)), workers, len(jobs))
    if workers < 2 or _worker:
        return [fn(job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                             initializer=_in_worker) as pool:
        return list(pool.map(fn, jobs))


@contextmanager
def ahead(likely: bool = True) -> Iterator[None]:
    """The searches of this block (`steps_of`) on workers begun now, where some are `likely`,
    one CPU of this process's left to it (up to AHEAD): each loads what a search needs
    (`searcher`) while the caller reads the series it will search. None where this process
    may use one CPU, or is such a worker."""
    import os

    global _ahead
    workers = min(len(os.sched_getaffinity(0)) - 1, AHEAD)
    if not likely or workers < 1 or _worker or _ahead is not None:
        yield
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_warm)
    _ahead = (pool, workers)
    try:
        for _ in range(workers):  # each one begun now (the executor begins one a job)
            pool.submit(int)
        yield
    finally:
        _ahead = None
        pool.shutdown(cancel_futures=True)


def _steps_each(many: Sequence[tuple[Any, Any]]) -> list[list[Step]]:
    return [steps(medians, rel_ci) for medians, rel_ci in many]


def steps_of(many: Sequence[tuple[Any, Any]]) -> list[list[Step]]:
    """steps() of many series (each its medians and rel_ci), in order: on the workers begun
    `ahead`, else on the CPUs this process may use where there are many (a fleet's thousand
    series take a tenth of a second a CPU), else here."""
    return begun(many)()


def begun(many: Sequence[tuple[Any, Any]]) -> Callable[[], list[list[Step]]]:
    """steps_of(many) begun now on the workers begun `ahead`, while the caller goes on (a
    report reads its next figure's series meanwhile): the function that gives them, in order,
    once they are found; found now where no workers were begun."""
    import os

    if not many:
        return lambda: []
    if _ahead is not None:
        pool, workers = _ahead
        pending = [pool.submit(_steps_each, chunk) for chunk in _chunks(many, workers)]
        return lambda: [found for chunk in pending for found in chunk.result()]
    searcher()  # loaded once, before the workers fork
    workers = min(len(os.sched_getaffinity(0)), len(many) // PARALLEL)
    found = [found for chunk in shared(_steps_each, _chunks(many, workers), workers)
             for found in chunk]
    return lambda: found


def _chunks(many: Sequence[_T], workers: int) -> list[Sequence[_T]]:
    """many in four parts a worker (one part a worker takes at a time: the parts even out)."""
    size = -(-len(many) // (4 * max(workers, 1)))
    return [many[i:i + size] for i in range(0, len(many), size)]


#: What a search depends on besides its series: a kept search of other settings is not reused
METHOD = f"kernelcpd-linear {MIN_SEGMENT} {MIN_RUNS} {PENALTY} {ALPHA} {FLOOR} welch"


def digest(medians: Any, rel_ci: Any) -> str:
    """What the search of a series is kept by: its values and the method."""
    import hashlib

    import numpy as np

    h = hashlib.sha256(METHOD.encode())
    for values in (medians, rel_ci):
        h.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    return h.hexdigest()


def steps_text(found: list[Step]) -> str:
    return json.dumps([list(s) for s in found])


def steps_from(text: str) -> list[Step]:
    return [Step(int(lo), int(cut), int(hi), before, after, ratio, (ci[0], ci[1]), p)
            for lo, cut, hi, before, after, ratio, ci, p in json.loads(text)]


def change_points(points: Sequence[Point], alpha: float = ALPHA, floor: float = FLOOR
                  ) -> list[Change]:
    """The change points of one series (oldest first), each tested; [] below MIN_RUNS
    undisturbed runs."""
    kept = [p for p in points if p.disturbed is None and p.median > 0]
    return [s.change(kept[s.cut - 1], kept[s.cut])
            for s in steps([p.median for p in kept], [p.rel_ci for p in kept], alpha, floor)]


def sparkline(values: Sequence[float]) -> str:
    """The values as a line of eighth blocks, lowest to highest."""
    bars = "▁▂▃▄▅▆▇█"
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        return bars[3] * len(values)
    return "".join(bars[min(7, int((v - lo) / (hi - lo) * 8))] for v in values)


#: Change points of several nodes count as one fleet change when their first runs after are
#: this many days apart at most (a roll-out over a weekend)
WINDOW_DAYS = 3


@dataclass(frozen=True)
class FleetChange:
    """Nodes whose series of one figure changed the same way at about the same time: when (the
    earliest first run after), their median change, which nodes of how many, and the
    configuration differences they share with how many of them had each."""

    date: str
    change: float
    nodes: list[str]
    of: int
    causes: list[tuple[str, str, int]]  # what, "before -> after", how many of the nodes
    group: str = ""  # the hardware group of the nodes


def _days(a: str, b: str) -> float:
    return abs((datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()) / 86400


def within(a: str, b: str, window: float = WINDOW_DAYS) -> bool:
    """Whether two times (ISO 8601) are at most `window` days apart."""
    return _days(a, b) <= window


def fleet(changes: dict[str, list[Change]], hosts: int, window: float = WINDOW_DAYS,
          group: str = "") -> list[FleetChange]:
    """The node change points of one figure (host -> its changes) grouped into fleet changes:
    the same direction, first runs after within `window` days of the group's first; each with
    the differences the nodes share, most common first."""
    pending = sorted(((h, c) for h, cs in changes.items() for c in cs),
                     key=lambda hc: hc[1].after.created)
    out = []
    while pending:
        host, first = pending[0]
        together, members, rest = [(host, first)], {host}, []
        for i, item in enumerate(pending[1:], 1):
            h, c = item
            if not within(first.after.created, c.after.created, window):
                rest += pending[i:]  # oldest first: the rest are later still
                break
            if h not in members and (c.ratio > 1) == (first.ratio > 1):
                together.append(item)
                members.add(h)
            else:
                rest.append(item)
        pending = rest
        out.append(FleetChange(first.after.created,
                               statistics.median(c.change for _, c in together), sorted(members),
                               hosts, count_causes([c.differences for _, c in together]), group))
    return out


#: One host's runs for a group's campaign medians: the host, and each run's created, tag and
#: median (undisturbed runs, oldest first)
HostRuns = tuple[str, Sequence[str], Sequence[str | None], Sequence[float]]


def _campaign_keys(runs: Sequence[HostRuns]) -> list[str]:
    """Each run's campaign, host after host: its tag where every host ran that tag at most
    once (a campaign visits each node once), else the tag and the run's day (a tag reused
    night after night), and an untagged run's day. (Sets of each host's tags, in C: a fleet's
    year of a thousand hosts has 365,000 runs.)"""
    from collections import Counter

    repeated: set[str | None] = set()
    for _, _, tags, _ in runs:
        if len(set(tags)) < len(tags):  # this host ran a tag twice (or two untagged runs)
            repeated.update(t for t, n in Counter(tags).items() if n > 1)
    repeated.discard(None)
    keys: list[str] = []
    for _, created, tags, _ in runs:
        if None in tags or not repeated.isdisjoint(tags):
            keys += [tag if tag is not None and tag not in repeated else
                     f"{tag or ''}@{when[:10]}" for tag, when in zip(tags, created, strict=True)]
        else:
            keys += tags  # type: ignore[arg-type]
    return keys


def campaign_medians(series: dict[str, Sequence[Point]], group: str) -> list[Point]:
    """A group's series of campaign medians (oldest first) from its hosts' series: see
    campaign_medians_of."""
    runs = []
    for host, ps in series.items():
        kept = [p for p in ps if p.disturbed is None and p.median > 0]
        runs.append((host, [p.created for p in kept], [p.tag for p in kept],
                     [p.median for p in kept]))
    return campaign_medians_of(runs, group)


def campaign_medians_of(runs: Sequence[HostRuns], group: str) -> list[Point]:
    """A group's series of campaign medians (oldest first) from its hosts' undisturbed runs:
    per campaign, the median of its hosts' run medians, dated by the campaign's first run, its
    rel_ci the 95 % CI of that median (the rank interval over the hosts); campaigns of one host
    only are left out (a node's own run is its own series)."""
    import numpy as np

    from hpcprobe.common.stats import median_ci_ranks

    codes: dict[str, int] = {}
    inverse = np.array([codes.setdefault(k, len(codes)) for k in _campaign_keys(runs)],
                       dtype=np.int64)
    names = list(codes)
    # the runs in campaign order, each campaign's by median (one sort, in NumPy)
    values = np.concatenate([np.asarray(r[3], dtype=float) for r in runs]) if runs else \
        np.zeros(0)
    host_of = np.repeat(np.arange(len(runs)), [len(r[3]) for r in runs])
    when = np.array([w for r in runs for w in r[1]], dtype=object)
    order = np.lexsort((values, inverse))
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    out = []
    for lo, hi in zip(starts, [*starts[1:], len(order)], strict=True):
        idx = order[lo:hi]
        if len(idx) < 2 or np.all(host_of[idx] == host_of[idx[0]]):
            continue
        xs = values[idx]  # sorted
        n, mid = len(xs), float(np.median(xs))
        r_lo, r_hi = median_ci_ranks(n)
        rel = (xs[r_hi] - xs[r_lo]) / 2 / abs(mid) if mid else math.inf
        name = names[inverse[idx[0]]]
        out.append(Point(name, min(when[idx]), group, name, mid, float(rel)))
    return sorted(out, key=lambda p: p.created)


@dataclass(frozen=True)
class GroupChange:
    """A change point of a group's campaign medians: the change, how many of the group's
    hosts' own series changed the same way within WINDOW_DAYS of it, and the configuration
    differences across it per host (each host's last run before and first run after), with
    how many hosts had each."""

    group: str
    change: Change
    hosts: int
    moved: int
    causes: list[tuple[str, str, int]]


def together(a: Change, b: Change) -> bool:
    """Whether two change points went the same way within WINDOW_DAYS of each other."""
    return (a.ratio > 1) == (b.ratio > 1) and within(a.after.created, b.after.created)


def moved_with(change: Change, changes: dict[str, list[Change]]) -> int:
    """How many hosts' own change points went the way of `change` within WINDOW_DAYS."""
    return sum(1 for cs in changes.values() if any(together(change, c) for c in cs))


def count_causes(differences: Sequence[Sequence[tuple[str, Sequence[str]]]]
                 ) -> list[tuple[str, str, int]]:
    """(what, "before -> after", how many) over several hosts' differences, most common
    first."""
    counts: dict[tuple[str, str], int] = {}
    for diffs in differences:
        for what, values in diffs:
            key = (what, " -> ".join(values))
            counts[key] = counts.get(key, 0) + 1
    return sorted(((w, v, n) for (w, v), n in counts.items()), key=lambda x: -x[2])
