"""MPI out of process with real ranks: the MPI found and fingerprinted, the program built with
its mpicc and cached, launchers' argv, plans on recorded machines, real runs of every test on
2 and 4 ranks (Open MPI from Debian where installed, MPICH from its PyPI wheel), timeouts, a
killed rank, and bad input. Nothing in the MPI path is mocked."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, MPI, assert_user_error, hpcprobe, needs_mpi
from hpcprobe.common.errors import UserError
from hpcprobe.families.mpi import protocol
from hpcprobe.families.mpi.bench import MpiOptions, pair_cpus, plan
from hpcprobe.machine import topology
from hpcprobe.mpi import build, find, launchers, params
from hpcprobe.mpi.launchers import Layout
from hpcprobe.results.model import Metric

pytestmark = pytest.mark.usefixtures("private_cache")
WHEEL = Path(sys.prefix) / "bin" / "mpicc"
needs_wheel = pytest.mark.skipif(not WHEEL.is_file(), reason="the mpich wheel is not installed")


def found(*args, **kw) -> list[dict]:
    """The MPI's protocol findings as the run document stores them."""
    return [f.to_dict() for f in protocol.findings(*args, **kw)]


def mpi_json(tmp_path: Path, *args: str, code: int = 0) -> dict:
    out = tmp_path / "mpi.json"
    r = hpcprobe("mpi", *args, "--no-store", "--json", str(out))
    assert r.code == code, r.err
    from hpcprobe.results import model as results

    doc = json.loads(out.read_text())
    results.validate(doc)
    return doc


def by_name(doc: dict, name: str) -> dict[int, dict]:
    return {m["params"]["size_bytes"]: m for m in doc["metrics"] if m["name"] == name}


# ------------------------------------------------------------------ finding and building

@needs_mpi
def test_the_mpi_is_described_and_fingerprinted():
    assert MPI.implementation in ("Open MPI", "MPICH", "Intel MPI")
    assert MPI.version and MPI.version != "?"
    assert (Path(MPI.prefix) / "bin" / "mpicc").exists()
    assert len(MPI.fingerprint) == 16
    other = dataclasses.replace(MPI, wrapper_flags=MPI.wrapper_flags + " -O0")
    assert other.fingerprint != MPI.fingerprint
    assert build.program(other) != build.program(MPI)


@needs_mpi
def test_built_once_then_cached():
    exe = build.build(MPI)
    assert exe.is_file() and os.access(exe, os.X_OK)
    stamp = exe.stat().st_mtime_ns
    assert build.build(MPI) == exe and exe.stat().st_mtime_ns == stamp
    assert MPI.fingerprint in (exe.parent / "fingerprint.txt").read_text()


@needs_mpi
def test_an_mpicc_that_cannot_compile_shows_the_compilers_message(tmp_path):
    # an MPI whose wrapper answers questions but fails to compile anything
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "mpicc"
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *-E*|*-show*) exec {MPI.mpicc} \"$@\";; esac\n"
                    "echo 'hpb_mpi.c:1: error: simulated broken toolchain' >&2\nexit 1\n")
    fake.chmod(0o755)
    r = hpcprobe("mpi", "--mpi", str(tmp_path), "--np", "2", "--no-store")
    assert_user_error(r, "cannot compile", "simulated broken toolchain")


