"""Shared fixtures: recorded hwloc topologies and a runner for the installed CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hpcprobe.machine import topology

DATA = Path(__file__).parent / "data"

#: Recorded and synthetic machines: file, and (packages, NUMA, L3 domains, cores, PUs).
MACHINES = {
    "epyc-2s-nps4-128c.xml": (2, 8, 32, 128, 128),
    "xeon-2s-26c-smt.xml": (2, 2, 2, 52, 104),
    "laptop-8c.xml": (1, 1, 1, 8, 8),
    "vm-live-2c.xml": (1, 1, 1, 2, 2),
}


@pytest.fixture(params=sorted(MACHINES))
def machine(request: pytest.FixtureRequest) -> tuple[topology.Topology, tuple[int, ...]]:
    return topology.load_xml(DATA / request.param), MACHINES[request.param]


@pytest.fixture
def nps4() -> topology.Topology:
    return topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")


@pytest.fixture
def xeon_smt() -> topology.Topology:
    return topology.load_xml(DATA / "xeon-2s-26c-smt.xml")


@pytest.fixture
def tiny() -> topology.Topology:
    """A two-core machine with small caches whose PUs are this machine's CPUs 0 and 1."""
    return topology.load_xml(DATA / "tiny-2c.xml")


@dataclass
class Result:
    code: int
    out: str
    err: str


def hpcprobe(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Result:
    """Run the installed CLI as a user would."""
    exe = shutil.which("hpcprobe", path=str(Path(sys.executable).parent)) or "hpcprobe"
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    return Result(p.returncode, p.stdout, p.stderr)


def run_json(tmp_path: Path, *args: str) -> tuple[Result, dict]:
    """`hpcprobe run ARGS --json FILE`: the result and its document, validated."""
    from hpcprobe.results import model as results

    out = tmp_path / "run.json"
    r = hpcprobe("run", *args, "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    return r, doc


def assert_user_error(r: Result, *needles: str) -> None:
    """Exit code 2, one line on stderr naming the problem, no traceback."""
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def two_cpus() -> bool:
    return len(os.sched_getaffinity(0)) >= 2


def _pg_bin() -> Path | None:
    """The newest PostgreSQL server binaries of Debian's layout, or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit()
                   else 0)
    return found[-1].parent if found else None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL cluster of this test session: initdb in a temporary directory,
    listening on 127.0.0.1 at a free port and on a socket there, trust authentication for the
    superuser `hpcprobe`; stopped (pg_ctl, by its data directory) and removed at the end."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not installed (Debian: apt install postgresql)")
    import tempfile

    # its own directory under /tmp: pytest's are private to root, and the server runs as a user
    root = Path(tempfile.mkdtemp(prefix="hpcprobe-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb and postgres refuse to run as root
        import pwd

        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        if user is None:
            pytest.skip("running as root with no unprivileged user for PostgreSQL")
        uid, gid = pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid
        for p in (root, sock):
            os.chown(p, uid, gid)
        run_as = ["runuser", "-u", user, "--"]
    port = _free_port()
    try:
        subprocess.run([*run_as, str(bin_dir / "initdb"), "-D", str(data), "-U", "hpcprobe",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([*run_as, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-t", "60",
                        "-l", str(root / "log"), "-o",
                        f"-h 127.0.0.1 -p {port} -k {sock} -c max_connections=200 "
                        "-c fsync=off", "start"], check=True, capture_output=True, timeout=120)
        yield PgServer(f"postgresql://hpcprobe@127.0.0.1:{port}", bin_dir, run_as, data)
    finally:
        if (data / "postmaster.pid").exists():  # stopped by its data directory, not by name
            subprocess.run([*run_as, str(bin_dir / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def _has_user(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@dataclass
class PgServer:
    base: str  # postgresql://hpcprobe@127.0.0.1:PORT
    bin_dir: Path
    run_as: list[str]
    data: Path

    def new_database(self) -> str:
        """A fresh empty database on the server; its URL."""
        import uuid

        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"{self.base}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.base}/{name}"


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh empty database of the session's throwaway PostgreSQL server."""
    return pg_server.new_database()
