"""The SQLite backend of the result store (the embedded default): runs, metrics and every raw
sample in one file, one transaction per run."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from hpcprobe.common.errors import HpcprobeError, UserError
from hpcprobe.results.model import SCHEMA_VERSION, Metric, Run, validate
from hpcprobe.results.store import RunInfo, Store, backend, default_path

#: Version of the table layout below; PRAGMA user_version holds it.
STORE_VERSION = 1

_DDL = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    host TEXT NOT NULL,
    tag TEXT,
    profile TEXT NOT NULL,
    benchmarks TEXT NOT NULL,
    duration_s REAL NOT NULL,
    schema_version INTEGER NOT NULL,
    provenance TEXT NOT NULL,
    topology TEXT NOT NULL,
    findings TEXT NOT NULL,
    warnings TEXT NOT NULL,
    errors TEXT NOT NULL
);
CREATE TABLE metrics (
    metric_id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    benchmark TEXT NOT NULL,
    name TEXT NOT NULL,
    unit TEXT NOT NULL,
    better TEXT NOT NULL,
    params TEXT NOT NULL
);
CREATE TABLE samples (
    metric_id INTEGER NOT NULL REFERENCES metrics(metric_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (metric_id, seq)
);
CREATE INDEX metrics_run ON metrics(run_id);
CREATE INDEX runs_host ON runs(host);
CREATE INDEX runs_tag ON runs(tag);
"""


@backend
class SqliteStore(Store):
    """An open SQLite store; open it with `Store.open(path)`."""

    scheme = "sqlite"

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def connect(cls, location: str | os.PathLike[str] | None, create: bool) -> Store:
        p = Path(location) if location is not None else default_path()
        if not create and not p.exists():
            raise UserError(f"--db {p}: no result store there yet; run `hpcprobe run` first or "
                            "point --db at an existing store")
        try:
            if create:
                p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(p, timeout=30)
            conn.execute("PRAGMA foreign_keys = ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if tables:
                    raise UserError(f"--db {p}: an SQLite file, but not an hpcprobe store; "
                                    "choose another path")
                with conn:
                    conn.executescript(_DDL)
                    conn.execute(f"PRAGMA user_version = {STORE_VERSION}")
            elif version != STORE_VERSION:
                raise UserError(f"--db {p}: store version {version}, this hpcprobe reads "
                                f"version {STORE_VERSION}; upgrade hpcprobe or use another --db")
        except sqlite3.DatabaseError as exc:
            raise UserError(f"--db {p}: cannot open it as a result store ({exc}); choose a "
                            "writable path") from exc
        except OSError as exc:
            raise UserError(f"--db {p}: cannot create it ({exc.strerror}); choose a writable "
                            "path") from exc
        return cls(conn, p)

    def close(self) -> None:
        self.conn.close()

    def check_writable(self) -> None:
        """Fail now, not after the measurements, when the store cannot take a run."""
        try:
            with self.conn:
                self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS _probe(x)")
                self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise UserError(f"--db {self.path}: not writable ({exc}); choose a writable path") \
                from exc

    def save(self, run: Run) -> None:
        """Insert the whole run in one transaction: all of it is stored, or none of it."""
        doc = run.to_dict()
        validate(doc)
        try:
            with self.conn:
                self.conn.execute(
                    "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run.run_id, run.created, run.host, run.tag, run.profile,
                     json.dumps(run.benchmarks), run.duration_s, SCHEMA_VERSION,
                     json.dumps(run.provenance), json.dumps(run.topology),
                     json.dumps(run.findings), json.dumps(run.warnings), json.dumps(run.errors)))
                for seq, m in enumerate(run.metrics):
                    cur = self.conn.execute(
                        "INSERT INTO metrics (run_id, seq, benchmark, name, unit, better, params)"
                        " VALUES (?,?,?,?,?,?,?)",
                        (run.run_id, seq, m.benchmark, m.name, m.unit, m.better,
                         json.dumps(m.params, sort_keys=True)))
                    self.conn.executemany(
                        "INSERT INTO samples VALUES (?,?,?)",
                        [(cur.lastrowid, i, v) for i, v in enumerate(m.samples)])
        except sqlite3.Error as exc:
            raise HpcprobeError(f"--db {self.path}: storing run {run.run_id} failed ({exc}); "
                                "nothing of it was stored, earlier runs are intact") from exc

    def runs(self, limit: int | None = None) -> list[RunInfo]:
        sql = ("SELECT r.run_id, r.created, r.host, r.tag, r.profile, r.benchmarks, "
               "(SELECT count(*) FROM metrics m WHERE m.run_id = r.run_id), r.duration_s "
               "FROM runs r ORDER BY r.created DESC, r.rowid DESC")
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [RunInfo(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7])
                for r in self.conn.execute(sql)]

    def resolve(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, a tag or a host (the latest run with it),
        or 'latest'."""
        if ref in ("latest", "last"):
            row = self.conn.execute(
                "SELECT run_id FROM runs ORDER BY created DESC, rowid DESC LIMIT 1").fetchone()
            if row is None:
                raise UserError(f"run {ref!r}: the store {self.path} holds no runs yet")
            return str(row[0])
        ids = [r[0] for r in self.conn.execute(
            "SELECT run_id FROM runs WHERE run_id LIKE ? || '%'", (ref,))]
        if len(ids) == 1:
            return str(ids[0])
        if len(ids) > 1:
            raise UserError(f"run {ref!r} is ambiguous ({len(ids)} runs start with it); give "
                            "more characters")
        for column in ("tag", "host"):
            row = self.conn.execute(f"SELECT run_id FROM runs WHERE {column} = ? "
                                    "ORDER BY created DESC, rowid DESC LIMIT 1", (ref,)).fetchone()
            if row is not None:
                return str(row[0])
        raise UserError(f"run {ref!r}: no run id, id prefix, tag or host matches in {self.path}; "
                        "see `hpcprobe list`")

    def load(self, ref: str) -> Run:
        run_id = self.resolve(ref)
        r = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        metrics = []
        rows = self.conn.execute(
            "SELECT metric_id, benchmark, name, unit, better, params FROM metrics "
            "WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        for mid, bench, name, unit, better, params in rows:
            samples = [v for (v,) in self.conn.execute(
                "SELECT value FROM samples WHERE metric_id = ? ORDER BY seq", (mid,))]
            metrics.append(Metric(bench, name, unit, json.loads(params), samples, better))
        doc: dict[str, Any] = {
            "run_id": r[0], "created": r[1], "host": r[2], "tag": r[3], "profile": r[4],
            "benchmarks": json.loads(r[5]), "duration_s": r[6], "provenance": json.loads(r[8]),
            "topology": json.loads(r[9]), "findings": json.loads(r[10]),
            "warnings": json.loads(r[11]), "errors": json.loads(r[12]), "metrics": []}
        run = Run.from_dict(doc)
        run.metrics = metrics
        return run
