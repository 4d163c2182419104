"""The SQLite backend of the result store (the embedded default): runs, metrics and every raw
sample in one file, one transaction per run."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpcprobe.common import jsondoc
from hpcprobe.common.errors import OptionError
from hpcprobe.results.model import Metric
from hpcprobe.results.sql import MARKED, SqlStore, pack, schema_v1
from hpcprobe.results.store import Selection, Store, backend

#: How long a writer waits for another's lock
BUSY_MS = 30_000
#: The most of the store's pages a connection keeps in memory (KiB)
CACHE_KIB = 65_536
#: Beside the store, what its file was when last known intact (SqliteStore.intact)
MARK = "-intact"


def md5(text: str) -> str:
    """The hex MD5 of a text's UTF-8 bytes, as PostgreSQL's md5() gives it: a figure's key."""
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class PackSamples:
    """SQL's pack_samples(seq, value): a metric's sample rows (store versions 1-6) packed in
    their order as `sql.pack` packs them, whatever order SQLite hands them in."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, float]] = []

    def step(self, seq: int, value: float) -> None:
        self.rows.append((seq, value))

    def finalize(self) -> bytes:
        return pack([value for _, value in sorted(self.rows)])


@backend
class SqliteStore(SqlStore):
    """An open SQLite store; open it with `Store.open(path)`."""

    scheme = "sqlite"
    driver_errors = (sqlite3.Error,)
    # the version-1 tables in SQLite's types; PRAGMA user_version holds the version
    base_ddl = schema_v1(serial="INTEGER", real="REAL", bigint="INTEGER")
    # v4: a figure across a fleet's runs read from this index alone (SQLite reads a row of the
    # table per figure otherwise, a page each: 10 us a figure). PostgreSQL's B-tree refuses
    # entries over 2.7 kB, which a long params text could make: it reads its heap.
    own_migrations = {4: ("CREATE INDEX IF NOT EXISTS metrics_figure ON metrics(benchmark, name, "
                          "params, run_id, seq, unit, better, median, ci_low, ci_high)",),
                      # v7: the samples packed in their metric's row; and that index keyed
                      # by the params' digest (written by hpcprobe, as SQLite has no md5;
                      # older rows' by the one `connect` gives SQL), then the metric id: a
                      # third of its size (336 -> 136 bytes a figure), and a node's figures
                      # appended at the end of each figure's entries, not at random places
                      # (1,000 nodes' metric rows inserted in 3.8 s with it, 7.1 s with the
                      # old one, 1.2 s with neither: one run each)
                      7: ("ALTER TABLE metrics ADD COLUMN samples BLOB",
                          "UPDATE metrics SET samples = (SELECT pack_samples(s.seq, s.value) "
                          "FROM samples s WHERE s.metric_id = metrics.metric_id)",
                          "DROP TABLE samples",
                          "ALTER TABLE metrics ADD COLUMN params_md5 TEXT",
                          "UPDATE metrics SET params_md5 = md5(params)",
                          "DROP INDEX IF EXISTS metrics_figure",
                          "CREATE INDEX IF NOT EXISTS metrics_figure_md5 ON metrics(benchmark, "
                          "name, params_md5, metric_id, run_id, seq, unit, better, median, "
                          "ci_low, ci_high)")}
    # the digest written beside each row's params text
    INSERT_METRIC = (f"INSERT INTO metrics ({', '.join(SqlStore.METRIC_COLUMNS)}, params_md5) "
                     f"VALUES ({','.join('?' * (len(SqlStore.METRIC_COLUMNS) + 1))})")

    fresh = False  # this open created the file
    closed = False
    _check: Any = None  # the thread checking the file (intact), until it has answered
    _said: list[str] | None = None  # what the check said (["ok"]: intact); None: unchecked
    _seen: int | None = None  # PRAGMA data_version where the file was known intact

    @classmethod
    def connect(cls, location: str, create: bool) -> Store:
        p = Path(location)
        fresh = not p.exists()
        if not create and fresh:
            raise OptionError(f"<db> {p}: no result store there yet; run `hpcprobe run` first or "
                              "point <db> at an existing store")
        try:
            if create:
                p.parent.mkdir(parents=True, exist_ok=True)
            if create and fresh:  # its runs hold their environment: owner and group only
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o640))
            conn = sqlite3.connect(p, timeout=BUSY_MS / 1000)
            conn.create_function("md5", 1, md5, deterministic=True)
            conn.create_aggregate("pack_samples", 2, PackSamples)  # type: ignore[arg-type]
            try:
                conn.execute("PRAGMA foreign_keys = ON")
                # pages kept in memory, up to 64 MiB (SQLite's default is 2 MiB, taken as
                # used): a node's figures go to as many places in the figure index, which
                # stay there from node to node (1,000 nodes' metric rows inserted in 3.2-3.6 s
                # here, 4.3-4.8 s with the default)
                conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
                store = cls(conn, p)
                store.fresh = fresh
                store.prepare(create)
                store.intact(fresh)
            except BaseException:
                conn.close()
                if fresh and p.is_file() and p.stat().st_size == 0:
                    p.unlink()  # the empty file that failed to become a store (a full disk)
                raise
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
                raise OptionError(_damaged(p, str(exc))) from None  # its schema's page
            raise OptionError(f"<db> {p}: cannot open it as a result store ({exc}); choose a "
                              "writable path") from exc
        except OSError as exc:
            raise OptionError(f"<db> {p}: cannot create it ({exc.strerror}); choose a writable "
                              "path") from exc
        return store

    def close(self) -> None:
        """Close it; a file this open created and that holds no run is removed (a command
        refused after opening it leaves no empty store behind); a damaged one is refused
        (`checked`: also where what was read from it failed first)."""
        if self.closed:
            return
        try:
            empty = self.fresh and not self.runs(limit=1)
        except sqlite3.Error:
            empty = False
        if self._answer() == ["ok"] and not empty:
            self._mark_intact()
        super().close()
        self.closed = True
        if empty and isinstance(self.path, Path):
            for suffix in ("", "-wal", "-shm", "-journal", MARK):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self.checked()

    def __exit__(self, *exc: object) -> None:
        """Closed; a read that found the file damaged (SQLite's SQLITE_CORRUPT or NOTADB, a
        file known intact included: a disk's damage does not change its state) makes `close`
        refuse it in the check's line."""
        error = exc[1] if len(exc) > 1 else None
        if _corrupt(error):
            if self._answer() == ["ok"]:
                Path(f"{self.path}{MARK}").unlink(missing_ok=True)
                self._quick_check()
                if self._said == ["ok"]:  # damage quick_check does not see: SQLite's words
                    self._said = [str(error)]
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE: the write lock first (a concurrent writer waits up to 30 s), once
        the store is known intact."""
        self.checked()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def intact(self, fresh: bool = False) -> None:
        """Know the file intact before anything is written to it: this open created it; or it
        is as it was when last known intact (its device, inode, size, modification and change
        times as its mark beside it, `{path}-intact`, says: a copy cut short, a file written
        over or by another program changes them); else it is checked whole (SQLite's
        `quick_check`: every page read once, about 1.5 ms a MB here, a gigabyte store's
        report 1.4 s before its first read, and a year of a fleet's nightly runs a minute) on
        a connection of its own in a thread, while the command reads. What writes waits for
        the answer (`checked`), as does `close`: a damaged store is refused in one line
        before anything is measured or kept (check_writable waits), and a reader that met the
        damage first says that line, not SQLite's error (`__exit__`)."""
        import threading

        with self.snapshot():  # a shared lock: no other writer commits while it is seen
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            self._seen = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
            if fresh or self._marked() == self._state():
                self._said = ["ok"]
                return
        self._check = threading.Thread(target=self._quick_check, name="quick_check",
                                       daemon=True)
        self._check.start()

    def _state(self) -> list[int]:
        st = os.stat(self.path)
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    def _marked(self) -> list[int] | None:
        """The file's state when it was last known intact, where its mark says it."""
        try:
            got = json.loads(Path(f"{self.path}{MARK}").read_text())
        except (OSError, ValueError):
            return None
        return got if isinstance(got, list) else None

    def _mark_intact(self) -> None:
        """Mark the file's state as intact where no other connection has written to it since
        it was known so (what this one wrote, SQLite wrote whole): the next open need not read
        it whole. Where the mark cannot be written, the next open checks."""
        try:
            with self.snapshot():
                self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                if self.conn.execute("PRAGMA data_version").fetchone()[0] != self._seen:
                    return
                state = self._state()
            mark = Path(f"{self.path}{MARK}")
            tmp = mark.with_name(f".{mark.name}.{os.getpid()}")
            tmp.write_text(json.dumps(state))
            tmp.replace(mark)
        except (sqlite3.Error, OSError):
            pass

    def _quick_check(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000)
            try:
                self._said = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            self._said = [str(exc)]

    def _answer(self) -> list[str] | None:
        """What the check said, once it has (None: the file was not checked)."""
        if self._check is not None:
            self._check.join()
            self._check = None
        return self._said

    def checked(self) -> None:
        """Refuse a damaged store (the check `intact` began answered so)."""
        said = self._answer()
        if said is not None and said != ["ok"]:
            raise OptionError(_damaged(self.path, next(
                (ln for text in said for ln in text.splitlines()
                 if ln.strip() and not ln.startswith("***")), "damaged")))

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A deferred transaction: its first read takes a shared lock (a WAL store: a read
        mark), which holds one state of the file until it ends; inside a write transaction,
        that one."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.rollback()  # it wrote nothing

    @contextmanager
    def briefly(self) -> Iterator[None]:
        """A transaction that waits 0.2 s, not 30, for another writer's lock."""
        self.conn.execute("PRAGMA busy_timeout = 200")
        try:
            with self.transaction():
                yield
        finally:
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")

    def _version(self) -> int | None:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0]) or None

    def _set_version(self, version: int) -> None:
        self.conn.execute(f"PRAGMA user_version = {int(version)}")

    def _foreign(self) -> bool:
        return bool(self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0])


    def check_writable(self) -> None:
        """Fail now, not after the measurements, when the store cannot take a run."""
        self.checked()
        try:
            with self.conn:
                self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS _probe(x)")
                self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise OptionError(f"<db> {self.path}: not writable ({exc}); choose a writable path") \
                from exc

    def disturbances(self, where: Selection | None = None, kinds: Sequence[str] = ()
                     ) -> dict[str, tuple[list[Any], bool]]:
        """As SQL selects them, the findings' texts searched here for the kinds: SQLite's LIKE
        matches them character by character (a fleet's 7,000 runs in a report's window:
        0.4-0.8 s; read and searched here, 0.2 s)."""
        if not kinds:
            return super().disturbances(where)
        clause, params = self._where(where, [f"({MARKED.replace('findings', 'r.findings')})"])
        names = [json.dumps(k) for k in kinds]
        return {run_id: (jsondoc.loads(findings), bool(interrupted)) for run_id, findings,
                interrupted in self._execute(
                    f"SELECT r.run_id, r.findings, r.interrupted FROM runs r{clause}", params)
                if interrupted or any(name in findings for name in names)}

    @staticmethod
    def _metric_row(run_id: str, seq: int, m: Metric) -> tuple[Any, ...]:
        row = SqlStore._metric_row(run_id, seq, m)
        return (*row, _params_md5(row[_PARAMS]))


def _damaged(path: Path | str, first: str) -> str:
    """The line that refuses a damaged store: what SQLite said first, and how to recover."""
    return (f"<db> {path}: the store is damaged ({first}); move it away (a new one is then "
            f"made) and recover its runs with `sqlite3 {path} .recover | sqlite3 "
            "recovered.sqlite`")


def _corrupt(error: object) -> bool:
    """Whether SQLite said the file is damaged, or not a database (not busy, not locked)."""
    return getattr(error, "sqlite_errorcode", None) in (sqlite3.SQLITE_CORRUPT,
                                                        sqlite3.SQLITE_NOTADB)


#: where a metrics row holds its params text, the digest's source
_PARAMS = SqlStore.METRIC_COLUMNS.index("params")
#: a stored params text's digest, made once per distinct text (a fleet repeats the same few
#: hundred)
_params_md5 = functools.lru_cache(maxsize=65_536)(md5)
