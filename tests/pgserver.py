"""A throwaway PostgreSQL cluster: initdb in a temporary directory, listening on 127.0.0.1 at a
free port (and a socket there), the superuser `hpcprobe` authenticated by password (SCRAM) over
TCP, as a fleet's server would be, and trusted on the socket; stopped by
its data directory (never by process name) and removed at the end. Used by the tests and by
benchmarks/store_scale.py."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries of Debian's layout, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

    def new_database(self) -> str:
        """A fresh empty database on the server; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"{self.base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.base}/{name}"


@contextmanager
def throwaway() -> Iterator[PgServer]:
    binaries = bin_dir()
    if binaries is None:
        raise RuntimeError("PostgreSQL server binaries not installed (apt install postgresql)")
    # its own directory under /tmp: pytest's are private to root, and the server runs as a user
    root = Path(tempfile.mkdtemp(prefix="hpcprobe-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        if user is None:
            raise RuntimeError("running as root with no unprivileged user for PostgreSQL")
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
        subprocess.run([*run_as, str(binaries / "initdb"), "-D", str(data), "-U", "hpcprobe",
                        "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True, timeout=120)
        subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-w", "-t", "60",
                        "-l", str(root / "log"), "-o",
                        f"-h 127.0.0.1 -p {port} -k {sock} -c max_connections=200 "
                        "-c fsync=off", "start"], check=True, capture_output=True, timeout=120)
        yield PgServer(f"postgresql://hpcprobe:{PASSWORD}@127.0.0.1:{port}")
    finally:
        if (data / "postmaster.pid").exists():  # stopped by its data directory
            subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)
