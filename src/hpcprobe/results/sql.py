"""What the SQL backends of the result store share: one schema (runs, and metrics with every
sample), a run saved in one transaction, runs listed, resolved and loaded. A backend gives its
driver's connection, placeholder style, errors, transactions and its own indexes."""

from __future__ import annotations

import functools
import json
import operator
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from hpcprobe.common import jsondoc
from hpcprobe.common.bulk import bulk
from hpcprobe.common.errors import HpcprobeError, OptionError, UserError
from hpcprobe.common.stats import summarize
from hpcprobe.results import conditions, series
from hpcprobe.results.model import SCHEMA_VERSION, Metric, Params, Run, shared, validate
from hpcprobe.results.store import (
    AlreadyStored,
    Columns,
    Figure,
    RunInfo,
    Selection,
    Store,
)

#: The version-1 tables, in each backend's types (later versions: MIGRATIONS).
_SCHEMA_V1 = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    host TEXT NOT NULL,
    tag TEXT,
    profile TEXT NOT NULL,
    benchmarks TEXT NOT NULL,
    duration_s {real} NOT NULL,
    schema_version INTEGER NOT NULL,
    provenance TEXT NOT NULL,
    topology TEXT NOT NULL,
    findings TEXT NOT NULL,
    warnings TEXT NOT NULL,
    errors TEXT NOT NULL{runs_extra}
);
CREATE TABLE metrics (
    metric_id {serial} PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    benchmark TEXT NOT NULL,
    name TEXT NOT NULL,
    unit TEXT NOT NULL,
    better TEXT NOT NULL,
    params TEXT NOT NULL
);
CREATE TABLE samples (
    metric_id {bigint} NOT NULL REFERENCES metrics(metric_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    value {real} NOT NULL,
    PRIMARY KEY (metric_id, seq)
);
CREATE INDEX metrics_run ON metrics(run_id);
CREATE INDEX runs_host ON runs(host);
CREATE INDEX runs_tag ON runs(tag)
"""


def schema_v1(serial: str, real: str, bigint: str, runs_extra: str = "") -> tuple[str, ...]:
    """The version-1 schema, statement by statement, in a backend's column types."""
    text = _SCHEMA_V1.format(serial=serial, real=real, bigint=bigint, runs_extra=runs_extra)
    return tuple(s.strip() for s in text.split(";") if s.strip())


#: An interrupted run's provenance (its json.dumps text) holds "interrupted": {...} (versions
#: 1-3 kept no column of it)
INTERRUPTED = '%"' + conditions.KEYS["interrupted"] + '": {%'
#: The runs a history must look at for why it leaves them out
MARKED = "findings <> '[]' OR interrupted = 1"

#: Statements that take a store from the version before to this version (both backends speak
#: this SQL); a store is created at version 1 and brought up by every step.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # v2: the queries a fleet needs, one metric across all runs and runs by time
    2: ("CREATE INDEX IF NOT EXISTS metrics_name ON metrics(benchmark, name)",
        "CREATE INDEX IF NOT EXISTS runs_created ON runs(created)"),
    # v3: a campaign driver's record is a kind of its own, without the zeroed topology that
    # versions 1-2 stored for it (exactly this text: what they wrote)
    3: ("ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'node'",
        "UPDATE runs SET kind = 'campaign', topology = '{}' WHERE topology = "
        "'{\"counts\": {\"packages\": 0, \"numa_nodes\": 0, \"l3_domains\": 0, \"cores\": 0, "
        "\"pus\": 0}}'"),
    # v4: each metric's summary beside its samples (the median and its 95 % CI), so a fleet's
    # history reads one row a figure, not every sample (rows stored before stay NULL there and
    # are summarised from their samples when read); and what that history reads of the runs,
    # by index: when, where and which (not the runs' wide rows), and the runs interrupted or
    # with findings (a partial index: a year of clean runs is not read)
    4: (*(f"ALTER TABLE metrics ADD COLUMN {c} DOUBLE PRECISION"
          for c in ("median", "ci_low", "ci_high")),
        "ALTER TABLE runs ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0",
        f"UPDATE runs SET interrupted = 1 WHERE provenance LIKE '{INTERRUPTED}'",
        "CREATE INDEX IF NOT EXISTS runs_when ON runs(created, host, tag, run_id)",
        f"CREATE INDEX IF NOT EXISTS runs_marked ON runs(run_id) WHERE {MARKED}"),
    # v5: a figure's runs looked up by id from an index that says when, where and which, so a
    # fleet's figure is one join in the database (the runs' wide rows are never read; before
    # it, the selected runs were read apart and joined in Python: 7 us a figure)
    5: ("CREATE INDEX IF NOT EXISTS runs_id_when ON runs(run_id, created, host, tag)",),
    # v6: each host's series of a figure kept beside the figures (results/series.py), so a
    # fleet's history of one figure reads a row a host, not a row a run: how far it is kept
    # (the last metric id and the count of the figure's rows) and the rows
    6: ("CREATE TABLE series_kept (figure TEXT PRIMARY KEY, upto BIGINT NOT NULL, "
        "n BIGINT NOT NULL)",
        "CREATE TABLE series_rows (figure TEXT NOT NULL, host TEXT NOT NULL, part INTEGER NOT "
        "NULL, unit TEXT NOT NULL, better TEXT NOT NULL, runs TEXT NOT NULL, created TEXT NOT "
        "NULL, tags TEXT NOT NULL, numbers TEXT NOT NULL, PRIMARY KEY (figure, host, part))",
        # and what commands keep to reuse (each series' change-point search), by what it was
        # made from
        "CREATE TABLE kept_results (kind TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT "
        "NULL, value TEXT NOT NULL, PRIMARY KEY (kind, key))"),
    # v7: a metric's samples in its own row, packed (`pack`: a thousand nodes' 822 samples
    # each were 872,000 rows, 30 MB with their key; packed, 7 MB; in a bare table here, 2.2 s
    # to insert and 1.2 s to read back as rows, 0.6 and 0.6 s packed), the rows of the
    # samples table moved there and the table dropped; and SQLite keys a figure's rows by
    # the MD5 of its params text, as PostgreSQL has since v6 (each backend's own statements,
    # as each packs in its own SQL)
    7: (),
    # v8: v2's index of a figure's rows by (benchmark, name) dropped: each backend's figure
    # index (metrics_figure_md5) begins with those columns and answers the same lookups, and
    # every figure stored kept both up to date (5.5 MB of a 1,000-node campaign's 119 MB store;
    # the inserts' time it saves was inside this guest's noise)
    8: ("DROP INDEX IF EXISTS metrics_name",),
}
#: The version this hpcprobe writes and reads.
STORE_VERSION = max(MIGRATIONS)


