"""Shared fixtures: recorded hwloc topologies and a runner for the installed CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import forkcli
import slurmcluster
from hpcprobe.families import FAMILIES
from hpcprobe.machine import topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import Family, Metrics, MetricSpec
from hpcprobe.mpi import find
from hpcprobe.results.model import Metric
from hpcprobe.tools import pgserver

# A suite started in the background by a shell without job control (`(make test &)`) inherits
# SIGINT ignored, and so would every process it starts: the interrupt tests' SIGINT would then
# reach no one. A handler of our own is reset to the default across exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DATA = Path(__file__).parent / "data"

#: Recorded and synthetic machines: file, and (packages, NUMA, L3 domains, cores, PUs).
MACHINES = {
    "epyc-2s-nps4-128c.xml": (2, 8, 32, 128, 128),
    "xeon-2s-26c-smt.xml": (2, 2, 2, 52, 104),
    "laptop-8c.xml": (1, 1, 1, 8, 8),
    "vm-live-2c.xml": (1, 1, 1, 2, 2),
}


def _mpi() -> find.Mpi | None:
    try:
        return find.find()
    except find.MpiNotFound:
        return None


#: The MPI the tests launch ranks with (Open MPI from Debian, or MPICH from its wheel).
MPI = _mpi()
needs_mpi = pytest.mark.skipif(MPI is None, reason="no MPI: install openmpi-bin libopenmpi-dev "
                                                   "(make setup as root) or pip install mpich")


@pytest.fixture(scope="session", autouse=True)
def private_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A command that names no --db writes to $XDG_DATA_HOME/hpcprobe/results.sqlite: the
    suite's go to a directory of its own, never the user's store (nor another checkout's)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
        yield


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Builds of the MPI programs go to a cache of this module, which the CLI subprocesses
    inherit (use it with pytestmark = pytest.mark.usefixtures("private_cache"))."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HPCPROBE_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


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


#: The longest test files but the Slurm ones (40-135 s each here), started next, so that the
#: pass ends with short files on both workers (xdist's own order, most tests first, left the
#: Slurm files to the end: its workers took 729 and 657 s; in this order 707 and 715). A hint
#: only: a file missing here costs time, never a result.
LONGEST = ("test_sweep.py", "test_readme.py", "test_whole_path.py", "test_store_io.py",
           "test_hpl.py", "test_proxies.py", "test_check.py", "test_mpi.py", "test_app_scale.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start a namespace Slurm cluster first: in make test's first pass they run
    one after another on one worker (the longest share of that pass), beside the rest, the
    longest files first."""
    items.sort(key=lambda item: (item.path.name not in slurmcluster.MODULES,
                                 item.path.name not in LONGEST))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """make test's first pass (`--dist loadfile`): a test file's tests go to one worker, its
    module fixtures then built once, and the files that start a namespace Slurm cluster all go
    to one worker, one test after another, as this machine holds one such cluster at a time.
    (xdist's own groups, `--dist loadgroup`, are lost under pytest 9: it names tests anew.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # in the order collected (pytest_collection_modifyitems), not xdist's: most tests first,
    # which left the Slurm files and the longest ones to the end
    config.option.loadscopereorder = False

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "namespace Slurm cluster" if Path(path).name in slurmcluster.MODULES else path

    return ByFile(config, log)


_FORK: list[forkcli.Server] = []  # the server of pre-imported CLIs, this session's


@pytest.fixture(scope="session", autouse=True)
def schema_checker() -> None:
    """The result schema's validator, made once in this process: the tests that fork writers
    (tests/test_store_io.py) would otherwise have each fork make it again."""
    from hpcprobe.results import model

    model._fast_validator()


@pytest.fixture(scope="session", autouse=True)
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The server `hpcprobe()` forks its commands from (tests/forkcli.py), started on first
    use and stopped by its recorded PID when the suite ends."""
    _FORK.append(forkcli.Server(tmp_path_factory.mktemp("forkcli")))
    yield
    _FORK.pop().close()


