"""A throwaway PostgreSQL cluster: initdb in a temporary directory, listening on 127.0.0.1 at a
free port (and a socket there), the superuser `hpcprobe` authenticated by password (SCRAM) over
TCP, as a fleet's server would be, and trusted on the socket; stopped by its data directory
(never by process name) and removed at the end, also when what ran against it failed. The
pgbench family's database, the tests' store server and benchmarks/store_scale.py's."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.errors import MeasurementError, UserError
from hpcprobe.tools import free_port


def bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries of Debian's layout, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


#: the superuser's password of a throwaway server (tests check it is never printed)
PASSWORD = "pw-not-shown"


@dataclass
class PgServer:
    base: str  # postgresql://hpcprobe:PASSWORD@127.0.0.1:PORT
    port: int
    socket_dir: Path  # the superuser is trusted here (clients as `-h socket_dir -p port`)
    version: str  # the server's, "15.14"

    def new_database(self) -> str:
        """A fresh empty database on the server; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"{self.base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.base}/{name}"


def _tail(text: str | bytes, lines: int = 3) -> str:
    got = text.decode(errors="replace") if isinstance(text, bytes) else text
    return " | ".join(got.strip().splitlines()[-lines:])


@contextmanager
def throwaway(settings: str = "-c max_connections=200 -c fsync=off") -> Iterator[PgServer]:
    """A server with the postgres options `settings` (fsync off by default: a throwaway's
    figures measure the engine and memory, not the disk's flushes)."""
    binaries = bin_dir()
    if binaries is None:
        raise UserError("PostgreSQL's server binaries are not installed (Debian package "
                        "postgresql)")
    # its own directory under /tmp: pytest's are private to root, and the server runs as a user
    root = Path(tempfile.mkdtemp(prefix="hpcprobe-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        if user is None:
            raise UserError("running as root with no unprivileged user (postgres, nobody) to "
                            "run PostgreSQL as")
        entry = pwd.getpwnam(user)
        for p in (root, sock):
            os.chown(p, entry.pw_uid, entry.pw_gid)
        run_as = ["runuser", "-u", user, "--"]
    port = free_port()
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if run_as:
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    try:
        for what, argv in (
                ("initdb", [*run_as, str(binaries / "initdb"), "-D", str(data), "-U", "hpcprobe",
                            "--auth-local=trust", "--auth-host=scram-sha-256",
                            f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync"]),
                ("pg_ctl start", [*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-w", "-t",
                                  "60", "-l", str(root / "log"), "-o",
                                  f"-h 127.0.0.1 -p {port} -k {sock} {settings}", "start"])):
            try:
                subprocess.run(argv, check=True, capture_output=True, timeout=120)
            except subprocess.CalledProcessError as exc:
                log = (root / "log").read_text(errors="replace") if (root / "log").exists() \
                    else ""
                raise MeasurementError(f"throwaway PostgreSQL: {what} failed: "
                                       f"{_tail(exc.stderr or exc.stdout)} {_tail(log)}".strip()
                                       ) from None
            except subprocess.TimeoutExpired:
                raise MeasurementError(f"throwaway PostgreSQL: {what} took over 120 s") from None
        said = subprocess.run([str(binaries / "postgres"), "--version"], capture_output=True,
                              text=True, timeout=30).stdout
        version = said.split(")", 1)[-1].split()[0] if ")" in said else said.strip()
        yield PgServer(f"postgresql://hpcprobe:{PASSWORD}@127.0.0.1:{port}", port, sock, version)
    finally:
        if (data / "postmaster.pid").exists():  # stopped by its data directory
            subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
