"""The result store interface and its backends by URL scheme: `--db PATH` is the embedded SQLite
file (the default); `--db SCHEME://...` picks the backend registered for SCHEME. A backend
implements the methods below; commands only ever talk to this interface."""

from __future__ import annotations

import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from hpcprobe.common.errors import HpcprobeError, OptionError
from hpcprobe.results.model import Metric, Run


def default_location() -> str:
    """$HPCPROBE_DB as given (a path or a URL), else $XDG_DATA_HOME/hpcprobe/results.sqlite
    (~/.local/share/...)."""
    env = os.environ.get("HPCPROBE_DB")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "hpcprobe" / "results.sqlite")


@dataclass(frozen=True)
class RunInfo:
    """One row of `hpcprobe list`."""

    run_id: str
    created: str
    host: str
    tag: str | None
    profile: str
    benchmarks: list[str]
    metrics: int
    duration_s: float
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM: what it had measured


@dataclass(frozen=True)
class Selection:
    """Which runs: by tag, host, and creation time (ISO 8601 text, UTC; since <= created <
    until)."""

    tag: str | None = None
    host: str | None = None
    since: str | None = None
    until: str | None = None
    tag_prefix: str | None = None  # runs whose tag starts with it


class Figure(NamedTuple):
    """One run's figure without its samples: where it was taken (its run's id, time, host and
    tag), what it is (benchmark, name, unit, which way is better, params) and its summary as
    stored (the median and the 95 % CI of the median). A tuple: a fleet's history reads
    millions."""

    run_id: str
    created: str
    host: str
    tag: str | None
    benchmark: str
    name: str
    unit: str
    better: str
    params: dict[str, Any]
    median: float
    ci_low: float
    ci_high: float

    @property
    def rel_ci(self) -> float:
        """Half the CI width relative to the median (as Summary.rel_ci_halfwidth)."""
        return (self.ci_high - self.ci_low) / 2 / abs(self.median) if self.median else math.inf


class Columns(NamedTuple):
    """One host's figures of one metric with the same params, oldest run first, as columns
    (what a fleet's history reads: a year of a thousand nodes' runs without an object a
    figure)."""

    host: str
    unit: str
    better: str
    params: dict[str, Any]
    runs: tuple[str, ...]
    created: tuple[str, ...]
    tags: tuple[str | None, ...]
    medians: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]


def columns(figures: list[Figure]) -> list[Columns]:
    """Figures (oldest first) as columns per host and params."""
    import json

    groups: dict[tuple[str, str], list[Figure]] = {}
    for f in figures:
        groups.setdefault((f.host, json.dumps(f.params, sort_keys=True)), []).append(f)
    out = []
    for (host, _), fs in groups.items():
        runs, created, _, tags, _, _, unit, better, params, med, lo, hi = zip(*fs, strict=True)
        out.append(Columns(host, unit[0], better[0], params[0], runs, created, tags, med, lo,
                           hi))
    return out


class AlreadyStored(HpcprobeError):
    """The store holds a run with this id already (an import of the same run twice)."""