def hpcprobe(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
             script: bool = False) -> Result:
    """Run the installed CLI as a user would: forked from the server that imported it once
    (tests/forkcli.py), or the `hpcprobe` script itself (`script`, or an environment that
    changes what the import loads)."""
    full = {**os.environ, **(env or {})}
    if not script and _FORK and _FORK[0].serves(full):
        try:
            return Result(*_FORK[0].run(list(args), full, timeout))
        except forkcli.Lost:
            _FORK[0].lost()
    exe = shutil.which("hpcprobe", path=str(Path(sys.executable).parent)) or "hpcprobe"
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, env=full)
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


#: `hpcprobe ARGS` with one family's run wrapped: its Nth call (after measuring, if asked)
#: touches the marker and waits for the signal the test sends
_STALLED = """
import dataclasses, pathlib, sys, time
from hpcprobe import cli, registry
marker, name, nth, measure = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
real = registry.FAMILIES[name].run
calls = []
def stall(ctx, options):
    calls.append(1)
    if len(calls) < nth or measure:
        real(ctx, options)
    if len(calls) == nth:
        pathlib.Path(marker).touch()
        time.sleep(600)
registry.FAMILIES[name] = dataclasses.replace(registry.FAMILIES[name], run=stall)
sys.exit(cli.main(sys.argv[5:]))
"""


def interrupt_stalled(sig: int, marker: Path, family: str, nth: int, measure: bool,
                      *args: str) -> Result:
    """Run `hpcprobe ARGS` with `family` stalled at its `nth` run (after measuring, if
    `measure`), send `sig` once it stalls, and wait for the end."""
    return interrupt_at(sig, marker, [sys.executable, "-c", _STALLED, str(marker), family,
                                      str(nth), "1" if measure else "0", *args])


def interrupt_at(sig: int, marker: Path, argv: list[str]) -> Result:
    """Start `argv`, send `sig` once `marker` exists, and wait for the end."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not marker.exists():
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{marker} never appeared (exit {p.returncode}): {err}")
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    return Result(p.returncode, out, err)


def assert_user_error(r: Result, *needles: str, measured: bool = False) -> None:
    """Exit code 2, one line on stderr naming the problem, no traceback. `measured`: a mistake
    found after measuring (a document that cannot be written), whose run's warnings come first
    on stderr; the problem is then its last line."""
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    if measured:
        assert lines and "error:" not in "".join(lines[:-1]), r.err
        lines = lines[-1:]
    assert len(lines) == 1, r.err
    assert "Traceback" not in r.err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def two_cpus() -> bool:
    return len(os.sched_getaffinity(0)) >= 2


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pgserver.PgServer]:
    """A throwaway PostgreSQL cluster for this test session (hpcprobe.tools.pgserver)."""
    if pgserver.bin_dir() is None:
        pytest.skip("PostgreSQL server binaries not installed (Debian: apt install postgresql)")
    with pgserver.throwaway() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: pgserver.PgServer) -> str:
    """A fresh empty database of the session's throwaway PostgreSQL server."""
    return pg_server.new_database()


@dataclass(frozen=True)
class NoOptions:
    """The toy families take none."""


def _toy(name: str):
    def run(ctx, opts: object) -> None:
        time.sleep(0.1)  # long enough for /proc/stat's CPU times to move (10 ms a jiffy)
        ctx.metrics.append(Metric(name, "items", "items", {"n": 1}, [1.0] * 3))
    return run


@pytest.fixture
def toy_family(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two families declared by the test, `toy` and `toy2`: each sleeps 0.1 s and records one
    figure, so that what the runner does around a benchmark is seen alone."""
    settings = {name: None for name in profiles.PROFILES}
    for name in ("toy", "toy2"):
        monkeypatch.setitem(FAMILIES, name, Family(
            name, "a family declared in a test", NoOptions, _toy(name), settings=settings,
            metrics=Metrics((MetricSpec("items", "items"),))))
