"""The pgbench family's options, plan, measurement and the parser of pgbench's summary."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hpcprobe import tools
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, option
from hpcprobe.probes import program
from hpcprobe.results.model import Metric
from hpcprobe.tools import VERSIONS, command, pgserver

TOOL = tools.get("pgbench")


@dataclass(frozen=True)
class Settings:
    scale: int  # pgbench's scale factor (100,000 accounts each)
    time_s: int  # seconds a repetition runs


SETTINGS = {"quick": Settings(1, 5), "default": Settings(5, 10), "thorough": Settings(20, 30)}
MODES = {"tpcb-like": [], "simple-update": ["-N"], "select-only": ["-S"]}
#: What `pgbench -i` writes a scale unit, tables and indexes: 15.7 MB (measured with PostgreSQL
#: 15: pg_database_size 23.5 MB at scale 1, 70.5 MB at 4, 164.7 MB at 10); WAL comes on top.
BYTES_PER_SCALE = 15_700_000


def pg_url(text: str) -> str:
    """A PostgreSQL connection URL (postgresql://...) or libpq key=value string."""
    if not (text.startswith(("postgresql://", "postgres://")) or "=" in text):
        raise argparse.ArgumentTypeError(f"{text!r}: give a PostgreSQL URL such as "
                                         "postgresql://user@host/db, or host=... dbname=...")
    return text


@dataclass(frozen=True)
class PgbenchOptions:
    scale: int | None = option(Flag(
        "--pg-scale", "pgbench's scale factor, 100,000 accounts each (default: quick 1, "
        "default 5, thorough 20)", parse=options.at_least(1, "a scale factor"), metavar="N"))
    clients: int | None = option(Flag(
        "--pg-clients", "concurrent clients (default: one per core)",
        parse=options.at_least(1, "a client count"), metavar="N"))
    pg_time_s: int | None = option(Flag(
        "--pg-time", "seconds each repetition runs (default: quick 5, default 10, thorough 30)",
        parse=options.at_least(1, "a number of seconds"), metavar="S"))
    mode: str = option(Flag("--pg-mode", "the built-in script (default tpcb-like)",
                            choices=tuple(MODES)), "tpcb-like")
    url: str | None = option(Flag(
        "--pg-url", "run against this database (it is initialised: pgbench's tables are "
        "replaced) instead of a throwaway server", parse=pg_url, metavar="URL"))
    repeat: int | None = option(options.REPEAT)
    timeout_s: float | None = option(options.TIMEOUT, note=options.ONE_REPETITION)


def _clients(ctx: RunContext, o: PgbenchOptions) -> int:
    return o.clients or ctx.topo.counts()["cores"]


def plan(ctx: RunContext, o: PgbenchOptions) -> list[str]:
    TOOL.require("pgbench")
    if o.url is None and pgserver.bin_dir() is None:
        raise OptionError("pgbench needs PostgreSQL's server binaries for its throwaway server "
                          "(Debian package postgresql), or <pg_url>")
    n = program.repetitions(ctx, o.repeat)
    scale = o.scale or SETTINGS[ctx.profile.name].scale
    if o.url is None:  # the throwaway server's directory: refused before anything is written
        where = tempfile.gettempdir()
        need, free = scale * BYTES_PER_SCALE, shutil.disk_usage(where).free
        if need > free:
            raise OptionError(f"<pg_scale> {scale}: pgbench's tables need about "
                              f"{format_bytes(need)}, more than the {format_bytes(free)} free in "
                              f"{where} (the throwaway server's directory)")
    return [f"pgbench {o.mode}, scale {scale}, "
            f"{_clients(ctx, o)} client(s), "
            f"{o.pg_time_s or SETTINGS[ctx.profile.name].time_s} s, "
            f"{n} time(s), against {'the database given' if o.url else 'a throwaway server'}"]


def parse(text: str) -> tuple[float, float]:
    """(TPS without the connection time, average latency in ms) of pgbench's summary."""
    tps = re.search(r"^tps = ([0-9.]+) \((?:without|excluding)", text, re.M) \
        or re.search(r"^tps = ([0-9.]+)", text, re.M)
    lat = re.search(r"^latency average = ([0-9.]+) ms", text, re.M)
    if tps is None or lat is None:
        raise MeasurementError("pgbench's summary has no tps or latency line")
    return float(tps.group(1)), float(lat.group(1))


@contextmanager
def database(o: PgbenchOptions) -> Iterator[tuple[list[str], str | None]]:
    """pgbench's connection arguments, and the server's version (None: the user's server)."""
    if o.url:
        yield [o.url], None
        return
    with pgserver.throwaway() as srv:
        yield ["-h", str(srv.socket_dir), "-p", str(srv.port), "-U", "hpcprobe",
               "postgres"], srv.version


def run(ctx: RunContext, o: PgbenchOptions) -> None:
    plan(ctx, o)
    exe = TOOL.require("pgbench")
    timeout = o.timeout_s or program.DEFAULT_TIMEOUT_S
    clients = _clients(ctx, o)
    threads = min(clients, len(os.sched_getaffinity(0)))
    scale = o.scale or SETTINGS[ctx.profile.name].scale
    seconds = o.pg_time_s or SETTINGS[ctx.profile.name].time_s
    with database(o) as (conn, version):
        VERSIONS.add(ctx.provenance, "pgbench", TOOL.version())
        if version:
            VERSIONS.add(ctx.provenance, "postgresql", version)
        ctx.progress.start("pgbench: initialising", 1)
        init = command.run([exe, "-i", "-q", "-s", str(scale), *conn], timeout=timeout)
        if not init.ok:
            raise MeasurementError(f"pgbench -i: {init.failure()}")
        ctx.progress.advance("pgbench: initialised")

        def once(i: int) -> tuple[float, float]:
            ran = command.run([exe, "-n", "-c", str(clients), "-j", str(threads), "-T",
                               str(seconds), *MODES[o.mode], *conn], timeout=timeout)
            if not ran.ok:
                raise MeasurementError(f"pgbench: {ran.failure()}")
            return parse(ran.output)

        reps = program.repeat(ctx, "pgbench", program.repetitions(ctx, o.repeat), once)
    params = {"mode": o.mode, "scale": scale, "clients": clients}
    ctx.metrics.append(Metric("pgbench", "tps", "tx/s", params, [r[0] for r in reps]))
    ctx.metrics.append(Metric("pgbench", "latency", "ms", {**params, "stat": "average"},
                              [r[1] for r in reps], "lower"))