class Store(ABC):
    """An open result store: save runs, list them, load one by reference."""

    #: URL scheme that selects the backend (a plain path selects "sqlite")
    scheme: str
    #: where it lives, as the user gave it (a path, or a URL without its password)
    path: Path | str

    @classmethod
    def open(cls, location: str | os.PathLike[str] | None = None, create: bool = True) -> Store:
        """The store at `location` (default: $HPCPROBE_DB, else the user's SQLite file), by
        the backend its URL scheme names."""
        text = os.fspath(location) if location is not None else default_location()
        m = re.match(r"^([a-z][a-z0-9+.-]*)://", text)
        scheme = m.group(1) if m else "sqlite"
        if scheme not in BACKENDS:
            raise OptionError(f"<db> {text}: no result store backend for {scheme}:// here; "
                              f"backends: {', '.join(sorted(BACKENDS))} (a plain path is SQLite)")
        return BACKENDS[scheme].connect(text, create)

    @classmethod
    @abstractmethod
    def connect(cls, location: str, create: bool) -> Store: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def snapshot(self) -> AbstractContextManager[Any]:
        """A block whose reads see one state of the store (no run another writer commits
        meanwhile is half seen); a backend without transactions reads as it goes."""
        return nullcontext()

    def keeping(self) -> AbstractContextManager[Any]:
        """A block whose keeping (the series and searches kept beside the figures) is
        written at its end, at once; a backend without transactions writes as it goes."""
        return nullcontext()

    @abstractmethod
    def check_writable(self) -> None:
        """Fail now, not after the measurements, when the store cannot take a run."""

    @abstractmethod
    def save(self, run: Run, checked: bool = False) -> None:
        """Store a run whole (one transaction) or not at all; AlreadyStored when its id is
        there. The run is checked against the schema first unless it is `checked`: made by
        `read_json` and not changed since (a campaign's node documents, an import's files,
        checked as they were read)."""

    def save_all(self, runs: Sequence[Run], checked: bool = False) -> list[str]:
        """Store each run whole (each checked first, as `save`); the ids of those stored
        already (one a run given twice), which are skipped. A backend with transactions stores
        them in one (a campaign's nodes that ended in one poll, an import's files: one commit,
        not one a run)."""
        skipped = []
        for run in runs:
            try:
                self.save(run, checked)
            except AlreadyStored:
                skipped.append(run.run_id)
        return skipped

    @abstractmethod
    def has(self, run_id: str) -> bool:
        """Whether a run with this exact id is stored."""

    @abstractmethod
    def runs(self, limit: int | None = None, where: Selection | None = None) -> list[RunInfo]:
        """The most recent runs (those selected), newest first."""

    @abstractmethod
    def before(self, wanted: Sequence[tuple[str, str, str]], limit: int) -> list[list[str]]:
        """For each (host, time, profile): the ids of that host's runs of that profile made
        before that time, newest first, up to `limit` (a fleet's nodes' previous runs, a few
        hundred nodes a query)."""

    @abstractmethod
    def metric_across(self, benchmark: str, name: str, where: Selection | None = None,
                      params: dict[str, str] | None = None
                      ) -> list[tuple[dict[str, Any], Metric]]:
        """One metric of every selected run (those of its figures whose params have these
        values, given as text: kernel=triad, threads=128), with its run's id, created, host
        and tag, oldest run first: the figure of a campaign across the fleet, in one query."""

    @abstractmethod
    def figures_across(self, benchmark: str, name: str, where: Selection | None = None,
                       params: dict[str, str] | None = None) -> list[Figure]:
        """As metric_across, but each figure's stored summary instead of its samples: a fleet's
        history of one figure (a thousand nodes x a year of runs) without reading every
        sample."""

    def series_across(self, benchmark: str, name: str, where: Selection | None = None,
                      params: dict[str, str] | None = None) -> list[Columns]:
        """As figures_across, as columns per host and params."""
        return columns(self.figures_across(benchmark, name, where, params))

    @abstractmethod
    def kept(self, kind: str, keys: list[str]) -> dict[str, tuple[str, str]]:
        """What a command kept here to reuse (a series' change-point search, a run's figures
        under its run id): key -> (the digest of what it was made from, the value), for the
        keys kept."""

    @abstractmethod
    def keep(self, kind: str, items: dict[str, tuple[str, str]]) -> None:
        """Keep these (key -> digest, value) to reuse, if the store takes them now."""

    @abstractmethod
    def headers(self, run_ids: list[str]) -> dict[str, Run]:
        """These runs without their metrics (provenance, topology, findings...): what their
        configurations are, for many runs in a few queries."""

    @abstractmethod
    def disturbances(self, where: Selection | None = None, kinds: Sequence[str] = ()
                     ) -> dict[str, tuple[list[Any], bool]]:
        """Run id -> its findings and whether it was interrupted, for every selected run with
        findings or interrupted (the run rows only: what a history needs to leave disturbed
        runs out); `kinds`: only those interrupted or whose findings name one of these kinds
        (and maybe others that name it elsewhere: the caller reads each finding's kind), so a
        fleet's runs with findings of other kinds alone are not read (a 1,000-node campaign's
        sampling findings: 0.19 s read and parsed, 0.09 s passed over, here)."""

    @abstractmethod
    def delete(self, run_ids: list[str]) -> int:
        """Remove these runs whole (one transaction), and what was kept under their ids; how
        many there were."""

    @abstractmethod
    def load(self, ref: str) -> Run:
        """A run by id, unique id prefix, tag, host (its latest run) or 'latest'."""

    @abstractmethod
    def load_all(self, where: Selection, metrics: bool = True) -> list[Run]:
        """Every selected run whole, oldest first, in a few queries whatever their number (a
        campaign of a thousand nodes); without `metrics`, their headers (as `headers` reads
        them)."""

    @abstractmethod
    def load_ids(self, run_ids: list[str]) -> dict[str, Run]:
        """These runs whole (those stored), by id, in a few queries whatever their number (the
        previous runs of a campaign's thousand nodes)."""


#: The registered backends by URL scheme; each backend module registers itself with
#: @backend, and results/__init__.py imports every backend module (one line per backend).
BACKENDS: dict[str, type[Store]] = {}


def backend(cls: type[Store]) -> type[Store]:
    """Register a store backend under its scheme."""
    BACKENDS[cls.scheme] = cls
    return cls
