"""The PostgreSQL backend of the result store, for a fleet: every node writes its runs to one
database at once (psycopg 3). `--db postgresql://USER@HOST:PORT/DB`; the password comes from the
URL, PGPASSWORD, PGPASSFILE or ~/.pgpass as libpq reads them, and is never printed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.common.secrets import redact
from hpcprobe.results.sql import SqlStore, first_line, schema_v1
from hpcprobe.results.store import BACKENDS, Store, backend

#: Seconds to wait for the server before saying it is unreachable.
CONNECT_TIMEOUT_S = 10
#: Serialises the creation of the schema when many writers meet an empty database at once.
SCHEMA_LOCK = 0x68706370  # "hpcp"


def _reason(exc: Exception) -> str:
    """The first line of a driver error, without a password it might echo."""
    return redact(first_line(exc))


@backend
class PostgresStore(SqlStore):
    """An open PostgreSQL store; open it with `Store.open("postgresql://...")`."""

    scheme = "postgresql"
    placeholder = "%s"
    order = "inserted"
    runs_by_id = "runs r"  # PostgreSQL's planner picks the index itself
    # v6: a figure's rows by the digest of its params text (a B-tree entry holds 2.7 kB at
    # most), a column of its own: an index on the expression md5(params) is never read alone
    # (the planner wants params itself from the table), and counting a year of a fleet's
    # figures read the table a row each: 1 s a figure
    own_migrations = {6: ("ALTER TABLE metrics ADD COLUMN params_md5 TEXT GENERATED ALWAYS AS "
                          "(md5(params)) STORED",
                          "CREATE INDEX IF NOT EXISTS metrics_figure_md5 ON metrics(benchmark, "
                          "name, params_md5, metric_id)"),
                      # v7: the samples packed in their metric's row, as sql.pack packs them
                      7: ("ALTER TABLE metrics ADD COLUMN samples BYTEA",
                          "UPDATE metrics m SET samples = (SELECT string_agg(float8send(s.value), "
                          "''::bytea ORDER BY s.seq) FROM samples s WHERE s.metric_id = "
                          "m.metric_id)",
                          "DROP TABLE samples")}
    # the version-1 tables in PostgreSQL's types, runs numbered as inserted (ordering runs of
    # the same second); the hpcprobe_meta table holds the version
    base_ddl = (*schema_v1(serial="BIGSERIAL", real="DOUBLE PRECISION", bigint="BIGINT",
                           runs_extra=",\n    inserted BIGSERIAL NOT NULL"),
                "CREATE TABLE hpcprobe_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    @classmethod
    def connect(cls, location: str, create: bool) -> Store:
        import psycopg

        url = location
        shown = redact(url)
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise OptionError(f"<db> {shown}: cannot connect ({_reason(exc)}); check the host, "
                              "port, database and credentials") from None
        store = cls(conn, shown)
        store.driver_errors = (psycopg.Error,)
        try:
            store.prepare(create)
        except psycopg.Error as exc:
            conn.close()
            raise OptionError(f"<db> {shown}: cannot use it as a result store "
                              f"({_reason(exc)})") from None
        except UserError:
            conn.close()
            raise
        return store

    def _has_table(self, name: str) -> bool:
        # pg_tables read with the statement's own snapshot: to_regclass looks the name up in
        # the backend's catalog cache, which may not yet have taken in a table another writer
        # committed while this one waited for the schema lock (it then saw `runs` but not
        # `hpcprobe_meta`, and refused the store as someone else's)
        return bool(self._execute("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname "
                                  "= current_schema() AND tablename = ?", (name,)
                                  ).fetchone()[0])

    def _version(self) -> int | None:
        if not self._has_table("hpcprobe_meta"):
            return None
        row = self._execute("SELECT value FROM hpcprobe_meta WHERE key = 'store_version'"
                            ).fetchone()
        return int(row[0]) if row else None

    def _set_version(self, version: int) -> None:
        self._execute("INSERT INTO hpcprobe_meta VALUES ('store_version', ?) ON CONFLICT (key) "
                      "DO UPDATE SET value = excluded.value", (str(version),))

    def _foreign(self) -> bool:
        return self._has_table("runs")

    def _lock(self) -> None:
        self._execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    def transaction(self) -> AbstractContextManager[Any]:
        return self.conn.transaction()  # type: ignore[no-any-return]

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A REPEATABLE READ transaction: every statement in it sees the snapshot of its first
        (READ COMMITTED, the default, takes a new one per statement); inside a transaction,
        that one."""
        import psycopg

        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            yield
            return
        with self.transaction():
            self._execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    @contextmanager
    def briefly(self) -> Iterator[None]:
        """A transaction that waits 0.2 s for another writer's lock."""
        with self.transaction():
            self._execute("SET LOCAL lock_timeout = '200ms'")
            yield

    def check_writable(self) -> None:
        row = self._execute("SELECT has_table_privilege('runs', 'INSERT') AND "
                            "has_table_privilege('metrics', 'INSERT')").fetchone()
        if not row[0]:
            raise OptionError(f"<db> {self.path}: this user may not insert runs; grant INSERT on "
                              "runs and metrics or use another <db>")


BACKENDS["postgres"] = PostgresStore  # libpq takes both schemes