def test_no_mpi_found_says_how_to_point_at_one(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HPCPROBE_MPI", raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(find.MpiNotFound, match="--mpi PREFIX"):
        find.find()
    r = hpcprobe("mpi", "--np", "2", "--no-store", env={"HPCPROBE_MPI": str(tmp_path)})
    assert_user_error(r, str(tmp_path), "bin/mpicc")


@pytest.mark.parametrize("args", [["run", "--dry-run"], ["mpi", "--dry-run"],
                                  ["run", "memory", "mpi", "--no-store"], ["hpl", "--no-store"]])
def test_a_wrong_mpi_prefix_is_refused_before_anything_is_measured(tmp_path, args):
    r = hpcprobe(*args, "--mpi", str(tmp_path))
    assert_user_error(r, f"--mpi {tmp_path}: no bin/mpicc there")
    assert "GB/s" not in r.out


def test_run_says_why_the_mpi_section_skipped(tmp_path):
    """`run mpi` without an MPI says why it skipped; having measured nothing, it is a user's
    mistake (exit 2) and no run is stored (an empty run was, and `list` showed it), while the
    document asked for is still written (a cluster node's probe reads it)."""
    db, doc = tmp_path / "store.sqlite", tmp_path / "run.json"
    r = hpcprobe("run", "mpi", "--db", str(db), "--json", str(doc),
                 env={"HPCPROBE_MPI": str(tmp_path / "none")})
    assert r.code == 2 and "mpi: skipped" in r.err and "bin/mpicc" in r.err, r.out + r.err
    assert r.err.strip().splitlines()[-1] == (
        "hpcprobe: error: nothing was measured: every benchmark asked for was skipped (the "
        "warnings above say why); the run is not stored")
    assert json.loads(doc.read_text())["metrics"] == [] and "Stored as" not in r.out
    assert not db.exists()  # the store this run created holds nothing: not left behind


# ------------------------------------------------------------------ launchers (argv only)

def fake_mpi(impl: str, prefix: str = "/opt/mpi") -> find.Mpi:
    return find.Mpi(f"{prefix}/bin/mpicc", prefix, impl, "1.0", "3.1", "")


def test_mpirun_binds_by_rankfile_of_os_cpus(tmp_path):
    spec = launchers.LAUNCHERS["mpirun"].build("/x/mpirun", fake_mpi("Open MPI"),
                                               Layout((4, 68, 4)), ["prog", "-a"], tmp_path,
                                               {})
    assert spec.argv[:3] == ["/x/mpirun", "-np", "3"]
    assert "--oversubscribe" in spec.argv and spec.argv[-2:] == ["prog", "-a"]
    assert (tmp_path / "rankfile").read_text() == \
        "rank 0=localhost slot=4\nrank 1=localhost slot=68\nrank 2=localhost slot=4\n"
    assert ("OMPI_ALLOW_RUN_AS_ROOT" in spec.env) == (os.geteuid() == 0)
    spec = launchers.LAUNCHERS["mpirun"].build("/x/mpirun", fake_mpi("Open MPI"),
                                               Layout((0, 0), ("n1", "n2")), ["p"], tmp_path,
                                               {"OPENBLAS_NUM_THREADS": "1"})
    assert "--oversubscribe" not in spec.argv
    assert spec.argv[spec.argv.index("--host") + 1] == "n1:1,n2:1"
    # the environment the ranks need reaches the other hosts too
    assert spec.argv[spec.argv.index("-x") + 1] == "OPENBLAS_NUM_THREADS"
    assert spec.env["OPENBLAS_NUM_THREADS"] == "1"
    # threaded ranks: a set of CPUs each
    launchers.LAUNCHERS["mpirun"].build("/x/mpirun", fake_mpi("Open MPI"),
                                        Layout((0, 4), sets=((0, 1, 2, 3), (4, 5, 6, 7))), ["p"],
                                        tmp_path, {})
    assert (tmp_path / "rankfile").read_text() == \
        "rank 0=localhost slot=0,1,2,3\nrank 1=localhost slot=4,5,6,7\n"


def test_hydra_and_intel_and_srun_binding():
    mpiexec, srun = launchers.LAUNCHERS["mpiexec"].build, launchers.LAUNCHERS["srun"].build
    hydra = mpiexec("/x/mpiexec", fake_mpi("MPICH"), Layout((0, 1)), ["p"], Path("."), {})
    assert hydra.argv == ["/x/mpiexec", "-n", "2", "-bind-to", "user:0,1", "p"]
    sets = Layout((0, 2), sets=((0, 1), (2, 3)))
    hydra = mpiexec("/x/mpiexec", fake_mpi("MPICH"), sets, ["p"], Path("."), {"A": "1"})
    assert hydra.argv == ["/x/mpiexec", "-n", "2", "-bind-to", "user:0+1,2+3", "-genvlist", "A",
                          "p"]
    intel = mpiexec("/x/mpiexec", fake_mpi("Intel MPI"), Layout((2, 3)), ["p"], Path("."), {})
    assert intel.env["I_MPI_PIN_PROCESSOR_LIST"] == "2,3" and "-bind-to" not in intel.argv
    intel = mpiexec("/x/mpiexec", fake_mpi("Intel MPI"), sets, ["p"], Path("."), {})
    assert intel.env["I_MPI_PIN_DOMAIN"] == "[0x3,0xc]"
    got = srun("/x/srun", fake_mpi("MPICH"), Layout((5, 5)), ["p"], Path("."), {})
    assert got.argv == ["/x/srun", "-n", "2", "--kill-on-bad-exit=1", "--cpu-bind=map_cpu:5,5",
                        "--overcommit", "p"]
    assert got.env == {"OMPI_MCA_pmix_base_async_modex": "1"}  # Open MPI: one modex fence
    got = srun("/x/srun", fake_mpi("MPICH"), sets, ["p"], Path("."), {"A": "1"})
    assert got.argv == ["/x/srun", "-n", "2", "--kill-on-bad-exit=1",
                        "--cpu-bind=mask_cpu:0x3,0xc", "p"]
    assert got.env == {"A": "1", "OMPI_MCA_pmix_base_async_modex": "1"}


def test_multi_node_layout_puts_ranks_host_by_host():
    topo = topology.load_xml(DATA / "laptop-8c.xml")
    steps = plan(topo, MpiOptions(np=4, hosts=("n1", "n2"), pairs=("inter-node",)), False, 16)
    main = steps[0]
    assert main.layout.hosts == ("n1", "n1", "n2", "n2") and main.pair != "inter-node"
    assert main.layout.cpus[:2] == main.layout.cpus[2:]
    assert steps[1].pair == "inter-node" and steps[1].layout.hosts == ("n1", "n2")
    one_each = plan(topo, MpiOptions(np=2, hosts=("n1", "n2")), False, 16)[0]
    assert one_each.pair == "inter-node"


def test_a_launcher_of_another_mpi_or_unknown_is_refused():
    with pytest.raises(UserError, match="unknown; launchers: mpirun, mpiexec, srun"):
        launchers.choose(fake_mpi("Open MPI"), "aprun")
    with pytest.raises(UserError, match="not usable with Open MPI"):
        launchers.choose(fake_mpi("Open MPI"), "mpiexec")


# ------------------------------------------------------------------ plans on recorded machines

def test_run_section_plan_on_a_dual_socket_nps4_node():
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    steps = plan(topo, MpiOptions(), False, 16)
    main = steps[0]
    # one rank per core in spread order: ranks 0 and 1 sit on different sockets
    assert main.layout.ranks == 128 and main.pair == "inter-socket"
    pairs = {s.pair: s for s in steps[1:] if s.pair}
    assert set(pairs) == {"intra-l3", "intra-socket"}
    a, b = pairs["intra-socket"].layout.cpus
    assert topo.pu(a).package == topo.pu(b).package and topo.pu(a).l3 != topo.pu(b).l3
    assert pairs["intra-socket"].tests == ("latency", "bandwidth", "bibw")
    ladder = [s.layout.ranks for s in steps if s.pair is None]
    assert ladder == [2, 4, 8, 16, 32, 64]
    assert pair_cpus(topology.load_xml(DATA / "laptop-8c.xml"), "inter-socket") is None


@pytest.mark.parametrize("opts,needle", [
    (MpiOptions(np=1), "at least 2 ranks"),
    (MpiOptions(np=9), "np 9"),
    (MpiOptions(np=2, tests=("pingpong",)), "tests 'pingpong' is unknown"),
    (MpiOptions(np=2, pairs=("inter-node",)), "needs two hosts"),
    (MpiOptions(np=2, pairs=("inter-socket",)), "no inter-socket pair"),
    (MpiOptions(np=3, hosts=("a", "b")), "multiple of the 2 hosts"),
])
def test_impossible_layouts_are_refused(opts, needle):
    with pytest.raises(UserError, match=needle):
        plan(topology.load_xml(DATA / "laptop-8c.xml"), opts, False, 16)


# ------------------------------------------------------------------ real ranks

@needs_mpi
def test_point_to_point_on_two_real_ranks(tmp_path):
    doc = mpi_json(tmp_path, "--np", "2", "--oversubscribe", "--tests", "latency,bandwidth,bibw",
                   "--max-size", "1KiB", "--quick")
    lat, bw, bibw = by_name(doc, "latency"), by_name(doc, "bandwidth"), by_name(doc, "bibw")
    assert sorted(lat) == [0] + [2 ** k for k in range(11)]
    assert min(bw) == 1 and max(bw) == 1024 and sorted(bibw) == sorted(bw)
    m = lat[8]
    assert m["unit"] == "us" and m["better"] == "lower" and m["summary"]["n"] >= 3
    assert m["params"]["ranks"] == 2 and m["params"]["pairs"] == 1
    assert m["params"]["launcher"] in ("mpirun", "mpiexec")
    asked = [int(c) for c in m["params"]["cpus"].replace("-", ",").split(",")]
    assert m["params"]["binding"].split(";")[0] == str(asked[0])
    assert all(v > 0 for v in bw[1024]["samples"])
    assert doc["provenance"]["mpi"]["fingerprint"] == MPI.fingerprint
    assert doc["provenance"]["mpi"]["thresholds"] == {t.variable: t.size
                                                      for t in params.thresholds(MPI)}
    assert not doc["errors"]


@needs_mpi
def test_message_rate_collectives_and_halo_on_four_ranks(tmp_path):
    doc = mpi_json(tmp_path, "--np", "4", "--oversubscribe", "--tests",
                   "message_rate,allreduce,bcast,alltoall,barrier,halo", "--max-size", "64",
                   "--quick")
    mr = by_name(doc, "message_rate")
    assert mr[64]["params"]["pairs"] == 2 and mr[64]["unit"] == "messages/s"
    for coll in ("allreduce", "bcast", "alltoall"):
        got = by_name(doc, coll)
        assert sorted(got) == [4, 8, 16, 32, 64], coll
        assert got[64]["params"]["ranks"] == 4
        lo, hi = by_name(doc, f"{coll}_rank_min")[64], by_name(doc, f"{coll}_rank_max")[64]
        assert lo["summary"]["median"] <= got[64]["summary"]["median"] <= \
            hi["summary"]["median"]
    assert list(by_name(doc, "barrier")) == [0]
    halo = {m["params"]["l"]: m for m in doc["metrics"] if m["name"] == "halo"}
    assert sorted(halo) == [8, 12, 16, 24, 32]
    p = halo[8]["params"]
    assert p["dims"] == "2x2x1x1" and p["faces"] == 4
    assert p["size_bytes"] == 8 ** 3 * p["ls"] * p["site_bytes"]
    assert len(p["binding"].split(";")) == 4


@needs_wheel
def test_mpich_from_its_wheel_with_hydra(tmp_path):
    doc = mpi_json(tmp_path, "--mpi", sys.prefix, "--np", "2", "--oversubscribe", "--tests",
                   "latency", "--max-size", "8", "--quick")
    m = by_name(doc, "latency")[8]
    assert m["params"]["mpi"].startswith("MPICH") and m["params"]["launcher"] == "mpiexec"


@needs_mpi
def test_text_view_and_info():
    r = hpcprobe("mpi", "--np", "2", "--oversubscribe", "--tests", "latency", "--max-size", "4",
                 "--quick", "--no-store")
    assert r.code == 0, r.err
    assert "# hpcprobe MPI Latency Test" in r.out and "Latency (us)" in r.out
    r = hpcprobe("mpi", "info")
    assert r.code == 0 and MPI.fingerprint in r.out and "launchers:" in r.out


@needs_mpi
def test_a_test_without_progress_is_stopped_and_earlier_sizes_kept(tmp_path):
    # full OSU iteration counts up to 64 MiB: from some size on, one size takes longer than 0.4 s
    doc = mpi_json(tmp_path, "--np", "2", "--oversubscribe", "--tests", "latency", "--timeout",
                   "0.4", "--max-size", "64MiB", code=1)
    assert any("no progress for 0.4 s in latency at" in e for e in doc["errors"])
    lat = by_name(doc, "latency")
    assert 0 in lat and max(lat) < 64 << 20


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def running_ranks() -> list[int]:
    """PIDs of the processes running the test program (found through /proc)."""
    exe = str(build.program(MPI)).encode()
    return [int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and _cmdline(d).split(b"\0")[0] == exe]


def start_latency_run(db: Path) -> subprocess.Popen[str]:
    """`hpcprobe mpi` on 2 ranks with OSU's latency counts up to 64 MiB: 15 s and more."""
    cli = Path(sys.executable).parent / "hpcprobe"
    return subprocess.Popen([str(cli), "mpi", "--np", "2", "--oversubscribe", "--tests",
                             "latency", "--max-size", "64MiB", "--db", str(db)],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@needs_mpi
def test_a_killed_rank_ends_the_run_with_what_was_measured(tmp_path):
    db = tmp_path / "r.sqlite"
    p = start_latency_run(db)
    deadline = time.monotonic() + 60  # the start-up: seconds on a busy machine
    while not (ranks := running_ranks()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ranks, "no rank running"
    time.sleep(3.0)  # MPI_Init and a few sizes
    os.kill(max(running_ranks() or ranks), signal.SIGKILL)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    assert "exited with status" in err and "during latency at" in err
    n = sqlite3.connect(db).execute("select count(*) from metrics").fetchone()[0]
    assert n > 0  # the sizes measured before the rank died are stored


@needs_mpi
def test_an_interrupt_stops_the_ranks_and_stores_nothing(tmp_path):
    db = tmp_path / "r.sqlite"
    p = start_latency_run(db)
    time.sleep(2.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in err
    time.sleep(0.5)
    assert running_ranks() == []
    assert not db.exists()  # the store it made for the run, empty, is removed


@needs_mpi
def test_hpcprobe_run_has_a_short_mpi_section(tmp_path):
    out = tmp_path / "run.json"
    r = hpcprobe("run", "mpi", "--quick", "--no-store", "--json", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    names = {m["name"] for m in doc["metrics"]}
    assert {"latency", "bandwidth", "bibw", "allreduce", "halo"} <= names
    assert doc["provenance"]["mpi"]["launcher"] in ("mpirun", "mpiexec", "srun")


def test_bad_mpi_options_are_user_errors():
    assert_user_error(hpcprobe("mpi", "--np", "2", "--launcher", "aprun", "--no-store"),
                      "--launcher 'aprun' is unknown")
    assert_user_error(hpcprobe("mpi", "--np", "2", "--tests", "pingpong", "--no-store"),
                      "--tests 'pingpong'")
    assert_user_error(hpcprobe("mpi", "--np", "4096", "--no-store"), "--np 4096",
                      "--oversubscribe")
    assert_user_error(hpcprobe("mpi", "--timeout", "0", "--no-store"), "--timeout 0")
    # what the run refuses, its dry run refuses; no host names is not a one-node run
    assert_user_error(hpcprobe("mpi", "--launcher", "aprun", "--dry-run"),
                      "--launcher 'aprun' is unknown")
    for hosts in ("", ","):
        assert_user_error(hpcprobe("mpi", "--hosts", hosts, "--dry-run"),
                          f"--hosts {hosts!r}: give one or more names")
    # a host named twice is not two nodes, nor a test asked twice two tests
    assert_user_error(hpcprobe("mpi", "--hosts", "n1,n2,n1", "--dry-run"),
                      "--hosts n1,n2,n1: n1 given twice")
    assert_user_error(hpcprobe("mpi", "--tests", "barrier,barrier", "--dry-run"),
                      "barrier given twice")


def test_one_cpu_leaves_mpi_out_of_a_run_and_mpi_refuses(tmp_path):
    one = str(DATA / "one-core.xml")
    r = hpcprobe("run", "--dry-run", "--input", one)  # every family plans on one core
    assert r.code == 0, r.err
    assert "mpi: 1 measurement(s)\n  skipped: placement one-per-core yields 1 CPU" in r.out
    assert_user_error(hpcprobe("mpi", "--dry-run", "--input", one), "the MPI tests need 2 ranks")
    r = hpcprobe("run", "mpi", "--dry-run", "--np", "2", "--oversubscribe", "--input", one)
    assert r.code == 0 and "2 ranks, one-per-core (same-cpu pair)" in r.out, r.err
    # this process's cpuset cut to one CPU, as a one-CPU job or VM has it: the family skips
    # with why, not a refusal of the run; asked for alone, it left nothing measured (exit 2)
    exe = str(Path(sys.executable).parent / "hpcprobe")
    doc = tmp_path / "r.json"
    p = subprocess.run([exe, "run", "mpi", "--quick", "--no-store", "--json", str(doc)],
                       capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    assert p.returncode == 2 and "nothing was measured" in p.stderr, p.stderr
    got = json.loads(doc.read_text())
    assert got["metrics"] == [] and any("mpi: skipped: placement one-per-core yields 1 CPU" in w
                                        for w in got["warnings"])


@needs_mpi
def test_a_launcher_that_cannot_start_stores_nothing(tmp_path):
    # an srun on PATH whose controller cannot be reached, as on a login node without Slurm
    bindir = tmp_path / "bin"
    bindir.mkdir()
    srun = bindir / "srun"
    srun.write_text("#!/bin/sh\necho 'srun: error: Unable to contact slurm controller "
                    "(connect failure)' >&2\nexit 1\n")
    srun.chmod(0o755)
    db = tmp_path / "r.sqlite"
    r = hpcprobe("mpi", "--launcher", "srun", "--np", "2", "--db", str(db),
                 env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    assert_user_error(r, "srun launcher could not start", "Unable to contact slurm controller")
    assert not db.exists() or \
        sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0


# ------------------------------------------------------------------ protocol changes

#: `ompi_info --parsable --param btl all --level 9`, the lines read (Open MPI 4.1, Debian 12)
OMPI_INFO = """\
mca:btl:ofi:param:btl_ofi_eager_limit:value:0
mca:btl:tcp:param:btl_tcp_rndv_eager_limit:value:65536
mca:btl:tcp:param:btl_tcp_eager_limit:value:65536
mca:btl:vader:param:btl_vader_single_copy_mechanism:value:cma
mca:btl:vader:param:btl_vader_single_copy_mechanism:source:default
mca:btl:vader:param:btl_vader_rndv_eager_limit:value:32768
mca:btl:vader:param:btl_vader_eager_limit:value:4096
mca:btl:self:param:btl_self_eager_limit:value:1024
"""
#: `mpivars` of MPICH 5.0 (its PyPI wheel, ch4:ucx,ofi), the lines read and one beside them
MPIVARS = (
    "\tMPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE=131072\tSCOPE_ALL_EQ\tNo-object\tMPI_INT\t...\n"
    "\tMPIR_CVAR_CH4_OFI_EAGER_THRESHOLD=-1\tSCOPE_LOCAL\tNo-object\tMPI_INT\t...\n"
    "\tMPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD=8192\tSCOPE_ALL_EQ\tNo-object\tMPI_INT\t...\n"
    "\tMPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE=8192\tSCOPE_ALL_EQ\tNo-object\tMPI_INT\t...\n"
    "\tMPIR_CVAR_CH4_SHM_POSIX_EAGER   =\tSCOPE_ALL_EQ\tNo-object\tMPI_CHAR\t...\n")
TCP, VADER = params.parse_ompi_info(OMPI_INFO)


def curve(name: str, figures: dict[int, tuple[float, float]], pair: str = "intra-l3"
          ) -> list[Metric]:
    """A point-to-point curve: size -> (median, relative spread of its samples)."""
    p = {"ranks": 2, "placement": "one-per-core", "pair": pair, "cpus": "0-1", "hosts": "",
         "pairs": 1}
    return [Metric("mpi", name, "MB/s", dict(p, size_bytes=s),
                   [v * (1 + spread * k / 5) for k in range(-5, 6)])
            for s, (v, spread) in figures.items()]


def test_the_mpis_report_their_protocol_thresholds():
    got = params.parse_ompi_info(OMPI_INFO)  # ofi sends nothing eagerly; self: to itself
    assert [(t.variable, t.size, t.scope) for t in got] == [
        ("OMPI_MCA_btl_tcp_eager_limit", 65536, "inter-node"),
        ("OMPI_MCA_btl_vader_eager_limit", 4096, "intra-node")]
    assert "single copy by cma" in VADER.above and "single copy" not in TCP.above
    assert VADER.knobs == ("OMPI_MCA_btl_vader_eager_limit",
                           "OMPI_MCA_btl_vader_single_copy_mechanism")
    got = params.parse_mpivars(MPIVARS)  # CH3's unused in CH4; -1: no threshold
    assert [(t.variable, t.size, t.scope) for t in got] == [
        ("MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD", 8192, "intra-node"),
        ("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", 8192, "intra-node")]
    for parse in (params.parse_ompi_info, params.parse_mpivars):
        assert parse("") == [] and parse("not a listing\n") == []


def test_a_bandwidth_fall_at_the_eager_limit_is_one_finding_naming_the_setting():
    ms = curve("bandwidth", {1024: (11000, 0.02), 2048: (18000, 0.02), 4096: (2800, 0.02),
                             8192: (4800, 0.02)}) + \
        curve("bibw", {2048: (21000, 0.02), 4096: (5300, 0.02)})
    got = found(ms, [TCP, VADER], "Open MPI")
    assert len(got) == 1
    f = got[0]
    assert f["kind"] == "protocol_switch" and f["sizes"] == [2048, 4096]
    assert "from 2 KiB to 4 KiB" in f["message"]
    assert "bandwidth 18000 -> 2800 MB/s (x0.16)" in f["message"]
    assert "bibw 21000 -> 5300 MB/s (x0.25)" in f["message"]
    assert "Open MPI's OMPI_MCA_btl_vader_eager_limit is 4096 B" in f["message"]
    assert "single copy by cma" in f["message"]
    assert "OMPI_MCA_btl_vader_single_copy_mechanism in a sweep" in f["message"]
    assert "tcp" not in f["message"]  # an intra-node pair does not go over TCP


def test_every_threshold_between_the_sizes_is_named():
    ms = curve("bandwidth", {4096: (7400, 0.01), 8192: (3500, 0.01)})
    (f,) = found(ms, params.parse_mpivars(MPIVARS), "MPICH")
    assert "MPICH's MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD is 8192 B" in f["message"]
    assert "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE is 8192 B" in f["message"]


def test_a_fall_inside_the_noise_or_small_is_no_finding():
    noisy = curve("bandwidth", {2048: (18000, 0.5), 4096: (12000, 0.5)})
    small = curve("bandwidth", {2048: (18000, 0.01), 4096: (15000, 0.01)})  # x0.83
    rising = curve("bandwidth", {2048: (18000, 0.01), 4096: (30000, 0.01)})
    latency = [dataclasses.replace(m, name="latency", unit="us")
               for m in curve("bandwidth", {2048: (2.0, 0.01), 4096: (0.2, 0.01)})]
    for ms in (noisy, small, rising, latency):
        assert found(ms, [VADER]) == []


def test_a_fall_no_threshold_explains_says_what_else_does_it():
    ms = curve("bandwidth", {262144: (15000, 0.01), 524288: (10000, 0.01)})
    (f,) = found(ms, [TCP, VADER])
    assert "vader" not in f["message"] and "UCX_RNDV_THRESH" in f["message"]
    assert "outgrow a cache" in f["message"]
    # between nodes the shared-memory BTL is not the carrier; TCP's limit is
    ms = curve("bandwidth", {32768: (900, 0.01), 65536: (400, 0.01)}, pair="inter-node")
    (f,) = found(ms, [TCP, dataclasses.replace(VADER, size=65536)], "Open MPI")
    assert "OMPI_MCA_btl_tcp_eager_limit is 65536 B" in f["message"]
    assert "vader" not in f["message"]


def collective(name: str, figures: dict[int, tuple[float, float]], hosts: str = ""
               ) -> list[Metric]:
    """A collective's curve: size -> (median latency in us, relative spread of its samples)."""
    p = {"ranks": 2, "placement": "one-per-core", "cpus": "0-1", "hosts": hosts}
    return [Metric("mpi", name, "us", dict(p, size_bytes=s),
                   [v * (1 + spread * k / 5) for k in range(-5, 6)], "lower")
            for s, (v, spread) in figures.items()]


def test_a_collective_whose_time_per_byte_jumps_is_one_finding_naming_the_algorithm():
    """Measured here (Open MPI 4.1, 2 ranks): bcast 0.25 us at 2 KiB, 1.81 us at 4 KiB; flat
    latency at small sizes and doubling time in the bandwidth regime are no finding."""
    ms = collective("bcast", {256: (0.14, 0.02), 512: (0.22, 0.02), 1024: (0.23, 0.02),
                              2048: (0.25, 0.02), 4096: (1.81, 0.02), 8192: (2.06, 0.02),
                              262144: (16.7, 0.02), 524288: (32.8, 0.02)}) + \
        collective("allreduce", {2048: (0.42, 0.02), 4096: (0.81, 0.02), 8192: (3.23, 0.02)})
    got = found(ms, [TCP, VADER], "Open MPI")
    assert [(f["kind"], f["sizes"], f["collectives"]) for f in got] == [
        ("collective_switch", [2048, 4096], ["bcast"]),
        ("collective_switch", [4096, 8192], ["allreduce"])]
    bcast, allreduce = (f["message"] for f in got)
    assert "bcast 0.25 -> 1.81 us (x7.24) on 2 ranks, one-per-core" in bcast
    assert "OMPI_MCA_coll_tuned_use_dynamic_rules=1 with OMPI_MCA_coll_tuned_bcast_algorithm=N" \
        in bcast
    assert "OMPI_MCA_btl_vader_eager_limit is 4096 B" in bcast  # the eager limit lies there
    assert "vader" not in allreduce and "their eager limit" in allreduce
    assert "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM" in found(
        ms, [], "MPICH")[1]["message"]
    # between nodes, the shared-memory BTL's limit is not named
    far = collective("bcast", {2048: (2.0, 0.02), 4096: (9.0, 0.02)}, hosts="n1,n2")
    (f,) = found(far, [TCP, VADER], "Open MPI")
    assert "vader" not in f["message"]


def test_a_collective_slower_by_less_than_the_bytes_or_in_the_noise_is_no_finding():
    for ms in (collective("alltoall", {4096: (1.0, 0.02), 8192: (2.4, 0.02)}),  # x1.2/byte
               collective("alltoall", {4096: (1.0, 0.4), 8192: (3.0, 0.4)}),  # CIs overlap
               collective("barrier", {4096: (1.0, 0.01), 8192: (9.0, 0.01)}),  # no message
               collective("bcast", {0: (0.1, 0.01), 1: (0.5, 0.01)})):  # no bytes to divide
        assert found(ms, [VADER]) == []


@needs_mpi
def test_the_mpi_reports_its_thresholds_under_this_environment(monkeypatch):
    if MPI.implementation != "Open MPI":
        pytest.skip(f"{MPI.implementation}: MPICH's wheel is read in the next test")
    shm = [t for t in params.thresholds(MPI) if t.scope == "intra-node"]
    assert len(shm) == 1 and shm[0].size > 0
    monkeypatch.setenv(shm[0].variable, str(3 * shm[0].size))
    assert [t.size for t in params.thresholds(MPI) if t.scope == "intra-node"] == \
        [3 * shm[0].size]
    r = hpcprobe("mpi", "info")
    assert f"{shm[0].variable} = {3 * shm[0].size} B, intra-node" in r.out, r.out


@needs_wheel
def test_mpich_reports_its_thresholds_under_this_environment(monkeypatch):
    mpich = find.find(sys.prefix)
    cma = "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD"
    before = {t.variable: t.size for t in params.thresholds(mpich)}
    if cma not in before:
        pytest.skip("this MPICH lists no CMA threshold")
    monkeypatch.setenv(cma, str(4 * before[cma]))
    assert {t.variable: t.size for t in params.thresholds(mpich)}[cma] == 4 * before[cma]