def json_value(text: str) -> str:
    """A param value given as text (KEY=VALUE), as the canonical JSON of the stored params
    writes it: numbers, true, false and null as they are, anything else a JSON string."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return json.dumps(text)
    return json.dumps(value) if isinstance(value, (int, float, bool)) or value is None \
        else json.dumps(text)


def params_text(params: dict[str, Any]) -> str:
    """A metric's params as stored: their JSON, keys sorted. Made once per distinct params
    (a fleet's thousand nodes repeat the same few hundred: 6 us each here, 2 us found), the
    same text object each time (its digest's hash is then made once too), by
    `jsondoc.text_key` (1, 1.0 and True are equal in Python, not in JSON); params with a
    negative float zero or a value that cannot be hashed are written every time. (The guard
    once took any value equal to zero, 0 and False too: a third of a node's figures' params.)"""
    if type(params) is Params:  # read from a document or a store: made once, kept there
        return params.text
    key = jsondoc.text_key(params)
    try:
        return json.dumps(params, sort_keys=True) if key is None else _params_text(key)
    except TypeError:  # a list or an object among the values
        return json.dumps(params, sort_keys=True)


@functools.lru_cache(maxsize=65_536)
def _params_text(key: tuple[tuple[str, ...], tuple[type, ...], tuple[Any, ...]]) -> str:
    names, _, values = key
    return json.dumps(dict(zip(names, values, strict=True)), sort_keys=True)


def pack(samples: Sequence[float]) -> bytes:
    """A metric's samples as stored: IEEE 754 doubles, big-endian (PostgreSQL's float8send),
    in order; every bit of each kept."""
    return struct.pack(f">{len(samples)}d", *samples)


_FIRST = operator.itemgetter(0)


def unpack(packed: bytes | None) -> list[float]:
    """The samples `pack` stored (None: none)."""
    return list(_doubles(len(packed)).unpack(packed)) if packed else []


@functools.lru_cache(maxsize=256)
def _doubles(size: int) -> struct.Struct:
    """The layout of `size` bytes of packed samples, made once (a fleet's figures have a few
    sample counts: 181,000 unpacked in 0.085 s, 0.124 s with a format made each time)."""
    return struct.Struct(f">{size // 8}d")


def first_line(exc: Exception) -> str:
    """A driver error in one line (PostgreSQL adds DETAIL and HINT lines)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _like(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


class SqlStore(Store):
    """A result store over a DB-API connection; SQL is written with ? placeholders."""

    placeholder = "?"
    order = "rowid"  # the column that orders runs created in the same second
    #: the runs r as a join on run_id reads them: SQLite's planner takes the primary key's
    #: index and reads each run's wide row; the index of v5 holds what a figure needs
    runs_by_id = "runs r INDEXED BY runs_id_when"
    driver_errors: tuple[type[Exception], ...] = ()
    base_ddl: tuple[str, ...] = ()  # the version-1 schema, statement by statement
    #: a backend's own statements after a version's shared ones (its indexes)
    own_migrations: dict[int, tuple[str, ...]] = {}

    def __init__(self, conn: Any, path: Path | str) -> None:
        self.conn = conn
        self.path = path

    def close(self) -> None:
        self.conn.close()

    def transaction(self) -> AbstractContextManager[Any]:
        """Commits the block, or rolls it back on an exception (each backend's own way)."""
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        if self.placeholder == "?":
            return sql
        return sql.replace("%", "%%").replace("?", self.placeholder)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), params)

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self.conn.cursor().executemany(self._sql(sql), rows)

    #: a metrics row as `_metric_row` makes it, and its INSERT
    METRIC_COLUMNS = ("run_id", "seq", "benchmark", "name", "unit", "better", "params", "median",
                      "ci_low", "ci_high", "samples")
    INSERT_METRIC = (f"INSERT INTO metrics ({', '.join(METRIC_COLUMNS)}) VALUES "
                     f"({','.join('?' * len(METRIC_COLUMNS))})")
    #: a metrics row's figure (benchmark, name, params)
    BY_FIGURE = operator.itemgetter(*map(METRIC_COLUMNS.index, ("benchmark", "name", "params")))

    @staticmethod
    def _metric_row(run_id: str, seq: int, m: Metric) -> tuple[Any, ...]:
        s = m.summary
        return (run_id, seq, m.benchmark, m.name, m.unit, m.better,
                params_text(m.params), s.median, *s.ci95, pack(m.samples))

    def _version(self) -> int | None:
        """The store's version, or None where the database holds no hpcprobe schema."""
        raise NotImplementedError

    def _set_version(self, version: int) -> None:
        raise NotImplementedError

    def _foreign(self) -> bool:
        """Whether the database holds tables of something else (then it is not ours to use)."""
        raise NotImplementedError

    def _lock(self) -> None:
        """Inside the transaction: keep other writers out while the schema changes."""

    def prepare(self, create: bool) -> None:
        """Create the schema in an empty store and bring an older one up to STORE_VERSION, each
        in one transaction (all of it or nothing); refuse a newer store or a foreign database."""
        version = self._version()
        if version == STORE_VERSION:
            return
        if version is None and not create:
            raise OptionError(f"<db> {self.path}: no hpcprobe store there yet; run `hpcprobe run` "
                              "or `hpcprobe import` with this <db> first")
        if version is not None and version > STORE_VERSION:
            raise OptionError(f"<db> {self.path}: store version {version} was written by a newer "
                              f"hpcprobe; this one reads up to version {STORE_VERSION}: upgrade "
                              "hpcprobe")
        try:
            with self.transaction():
                self._lock()
                version = self._version()  # another writer may have got here first
                if version is not None and version < STORE_VERSION:  # once, by this writer
                    print(f"Bringing the result store {self.path} from version {version} to "
                          f"{STORE_VERSION} (once; a large store takes minutes) ...",
                          file=sys.stderr)
                if version is None:
                    if self._foreign():
                        raise OptionError(f"<db> {self.path}: holds tables of something else, "
                                          "not an hpcprobe store; choose another")
                    for statement in self.base_ddl:
                        self._execute(statement)
                    version = 1
                for step in range(version + 1, STORE_VERSION + 1):
                    for statement in (*MIGRATIONS[step], *self.own_migrations.get(step, ())):
                        self._execute(statement)
                self._set_version(STORE_VERSION)
        except self.driver_errors as exc:
            raise OptionError(f"<db> {self.path}: cannot bring the store to version "
                              f"{STORE_VERSION} ({first_line(exc)}); nothing was changed"
                              ) from None

    def save(self, run: Run, checked: bool = False) -> None:
        """Insert the whole run in one transaction: all of it is stored, or none of it."""
        if not checked:
            validate(run.to_dict())
        try:
            with self.transaction():
                if self.has(run.run_id):
                    raise AlreadyStored(f"run {run.run_id} is stored already in {self.path}")
                self.insert(run)
        except self.driver_errors as exc:
            if self.has(run.run_id):  # a concurrent writer stored the same run first
                raise AlreadyStored(f"run {run.run_id} is stored already in {self.path}") \
                    from None
            raise HpcprobeError(f"store {self.path}: storing run {run.run_id} failed "
                                f"({first_line(exc)}); nothing of it was stored, earlier runs "
                                "are intact") from exc

    def save_all(self, runs: Sequence[Run], checked: bool = False) -> list[str]:
        """All the runs in one transaction, each validated first (unless `checked`) and those
        stored already skipped; where the transaction fails (a concurrent writer stored one of
        them), each in its own."""
        if not checked:
            for run in runs:
                validate(run.to_dict())
        skipped: list[str] = []
        try:
            with self.transaction():
                rows: list[tuple[Any, ...]] = []
                for run in runs:
                    if self.has(run.run_id):
                        skipped.append(run.run_id)
                    else:
                        rows += self._insert_run(run)
                # by figure: each figure's rows of all these runs go to one place of the
                # figure index one after the other, not a node's figures to 177 places each
                # (1,000 nodes stored 31 at a time: 5.5-5.8 s here, 5.9-6.8 s run by run)
                rows.sort(key=self.BY_FIGURE)
                self._executemany(self.INSERT_METRIC, rows)
        except self.driver_errors:
            return super().save_all(runs, checked)
        return skipped

    def insert(self, run: Run) -> None:
        """The run's rows, inside the caller's transaction, neither validated nor checked for
        a stored run of its id: `save` does both; a generator of many runs from one validated
        document (benchmarks/history_scale.py) calls this in one transaction."""
        self._executemany(self.INSERT_METRIC, self._insert_run(run))

    def _insert_run(self, run: Run) -> list[tuple[Any, ...]]:
        """The run's row inserted; its metrics' rows, for the caller to insert."""
        self._execute(
            "INSERT INTO runs (run_id, created, host, tag, profile, benchmarks, duration_s, "
            "schema_version, provenance, topology, findings, warnings, errors, kind, interrupted) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run.run_id, run.created, run.host, run.tag, run.profile, json.dumps(run.benchmarks),
             run.duration_s, SCHEMA_VERSION, json.dumps(run.provenance),
             json.dumps(run.topology), json.dumps(run.findings), json.dumps(run.warnings),
             json.dumps(run.errors), run.kind,
             int(run.conditions.interrupted is not None)))
        return [self._metric_row(run.run_id, seq, m) for seq, m in enumerate(run.metrics)]

    def has(self, run_id: str) -> bool:
        return self._execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() \
            is not None

    @staticmethod
    def _where(sel: Selection | None, conds: list[str] | None = None,
               params: list[Any] | None = None) -> tuple[str, list[Any]]:
        """A WHERE clause on runs r for the selection (and further conditions)."""
        sel = sel or Selection()
        conds, params = list(conds or []), list(params or [])
        for column, value, op in (("tag", sel.tag, "="), ("host", sel.host, "="),
                                  ("created", sel.since, ">="), ("created", sel.until, "<")):
            if value is not None:
                conds.append(f"r.{column} {op} ?")
                params.append(value)
        if sel.tag_prefix is not None:
            conds.append("r.tag LIKE ? ESCAPE '!'")
            params.append(_like(sel.tag_prefix) + "%")
        return (" WHERE " + " AND ".join(conds) if conds else ""), params

    def disturbances(self, where: Selection | None = None, kinds: Sequence[str] = ()
                     ) -> dict[str, tuple[list[Any], bool]]:
        conds = [f"({MARKED.replace('findings', 'r.findings')})"]  # its partial index's
        if kinds:  # of those, the runs whose findings' text names one (the caller reads which)
            conds.append("(r.interrupted = 1 OR " + " OR ".join(
                ["r.findings LIKE ? ESCAPE '!'"] * len(kinds)) + ")")
        clause, params = self._where(where, conds, [f'%{_like(json.dumps(k))}%' for k in kinds])
        return {run_id: (jsondoc.loads(findings), bool(interrupted)) for run_id, findings,
                interrupted in self._execute(
                    f"SELECT r.run_id, r.findings, r.interrupted FROM runs r{clause}", params)}

    def runs(self, limit: int | None = None, where: Selection | None = None) -> list[RunInfo]:
        clause, params = self._where(where)
        sql = ("SELECT r.run_id, r.created, r.host, r.tag, r.profile, r.benchmarks, "
               "(SELECT count(*) FROM metrics m WHERE m.run_id = r.run_id), r.duration_s, "
               f"r.interrupted FROM runs r{clause} ORDER BY r.created DESC, r.{self.order} DESC")
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [RunInfo(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], bool(r[8]))
                for r in self._execute(sql, params)]

    def before(self, wanted: Sequence[tuple[str, str, str]], limit: int) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in wanted]
        at_once = self.CHUNK // 4  # four parameters each
        for i in range(0, len(wanted), at_once):
            part = wanted[i:i + at_once]
            # each one's runs by the host's index, numbered newest first; their columns are
            # those ahead of a row's large ones (its findings: SQLite reads no overflow page)
            rows = self._execute(
                f"WITH w(i, host, until, profile) AS (VALUES {','.join(['(?,?,?,?)'] * len(part))}"
                ") SELECT i, run_id FROM (SELECT w.i, r.run_id, ROW_NUMBER() OVER (PARTITION BY "
                f"w.i ORDER BY r.created DESC, r.{self.order} DESC) AS k FROM w JOIN runs r ON "
                "r.host = w.host AND r.created < w.until AND r.profile = w.profile) x WHERE k <= ? "
                "ORDER BY i, k", [v for j, (host, until, profile) in enumerate(part, i)
                                  for v in (j, host, until, profile)] + [limit])
            for j, run_id in rows:
                out[j].append(run_id)
        return out

    def _figure(self, benchmark: str, name: str, where: Selection | None,
                params: dict[str, str] | None, runs: str = "runs r") -> tuple[str, list[Any]]:
        """FROM ... WHERE of one metric's rows m (with its runs r, joined as `runs`) in the
        selected runs, those whose params have these values (matched on the params' canonical
        JSON text). One host's: its runs first, by its index, then their metrics (SQLite
        keeps a CROSS JOIN's order; its planner walked the figure's rows in every run
        otherwise: 1.2 s a figure in a store of 1,000 nodes' seven campaigns)."""
        conds, values = self._param_conds(params)
        clause, params_ = self._where(where, ["m.benchmark = ?", "m.name = ?", *conds],
                                      [benchmark, name, *values])
        if where is not None and where.host is not None:
            return f"FROM runs r CROSS JOIN metrics m{clause} AND m.run_id = r.run_id", params_
        return f"FROM metrics m JOIN {runs} ON r.run_id = m.run_id{clause}", params_

    @staticmethod
    def _param_conds(params: dict[str, str] | None) -> tuple[list[str], list[Any]]:
        """Conditions on m.params (its canonical JSON text) for params of these values."""
        conds: list[str] = []
        values: list[Any] = []
        for key, text in (params or {}).items():
            item = f"{json.dumps(key)}: {json_value(text)}"
            conds.append("(m.params LIKE ? ESCAPE '!' OR m.params LIKE ? ESCAPE '!')")
            values += [f"%{_like(item)},%", f"%{_like(item)}}}"]
        return conds, values

    def metric_across(self, benchmark: str, name: str, where: Selection | None = None,
                      params: dict[str, str] | None = None
                      ) -> list[tuple[dict[str, Any], Metric]]:
        joined, values = self._figure(benchmark, name, where, params)
        rows = self._execute("SELECT r.run_id, r.created, r.host, r.tag, m.unit, m.better, "
                             f"m.params, m.samples {joined} ORDER BY r.created, r.{self.order}, "
                             "m.seq", values)
        return [({"run_id": run_id, "created": created, "host": host, "tag": tag},
                 Metric(benchmark, name, unit, json.loads(ps), unpack(packed), better))
                for run_id, created, host, tag, unit, better, ps, packed in rows]

    def _params_texts(self, benchmark: str, name: str, params: dict[str, str]) -> list[str]:
        """The distinct params texts of a metric that have these values, read from the index
        of its figures (a fleet's runs share a few): matched here, so the figures are then
        sought by their exact text, not each one's matched as LIKE would."""
        items = [f"{json.dumps(key)}: {json_value(text)}" for key, text in params.items()]
        return [ps for ps in self._distinct_params(benchmark, name)
                if all(f"{i}," in ps or ps.endswith(f"{i}}}") for i in items)]

    def _distinct_params(self, benchmark: str, name: str) -> list[str]:
        """The distinct params texts of a metric, one seek each in the index that orders them
        by their digest (DISTINCT reads every row of the metric: 0.5 s a year of a thousand
        nodes)."""
        out: list[str] = []
        sql = ("SELECT params_md5, params FROM metrics WHERE benchmark = ? AND name = ?{} "
               "ORDER BY params_md5 LIMIT 1")
        row = self._execute(sql.format(""), [benchmark, name]).fetchone()
        while row is not None:
            out.append(row[1])
            row = self._execute(sql.format(" AND params_md5 > ?"),
                                [benchmark, name, row[0]]).fetchone()
        return out

    @bulk()
    def figures_across(self, benchmark: str, name: str, where: Selection | None = None,
                       params: dict[str, str] | None = None) -> list[Figure]:
        joined, values = self._figure(benchmark, name, where, params, self.runs_by_id)
        # across runs, the params' digest, not their text: what the index holds; a host's
        # figures are read from their rows, whose digest lies past their samples (SQLite
        # would read every row's overflow pages): their text
        one_host = where is not None and where.host is not None
        rows = self._execute(
            "SELECT m.metric_id, r.run_id, r.created, r.host, r.tag, m.unit, m.better, "
            f"{'m.params' if one_host else 'm.params_md5'}, m.median, m.ci_low, m.ci_high "
            f"{joined} ORDER BY r.created, r.host, r.{self.order}, m.seq", values).fetchall()
        old: dict[int, list[float]] = {}
        if any(r[8] is None for r in rows):  # stored before store version 4: no summary
            old = {mid: unpack(packed) for mid, packed in self._execute(
                f"SELECT m.metric_id, m.samples {joined} AND m.median IS NULL", values)}
        parsed: dict[str, dict[str, Any]] = {}  # a fleet's runs repeat the same params
        out = []
        for mid, run_id, created, host, tag, unit, better, key, median, lo, hi in rows:
            if median is None:
                s = summarize(old[mid])
                median, (lo, hi) = s.median, s.ci95
            if key not in parsed:  # the text of the first row of each digest
                parsed[key] = json.loads(key if one_host else self._execute(
                    "SELECT params FROM metrics WHERE metric_id = ?", [mid]).fetchone()[0])
            out.append(Figure(run_id, created, host, tag, benchmark, name, unit, better,
                              parsed[key], median, lo, hi))
        return out

    @bulk()
    def series_across(self, benchmark: str, name: str, where: Selection | None = None,
                      params: dict[str, str] | None = None) -> list[Columns]:
        """From the series kept beside the figures (brought up to date first), the selection
        applied to them; a host's few runs straight from the figures."""
        if where is not None and where.host is not None:  # a host's runs: few
            return super().series_across(benchmark, name, where, params)
        out = []
        for text in self._params_texts(benchmark, name, params or {}):
            kept = self._kept(benchmark, name, text)
            if kept is None:  # stored before store version 4: no summary
                return super().series_across(benchmark, name, where, params)
            out += [c for c in (series.selected(k, where) for k in kept) if c is not None]
        return out

    #: a figure's rows by the digest of its params text, as its index finds them (each
    #: backend's md5 is the hex MD5 of the text's UTF-8 bytes): a B-tree entry of the text
    #: itself was 336 bytes a figure in SQLite, a third of that with the digest, and
    #: PostgreSQL's refuses entries over 2.7 kB
    FIGURE_MATCH = "m.params_md5 = md5(?)"

    def _kept(self, benchmark: str, name: str, text: str) -> list[Columns] | None:
        """Every host's series of a figure (these params), as kept and brought up to date
        with the figures stored since (rebuilt where the count of its figures says some were
        missed: a writer that committed late); None where some have no summary."""
        figure, params = series.key(benchmark, name, text), json.loads(text)
        n, upto = self._execute(f"SELECT count(*), max(m.metric_id) FROM metrics m WHERE "
                                f"m.benchmark = ? AND m.name = ? AND {self.FIGURE_MATCH}",
                                [benchmark, name, text]).fetchone()
        head = self._execute("SELECT upto, n FROM series_kept WHERE figure = ?",
                             [figure]).fetchone()
        if not n:
            return []
        if head is not None and (head[0], head[1]) == (upto, n):
            return [k.columns for _, k in sorted(self._kept_parts(figure, params).items())]
        since = head[0] if head is not None else 0
        new = self._figures_between(benchmark, name, text, since, upto)
        if since and head[1] + len(new) != n:
            since, new = 0, self._figures_between(benchmark, name, text, 0, upto)
        if any(r[4] is None for r in new):
            return None
        whole, writes, cut = series.update(self._kept_parts(figure, params) if since else {},
                                           series.columns_of(params, new))
        self._keep(figure, (upto, n), writes, cut, rebuild=not since)
        return [c for _, c in sorted(whole.items())]

    def _figures_between(self, benchmark: str, name: str, text: str, since: int, upto: int
                         ) -> list[series.Row]:
        """A figure's rows stored after metric id `since` up to `upto`, by host and time."""
        rows: list[series.Row] = self._execute(
            "SELECT r.host, r.run_id, r.created, r.tag, m.median, m.ci_low, m.ci_high, m.unit, "
            f"m.better FROM metrics m JOIN {self.runs_by_id} ON r.run_id = m.run_id WHERE "
            f"m.benchmark = ? AND m.name = ? AND {self.FIGURE_MATCH} AND m.metric_id > ? AND "
            f"m.metric_id <= ? ORDER BY r.host, r.created, r.{self.order}, m.seq",
            [benchmark, name, text, since, upto]).fetchall()
        return rows

    def _kept_parts(self, figure: str, params: dict[str, Any]) -> dict[str, series.Kept]:
        return series.kept_of(params, self._execute(
            "SELECT host, part, unit, better, runs, created, tags, numbers FROM series_rows "
            "WHERE figure = ? ORDER BY host, part", [figure]))

    def _keep(self, figure: str, head: tuple[int, int], writes: list[tuple[Columns, int]],
              cut: list[tuple[str, int]], rebuild: bool) -> None:
        """Write the parts of the hosts' series that changed and how far the figure is kept
        (its last metric id, its count): now, or at the end of a `keeping` block."""

        def write() -> None:
            if rebuild:
                self._execute("DELETE FROM series_rows WHERE figure = ?", [figure])
            self._executemany("DELETE FROM series_rows WHERE figure = ? AND host = ? AND "
                              "part >= ?", [(figure, h, part) for h, part in cut])
            self._executemany("INSERT INTO series_rows (figure, host, part, unit, better, "
                              "runs, created, tags, numbers) VALUES (?,?,?,?,?,?,?,?,?)",
                              [(figure, c.host, part, *series.pack(c)[1:])
                               for c, part in writes])
            self._execute("DELETE FROM series_kept WHERE figure = ?", [figure])
            self._execute("INSERT INTO series_kept (figure, upto, n) VALUES (?,?,?)",
                          [figure, *head])

        self._kept_now(("series", figure), write)

    #: what a block keeps (`keeping`), written in one transaction at its end: each write by
    #: what it keeps (a figure's series made twice in a block is written once)
    _later: dict[Any, Callable[[], None]] | None = None

    @contextmanager
    def keeping(self) -> Iterator[None]:
        """What the block keeps (series, searches) written in one transaction at its end, if
        the store takes it then: a campaign's report keeps nine figures' series and their
        searches, each a commit of its own before, with two syncs each (a 1,000-node report's
        series read in 1.0 s, and the one commit at its end 0.5, where they took 1.5-2.0 and
        the searches' commit 0.2)."""
        if self._later is not None:
            yield
            return
        self._later = {}
        try:
            yield
            later = list(self._later.values())
        finally:
            self._later = None
        self._write_kept(later)

    def _kept_now(self, what: Any, write: Callable[[], None]) -> None:
        """Keep by `write` now, or at the end of the block `keeping`."""
        if self._later is not None:
            self._later[what] = write
        else:
            self._write_kept([write])

    def _write_kept(self, writes: Sequence[Callable[[], None]]) -> None:
        """The writes in one transaction, where the store takes them now (a read-only store,
        or another writer holding it: kept next time)."""
        if not writes:
            return
        try:
            with self.briefly():
                for write in writes:
                    write()
        except self.driver_errors:
            pass

    def kept(self, kind: str, keys: list[str]) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for i in range(0, len(keys), self.CHUNK):
            part = keys[i:i + self.CHUNK]
            out.update((key, (digest, value)) for key, digest, value in self._execute(
                "SELECT key, digest, value FROM kept_results WHERE kind = ? AND key IN "
                f"({','.join('?' * len(part))})", [kind, *part]))
        return out

    def keep(self, kind: str, items: dict[str, tuple[str, str]]) -> None:
        if not items:
            return

        def write() -> None:
            self._executemany("DELETE FROM kept_results WHERE kind = ? AND key = ?",
                              [(kind, key) for key in items])
            self._executemany("INSERT INTO kept_results (kind, key, digest, value) VALUES "
                              "(?,?,?,?)", [(kind, k, d, v) for k, (d, v) in items.items()])

        self._kept_now(("kept", kind, len(self._later or ())), write)

    def briefly(self) -> AbstractContextManager[Any]:
        """A transaction that gives up soon when another writer holds the store."""
        return self.transaction()

    #: Run ids in one IN (...) list at most (SQLite's limit on parameters is far above)
    CHUNK = 500

    @bulk()
    def headers(self, run_ids: list[str]) -> dict[str, Run]:
        ids = list(dict.fromkeys(run_ids))
        out: dict[str, Run] = {}
        for i in range(0, len(ids), self.CHUNK):
            part = ids[i:i + self.CHUNK]
            for row in self._execute(f"SELECT {self.RUN_COLUMNS} FROM runs r WHERE r.run_id IN "
                                     f"({','.join('?' * len(part))})", part):
                out[row[0]] = self._run(row)
        return out

    def delete(self, run_ids: list[str]) -> int:
        gone = 0
        with self.transaction():
            for run_id in run_ids:  # its metrics go with their run (ON DELETE CASCADE)
                gone += self._execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount
            for i in range(0, len(run_ids), self.CHUNK):  # and what was kept under its id
                part = run_ids[i:i + self.CHUNK]
                self._execute("DELETE FROM kept_results WHERE key IN "
                              f"({','.join('?' * len(part))})", part)
            if gone:  # the kept series are built again as they are read
                self._execute("DELETE FROM series_rows")
                self._execute("DELETE FROM series_kept")
        return gone

    def resolve(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, a tag or a host (the latest run with it),
        or 'latest'."""
        if ref in ("latest", "last"):
            row = self._execute(
                f"SELECT run_id FROM runs ORDER BY created DESC, {self.order} DESC LIMIT 1"
            ).fetchone()
            if row is None:
                raise UserError(f"run {ref!r}: the store {self.path} holds no runs yet")
            return str(row[0])
        ids = [r[0] for r in self._execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? || '%'", (ref,))]
        if len(ids) == 1:
            return str(ids[0])
        if len(ids) > 1:
            raise UserError(f"run {ref!r} is ambiguous ({len(ids)} runs start with it); give "
                            "more characters")
        for column in ("tag", "host"):
            row = self._execute(f"SELECT run_id FROM runs WHERE {column} = ? "
                                f"ORDER BY created DESC, {self.order} DESC LIMIT 1",
                                (ref,)).fetchone()
            if row is not None:
                return str(row[0])
        raise UserError(f"run {ref!r}: no run id, id prefix, tag or host matches in {self.path}; "
                        "see `hpcprobe list`")

    def load(self, ref: str) -> Run:
        return self._assemble(" WHERE r.run_id = ?", [self.resolve(ref)])[0]

    def load_all(self, where: Selection, metrics: bool = True) -> list[Run]:
        clause, params = self._where(where)
        return self._assemble(clause, params, metrics)

    def load_ids(self, run_ids: list[str]) -> dict[str, Run]:
        out: dict[str, Run] = {}
        for i in range(0, len(run_ids), self.CHUNK):  # a snapshot each: stored runs never change
            part = run_ids[i:i + self.CHUNK]
            out.update((r.run_id, r) for r in self._assemble(
                f" WHERE r.run_id IN ({','.join('?' * len(part))})", part))
        return out

    #: A run's row without its metrics, as _run reads it
    RUN_COLUMNS = ("r.run_id, r.created, r.host, r.tag, r.profile, r.benchmarks, r.duration_s, "
                   "r.provenance, r.topology, r.findings, r.warnings, r.errors, r.kind")

    @staticmethod
    def _run(r: Sequence[Any]) -> Run:
        """A run's row, its JSON columns read by orjson where it reads them as json does (a
        1,000-node campaign's 17 kB a run, findings mostly: 0.13 s where json took 0.25)."""
        loads = jsondoc.loads
        return Run(r[0], r[1], r[2], r[4], loads(r[5]), loads(r[7]), loads(r[8]), [],
                   loads(r[9]), loads(r[10]), loads(r[11]), r[3], float(r[6]), r[12])

    @bulk()
    def _assemble(self, clause: str, params: list[Any], metrics: bool = True) -> list[Run]:
        """The runs a WHERE clause on runs r selects, oldest first: two queries on one snapshot
        of the store (one: their headers, without `metrics`)."""
        with self.snapshot():
            return self._assembled(clause, params, metrics)

    def _assembled(self, clause: str, params: list[Any], metrics: bool) -> list[Run]:
        runs = {row[0]: self._run(row) for row in self._execute(
            f"SELECT {self.RUN_COLUMNS} FROM runs r{clause} ORDER BY r.created, r.{self.order}",
            params)}
        if not metrics:
            return list(runs.values())
        parsed: dict[str, dict[str, Any]] = {}  # runs of a fleet repeat the same params (shared)
        # each run's metrics in the order measured, sorted here: the database sorting every
        # row whole (its samples and params) took longer (a 1,000-node campaign's 181,000
        # rows in SQLite: 0.60-0.77 s ordered, 0.48 s unordered and 0.05-0.10 s sorted here)
        measured: dict[str, list[tuple[int, Metric]]] = {run_id: [] for run_id in runs}
        for run_id, seq, bench, name, unit, better, ps, packed in self._execute(
                "SELECT m.run_id, m.seq, m.benchmark, m.name, m.unit, m.better, m.params, "
                f"m.samples FROM metrics m JOIN runs r ON r.run_id = m.run_id{clause}", params):
            if ps not in parsed:
                parsed[ps] = shared(json.loads(ps))
            got = parsed[ps]
            measured[run_id].append((seq, Metric(bench, name, unit, got if type(got) is Params
                                                 else dict(got), unpack(packed), better)))
        for run_id, ordered in measured.items():
            ordered.sort(key=_FIRST)
            runs[run_id].metrics = [m for _, m in ordered]
        return list(runs.values())
