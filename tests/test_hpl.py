"""The hpl family: HPL's input derived from recorded topologies, its report parsed, the BLAS
libraries named and checked, and real runs of Debian's hpcc (and of stand-in xhpl programs that
crash, print nothing or fail the residual check) through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe, two_cpus
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import UserError
from hpcprobe.families.hpl import binding, blas, inputs, output
from hpcprobe.machine import cpufreq, topology
from hpcprobe.mpi import layouts
from hpcprobe.results import model as results

HPCC = shutil.which("hpcc") is not None
MPIRUN = shutil.which("mpirun") is not None
INSTALLED = blas.installed()
needs_hpcc = pytest.mark.skipif(not (HPCC and MPIRUN and INSTALLED),
                                reason="hpcc, mpirun or a BLAS missing (make system-deps)")

REPORT = """\
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4        4000   192     1     2               0.48              8.834e+01
HPL_pdgesv() start time Mon Nov 23 06:40:00 2026

--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0026458 ...... PASSED
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4        4000   384     1     2               0.51              8.312e+01
--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=     1234.5 ...... FAILED
WALL  2000  2000 192 192   1   2     0.01 PASSED    3.825  0.00
"""


def test_report_parsed_with_each_residual_check():
    got = output.parse(REPORT)
    assert [(r.n, r.nb, r.p, r.q, r.seconds, r.gflops) for r in got] == \
        [(4000, 192, 1, 2, 0.48, 88.34), (4000, 384, 1, 2, 0.51, 83.12)]
    assert got[0].valid and got[0].residual == pytest.approx(0.0026458)
    assert not got[1].valid and got[1].passed is False
    # a result whose check never came (a crash in the check) is not valid
    assert output.parse("WR11C2R4  1000  64  1  1  0.1  1.0e+01\n")[0].passed is None
    assert output.section("Begin of PTRANS section.\nEnd of PTRANS section.\n"
                          "Begin of HPL section.\n") == "HPL"
    assert output.fraction("Column=000000192 Fraction=0.005 Gflops=1\n"
                           "Column=000000384 Fraction= 0.250 Gflops=1\n") == 0.25


def test_grid_is_near_square_with_p_at_most_q():
    assert [inputs.grid(n) for n in (1, 2, 4, 6, 7, 12, 128, 256)] == \
        [(1, 1), (1, 2), (2, 2), (2, 3), (1, 7), (3, 4), (8, 16), (16, 16)]
    assert inputs.parse_grid("4x8", 32) == (4, 8)
    for bad in ("4x4", "4", "ax2", "0x32"):
        with pytest.raises(UserError):
            inputs.parse_grid(bad, 32)


def test_ranks_per_core_numa_and_socket_on_a_two_socket_nps4_node(nps4):
    core = layouts.ranks(nps4, "core")
    numa = layouts.ranks(nps4, "numa")
    sock = layouts.ranks(nps4, "socket")
    assert (len(core.sets), core.threads) == (128, 1)
    assert (len(numa.sets), numa.threads) == (8, 16)
    assert (len(sock.sets), sock.threads) == (2, 64)
    # each rank's CPUs lie in its NUMA domain; together they are the cores, once each
    for s, d in zip(numa.sets, nps4.numa_nodes, strict=True):
        assert set(s) <= set(d.cpus)
    assert sorted(numa.cores) == sorted(core.cores) == sorted(sock.cores)
    assert inputs.grid(len(core.sets) * 64) == (64, 128)  # 64 such nodes


def test_ranks_skip_smt_siblings(xeon_smt):
    core = layouts.ranks(xeon_smt, "core")
    assert len(core.sets) == 52  # 104 PUs, one per core
    assert all(len({c for s in core.sets for c in s} & set(k.cpus)) == 1 for k in xeon_smt.cores)


def test_problem_size_from_memory_and_time():
    gib = 2 ** 30
    n = inputs.n_for_memory(256 * gib, 0.8, 384, 16)
    assert n % 384 == 0 and 8 * n * n <= 0.8 * 256 * gib < 8 * (n + 384) ** 2
    # N for t seconds at r GFLOP/s: 2/3 N^3 / r ~ t
    n = inputs.n_for_time(10, 100, 192, 2)
    assert n % 192 == 0 and 5 < inputs.flops(n) / 100e9 <= 10
    # never fewer than MIN_BLOCKS blocks per process column
    assert inputs.n_for_time(0.001, 1, 192, 4) == inputs.MIN_BLOCKS * 192 * 4
    inputs.check_memory(50_000, 24 * gib, 1, 0.9)
    with pytest.raises(UserError, match="give N <="):
        inputs.check_memory(60_000, 24 * gib, 1, 0.9)


def test_input_files_as_hpl_and_hpcc_read_them(tmp_path):
    pr = inputs.Problem((8000, 8000), (192, 384), 2, 4)
    dat = inputs.write(tmp_path, "xhpl", pr).read_text().splitlines()
    assert len(dat) == 31
    assert dat[3].split()[0] == "6"  # report on stdout
    assert (dat[4].split()[0], dat[5].split()[:2]) == ("2", ["8000", "8000"])
    assert (dat[6].split()[0], dat[7].split()[:2]) == ("2", ["192", "384"])
    assert (dat[10].split()[0], dat[11].split()[0]) == ("2", "4")
    hpcc = inputs.write(tmp_path, "hpcc", pr).read_text().splitlines()
    assert hpcc[:31] != dat and len(hpcc) == 36 and hpcc[31].startswith("#####")
    with pytest.raises(UserError):
        inputs.hpl_dat(inputs.Problem((1000,) * 21, (64,), 1, 1))


def test_kernel_sets_and_the_fix_for_narrow_ones():
    assert blas.kernel_isa({"library": "openblas", "kernel": "Haswell"}) == "avx2"
    assert blas.kernel_isa({"library": "openblas", "kernel": "SkylakeX"}) == "avx512"
    assert blas.kernel_isa({"library": "blis", "kernel": "generic"}) == "scalar"
    assert blas.kernel_isa({"library": "reference", "kernel": "generic"}) == "scalar"
    assert blas.kernel_isa({"library": "mkl", "kernel": None}) is None
    assert blas.narrower("avx2", "avx512") and not blas.narrower("avx512", "avx512")
    assert not blas.narrower(None, "avx512")
    ob = blas.Blas("openblas", "/x/openblas-pthread/libblas.so.3")
    info = {"library": "openblas", "kernel": "Haswell", "config": "OpenBLAS 0.3.21"}
    forced = blas.advice(ob, info, "avx512", {"OPENBLAS_CORETYPE": "Haswell"})
    assert "OPENBLAS_CORETYPE=Haswell pins" in forced and "openblas:SkylakeX" in forced
    assert "does not know this CPU" in blas.advice(ob, info, "avx512", {})
    assert "--blas openblas" in blas.advice(blas.Blas("blis", "/x"), {"library": "blis",
                                                                     "kernel": "generic"},
                                            "avx2", {})


def test_blas_choice_and_its_environment(tmp_path):
    for name in ("openblas-pthread", "blas"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "libblas.so.3").write_text("")
    have = blas.installed(tmp_path)
    assert set(have) == {"openblas", "reference"}
    chosen = blas.choose(("openblas:SkylakeX", "reference"), have)
    assert [(b.name, b.coretype) for b in chosen] == [("openblas:SkylakeX", "SkylakeX"),
                                                      ("reference", None)]
    env = chosen[0].env(4)
    assert env["OPENBLAS_CORETYPE"] == "SkylakeX" and env["OPENBLAS_NUM_THREADS"] == "4"
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(tmp_path / "openblas-pthread")
    for bad, why in (("blis", "not installed"), ("mkl", "unknown"),
                     ("reference:Haswell", "OpenBLAS's"), ("/no/libblas.so.3", "no such file")):
        with pytest.raises(UserError, match=why):
            blas.choose((bad,), have)


def _proc(root: Path, pid: int, ppid: int, exe: str, env: dict[str, str], cpus: str) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_text(f"{pid} (x y) S {ppid} 1 1 0")
    (d / "exe").symlink_to(exe)
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    (d / "status").write_text(f"Name:\tx\nCpus_allowed_list:\t{cpus}\n")


def test_each_local_ranks_binding_is_read_back_from_proc(tmp_path):
    _proc(tmp_path, 100, 1, "/usr/bin/mpirun", {}, "0-7")
    _proc(tmp_path, 101, 100, "/usr/bin/hpcc", {"OMPI_COMM_WORLD_RANK": "1"}, "4-7")
    _proc(tmp_path, 102, 100, "/usr/bin/hpcc", {"OMPI_COMM_WORLD_RANK": "0"}, "0-3")
    _proc(tmp_path, 103, 100, "/usr/bin/sh", {"OMPI_COMM_WORLD_RANK": "2"}, "0")  # not HPL
    _proc(tmp_path, 104, 1, "/usr/bin/hpcc", {"SLURM_PROCID": "3"}, "5")  # another job's
    _proc(tmp_path, 105, 102, "/usr/bin/hpcc", {"PMI_RANK": "5"}, "2")  # a descendant
    assert binding.ranks(100, "/usr/bin/hpcc", tmp_path) == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7],
                                                               5: [2]}


def test_base_clock_where_the_cpu_states_one(tmp_path):
    assert cpufreq.base_ghz("Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz") == (2.1, "model name")
    (tmp_path / "cpu0" / "acpi_cppc").mkdir(parents=True)
    (tmp_path / "cpu0" / "acpi_cppc" / "nominal_freq").write_text("2450\n")
    assert cpufreq.base_ghz("AMD EPYC 7763", 0, str(tmp_path)) == (2.45, "ACPI CPPC nominal_freq")
    (tmp_path / "cpu0" / "cpufreq").mkdir()
    (tmp_path / "cpu0" / "cpufreq" / "base_frequency").write_text("2000000\n")
    assert cpufreq.base_ghz("AMD EPYC", 0, str(tmp_path)) == (2.0, "cpufreq base_frequency")
    assert cpufreq.base_ghz("AMD EPYC", 0, str(tmp_path / "none")) is None


@pytest.mark.skipif(not INSTALLED, reason="no Debian BLAS installed")
@pytest.mark.parametrize("name", sorted(INSTALLED))
def test_dgemm_through_each_blas_is_checked(name):
    got = blas.dgemm(blas.Blas(name, INSTALLED[name]), (min(os.sched_getaffinity(0)),), 2, 128)
    assert got["error"] is None and got["n"] == 128 and len(got["samples"]) == 2
    assert got["library"] == name and got["kernel"]


def test_a_blas_that_crashes_is_an_error_not_a_figure(tmp_path):
    got = blas.dgemm(blas.Blas("x", str(tmp_path / "libblas.so.3")), (0,), 1, 64)
    assert "error" in got and "samples" not in got


def test_dry_run_plans_hpl_for_a_recorded_node():
    r = hpcprobe("run", "hpl", "--dry-run", "--input", str(DATA / "epyc-2s-nps4-128c.xml"),
                 "--layout", "numa")
    assert r.code == 0, r.err
    assert "8 rank(s) x 16 thread(s) (numa layout), P x Q = 2 x 4" in r.out
    assert "N sized for ~" in r.out  # `run`'s short HPL, timed by the measured DGEMM rate
    # `hpcprobe hpl` plans its own full-size HPL, and its dry run shows that one
    r = hpcprobe("hpl", "--dry-run", "--input", str(DATA / "epyc-2s-nps4-128c.xml"),
                 "--layout", "numa")
    assert r.code == 0 and "1 run(s), N from 80% of memory" in r.out, r.err
    # N is checked against the recorded node's memory (4 GB), not this one's
    assert_user_error(hpcprobe("run", "hpl", "--dry-run", "--n", "30000", "--input",
                               str(DATA / "tiny-2c.xml")), "of the 3.7 GiB of the 1 node(s)")


def test_user_mistakes_are_one_line_and_exit_2(tmp_path):
    lib = tmp_path / "libblas.so.3"
    lib.write_text("not a library")
    for args, needle in ((("--pq", "3x3"), "--pq 3x3"), (("--n", "99999999"), "give N <="),
                         (("--n", "4"), "give N >= 64"), (("--n", "100", "--nb", "128"),
                                                          "give N >= 128"),
                         (("--blas", "nope"), "unknown"), (("--blas", str(lib)), "cannot be "
                                                                                 "loaded"),
                         (("--xhpl", str(tmp_path / "none")), "not an executable"),
                         (("--memory", "2"), "share of memory")):
        assert_user_error(hpcprobe("hpl", *args, "--quick", "--no-store"), needle)


def _fake_xhpl(tmp_path: Path, body: str) -> Path:
    """A stand-in xhpl: rank 0 (whatever the launcher) runs `body` in sh."""
    exe = tmp_path / "xhpl"
    exe.write_text("#!/bin/sh\nrank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}\n"
                   f'[ "$rank" = 0 ] || exit 0\n{body}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


@pytest.mark.skipif(not (MPIRUN and INSTALLED), reason="mpirun or a BLAS missing")
@pytest.mark.parametrize("body,needle,figure", [
    ("kill -SEGV $$", "exited with status", False),
    ("echo 'HPL ERROR: out of memory'; exit 1", "out of memory", False),
    ("echo hello", "printed no HPL result", False),
    ("cat <<'EOF'\n" + REPORT + "EOF", "residual check FAILED", True),
    # HPL_PROGRESS_REPORT lines first (they set the expected time), then the report
    ("echo 'Column=000000192 Fraction=0.050 Gflops=9.0e+01'; sleep 1; "
     "echo 'Column=000000384 Fraction=0.100 Gflops=9.0e+01'; sleep 1; cat <<'EOF'\n" + REPORT
     + "EOF", "residual check FAILED", True),
])
def test_xhpl_that_crashes_prints_nothing_or_fails_its_check(tmp_path, body, needle, figure):
    exe = _fake_xhpl(tmp_path, body)
    out = tmp_path / "run.json"
    r = hpcprobe("hpl", "--xhpl", str(exe), "--n", "1000", "--quick", "--no-store",
                 "--json", str(out), "--blas", sorted(INSTALLED)[0])
    assert r.code == 1, (r.out, r.err)
    assert "Traceback" not in r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    assert any(needle in e for e in doc["errors"]), doc["errors"]
    rmax = [m for m in doc["metrics"] if m["name"] == "rmax"]
    # the valid run of the report is kept, the failed one discarded
    assert [m["samples"] for m in rmax] == ([[88.34]] if figure else [])
    # DGEMM went on regardless
    assert any(m["name"] == "dgemm" for m in doc["metrics"])


@needs_hpcc
def test_a_whole_quick_run_leaves_hpcc_aside_and_the_dgemm_stands_in(tmp_path):
    out = tmp_path / "run.json"
    r = hpcprobe("run", "hpl", "--quick", "--no-store", "--json", str(out), "--blas",
                 sorted(INSTALLED)[0])
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    names = {m["name"] for m in doc["metrics"]}
    assert "rmax" not in names and "dgemm" in names
    assert any(w.startswith("hpl: quick profile: HPL not launched") for w in doc["warnings"])
    assert "DGEMM, " in r.out  # its verdict line


@needs_hpcc
def test_hpcc_runs_hpl_validated_against_the_measured_peak(tmp_path):
    out = tmp_path / "run.json"
    r = hpcprobe("hpl", "--n", "1200", "--quick", "--no-store", "--details", "--json", str(out),
                 "--blas", sorted(INSTALLED)[0], "--layout", "numa")
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    got = {m["name"]: m for m in doc["metrics"]}
    rmax = got["rmax"]
    assert rmax["params"]["n"] == 1200 and rmax["params"]["program"] == "hpcc"
    assert rmax["params"]["ranks"] == len(topology.discover().numa_nodes)
    assert all(s > 0 for s in rmax["samples"])
    assert all(0 <= s < 16 for s in got["residual"]["samples"])  # HPL's threshold
    assert {m["params"]["threads"] for m in doc["metrics"] if m["name"] == "dgemm"} >= {1}
    if "rpeak" in got:  # the flop model knows this CPU
        assert got["efficiency"]["params"]["basis"] == "measured clock"
        pct = sum(got["efficiency"]["samples"]) / len(got["efficiency"]["samples"])
        # above the model it must be a finding, never a silent figure
        assert pct <= 101 or any(f["kind"] == "above_peak" for f in doc["findings"])
    assert "HPL: Rmax" in r.out
    # the binding each rank really had, read from /proc while hpcc ran
    want = ";".join(format_cpulist(c) for c in layouts.ranks(topology.discover(), "numa").sets)
    assert rmax["params"]["binding"] == want


@needs_hpcc
@pytest.mark.skipif(not two_cpus(), reason="one rank per core needs two cores")
def test_tune_searches_block_sizes_in_one_launch(tmp_path):
    out = tmp_path / "run.json"
    r = hpcprobe("hpl", "--quick", "--tune", "--n", "1000", "--no-store", "--json", str(out),
                 "--blas", sorted(INSTALLED)[0])
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    search = [m for m in doc["metrics"] if m["name"] == "nb_search"]
    nbs = {m["params"]["nb"] for m in search}
    assert nbs >= set(inputs.NB_CANDIDATES)
    assert {m["params"]["n"] for m in search} == {1000}  # no larger than the problem asked for
    [rmax] = [m for m in doc["metrics"] if m["name"] == "rmax"]
    assert rmax["params"]["nb"] in nbs and rmax["params"]["ranks"] == 2


def test_a_cpu_the_flop_model_lacks_gets_a_measured_rpeak_model(monkeypatch):
    """A masked CPU with no table row: the model is one core's measured FMA throughput at the
    clock measured under the same load, said as such."""
    from hpcprobe.families.hpl import bench
    from hpcprobe.machine import flopmodel
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import RunContext

    monkeypatch.setattr(flopmodel, "identify",
                        lambda cpu: flopmodel.Identification(None, "unknown", "a masked CPU"))
    ctx = RunContext(topology.discover(), profiles.get("quick"), "scalar")
    model = bench._Model(ctx)
    assert model.per_cycle is None
    cpu = min(os.sched_getaffinity(0))
    clk = model.clock(ctx, (cpu,))
    model.measure(ctx, cpu, clk)
    if clk is None:  # every clock sample disturbed: no model, and it says so
        assert model.per_cycle is None
        return
    assert model.source == "measured" and model.per_cycle > 0
    assert model.params()["model_source"] == "measured"
    assert any("measured" in w and "FLOP/cycle" in w for w in ctx.warnings)
