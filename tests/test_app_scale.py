"""A user's application across MPI ranks and `hpcprobe scale app` (issue 49): LAMMPS known by
its output (recorded logs of Debian 12's LAMMPS, 29 Sep 2021 Update 2, on 1 and 2 ranks),
launched through the launcher registry, bound and read back, weak and strong; and the mistakes:
an application that is not MPI-aware, a figure of merit missing at one count, a weak command
without `{ranks}`."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe, needs_mpi
from hpcprobe.common.errors import MeasurementError
from hpcprobe.families.app import bench, known
from hpcprobe.results import model as results
from hpcprobe.tools import inrank

APP = DATA / "app"
EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "lj-melt.lmp"
needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
needs_lammps = pytest.mark.skipif(shutil.which("lmp") is None,
                                  reason="LAMMPS not installed (make system-deps: lammps)")


def _figures(report: known.Report) -> dict[str, float]:
    return {f.name: f.value for f in report.figures}


def test_lammps_output_gives_its_performance_loop_time_and_processes():
    lammps = known.of("lammps", ["lmp"])
    assert lammps is not None and known.of("x", ["/usr/bin/lmp_mpi"]) is lammps
    assert known.of("x", ["lmpx"]) is None
    one = lammps.read((APP / "lammps-lj-1rank.log").read_text())
    two = lammps.read((APP / "lammps-lj-2ranks.log").read_text())
    assert (one.procs, two.procs, one.threads) == (1, 2, 1)
    assert one.figures[0].name == "tau/day"  # the figure users quote comes first
    f1, f2 = _figures(one), _figures(two)
    assert set(f1) == {"tau/day", "timesteps/s", "atom-step/s", "loop_time"}
    # the work rate from the loop line (this release prints none): atoms x steps / loop time
    assert f1["atom-step/s"] == pytest.approx(4000 * 100 / f1["loop_time"])
    assert f2["atom-step/s"] == pytest.approx(8000 * 100 / f2["loop_time"])
    # a later release's line: the atom-step rate as printed, in its prefix
    newer = (APP / "lammps-lj-1rank.log").read_text().replace(
        "timesteps/s\n", "timesteps/s, 1.265 Matom-step/s\n")
    assert _figures(lammps.read(newer))["atom-step/s"] == pytest.approx(1.265e6)


def test_lammps_output_without_a_run_is_no_figure():
    lammps = known.of("lammps", [])
    assert lammps is not None
    with pytest.raises(MeasurementError, match="no `Loop time`"):
        lammps.read("LAMMPS (7 Jan 2022)\nERROR: Unknown command: rn 100\n")


def test_the_ranks_lines_are_read_and_taken_out_of_the_output():
    out = ('hpcprobe-rank: {"rank": 1, "host": "n1", "cpus": [1]}\nLoop time of 1\n'
           'hpcprobe-rank: {"rank": 0, "host": "n1", "cpus": [0]}\nhpcprobe-rank: oops\n')
    said, rest = inrank.read(out)
    assert [s["rank"] for s in said] == [1, 0]
    assert rest == "Loop time of 1\nhpcprobe-rank: oops\n"


def test_the_work_rate_of_a_count():
    """What `scale` takes as a count's rate: LAMMPS's atom-steps/s; a figure of merit,
    upside down where lower is better; from the wall time, the rank-sized problems an hour."""
    def m(name: str, unit: str, better: str, samples: list[float], **params: object
          ) -> results.Metric:
        return results.Metric("app", name, unit, params, samples, better)

    lmp = [m("app:lammps", "tau/day", "higher", [5.0], figure="tau/day"),
           m("app:lammps", "atom-step/s", "higher", [2e6], figure="atom-step/s")]
    assert (bench.rate(lmp), bench.rate_unit(lmp)) == ([2e6], "atom-step/s")
    assert bench.rate([m("app:x", "s", "lower", [10.0, 20.0], problem_ranks=4)]) == \
        [1440.0, 720.0]
    assert bench.rate_unit([m("app:x", "s", "lower", [1.0])]) == "rank-problems/h"
    assert bench.rate([m("app:x", "ms/step", "lower", [4.0])]) == [0.25]
    assert bench.rate([m("app:x", "TPS", "higher", [7.0])]) == [7.0]


@needs_mpi
@needs_two
@needs_lammps
def test_scale_app_lammps_weak_and_strong_on_one_and_two_ranks(tmp_path):
    """The shipped input, its atoms grown with {ranks} in weak mode: every count launched by
    the launcher, each rank bound to its core and read back, stored with the series."""
    db, out = tmp_path / "s.db", tmp_path / "s.json"
    r = hpcprobe("scale", "app", "lammps", "--ranks", "1,2", "--repeat", "2", "--quick",
                 "--db", str(db), "--json", str(out), "--", "lmp", "-in",
                 str(EXAMPLE), "-var", "ranks", "{ranks}", "-var", "steps", "40", "-log", "none")
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    results.validate(doc)
    rates = {(m["params"]["mode"], m["params"]["ranks"]): m for m in doc["metrics"]}
    assert set(rates) == {("weak", 1), ("weak", 2), ("strong", 1), ("strong", 2)}
    assert {m["unit"] for m in rates.values()} == {"atom-step/s"}
    assert "scaled speedup" in r.out and "efficiency %" in r.out
    runs = {(x["mode"], x["ranks"]): x["run_id"] for x in doc["provenance"]["scale"]["runs"]}
    for (mode, k), run_id in runs.items():
        shown = hpcprobe("show", run_id, "--db", str(db), "--json")
        assert shown.code == 0, shown.err
        run = json.loads(shown.out)
        size = k if mode == "weak" else 1
        assert run["provenance"]["app"]["lammps"]["command"][4:6] == ["ranks", str(size)]
        assert run["provenance"]["mpi"]["launcher"] in ("mpirun", "mpiexec")
        figs = {m["params"]["figure"]: m for m in run["metrics"]}
        assert set(figs) == {"tau/day", "timesteps/s", "atom-step/s", "loop_time"}
        p = figs["tau/day"]["params"]
        assert (p["ranks"], p["problem_ranks"], p["layout"], p["threads"]) == (k, size, "core", 1)
        assert len(p["cpus"].split(";")) == k
    with sqlite3.connect(db) as c:
        assert c.execute("select count(*) from runs").fetchone()[0] == 5


def _fake_lammps(tmp_path: Path, log: str) -> Path:
    """A stand-in `lmp` that prints a recorded log (each rank its own copy)."""
    exe = tmp_path / "lmp"
    exe.write_text(f"#!{sys.executable}\nimport sys\n"
                   f"sys.stdout.write(open({str(APP / log)!r}).read())\n")
    exe.chmod(0o755)
    return exe


@needs_mpi
@needs_two
def test_an_application_that_is_not_mpi_aware_gives_no_figure_at_that_count(tmp_path):
    """Each of the two ranks says it ran alone (LAMMPS built without MPI): no figure at two
    ranks, the count of one kept; said once, exit 1."""
    exe = _fake_lammps(tmp_path, "lammps-lj-1rank.log")
    out = tmp_path / "s.json"
    r = hpcprobe("scale", "app", "lammps", "--ranks", "1,2", "--mode", "strong", "--repeat", "1",
                 "--quick", "--no-store", "--json", str(out), "--", str(exe))
    assert r.code == 1, r.err
    doc = json.loads(out.read_text())
    assert [m["params"]["ranks"] for m in doc["metrics"]] == [1]
    said = [e for e in doc["errors"] if "each rank ran alone" in e]
    assert len(said) == 1 and "2 rank(s) started" in said[0] and "Traceback" not in r.err


@needs_mpi
@needs_two
def test_a_figure_of_merit_missing_at_one_count_keeps_the_others(tmp_path):
    script = tmp_path / "app.sh"
    script.write_text('#!/bin/sh\n[ "${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}" = 1 ] && '
                      'echo "rate = 42"\nexit 0\n')
    script.chmod(0o755)
    out = tmp_path / "s.json"
    r = hpcprobe("scale", "app", "toy", "--ranks", "1,2", "--mode", "strong", "--repeat", "1",
                 "--fom", r"rate = ([0-9.]+)", "--quick", "--no-store",
                 "--json", str(out), "--", str(script))
    assert r.code == 1, r.err
    doc = json.loads(out.read_text())
    assert [(m["params"]["ranks"], m["samples"]) for m in doc["metrics"]] == [(1, [42.0])]
    assert any("matched nothing" in e and "2 rank(s)" in e for e in doc["errors"]), doc["errors"]


def test_scale_app_bad_input_is_one_line(tmp_path):
    assert_user_error(hpcprobe("scale", "app", "lmp", "--mode", "weak", "--dry-run", "--",
                               "true"), "no {ranks} or {nodes}", "--mode strong")
    assert_user_error(hpcprobe("scale", "app", "--dry-run"), "app takes `NAME -- COMMAND`")
    assert_user_error(hpcprobe("scale", "cg", "x", "--dry-run"), "cg takes no values")
    assert_user_error(hpcprobe("scale", "app", "a b", "--dry-run", "--", "true"),
                      "an application's name")
    assert_user_error(hpcprobe("scale", "app", "x", "--dry-run", "--", "no-such-program-here"),
                      "not found")
    r = hpcprobe("scale", "app", "x", "--ranks", "1,2", "--dry-run", "--", "echo", "{ranks}")
    assert r.code == 0 and "`echo 2` 5 time(s) on 2 rank(s)" in r.out, r.err
    # nothing to grow the problem with: the default (both) is strong scaling alone
    r = hpcprobe("scale", "app", "x", "--ranks", "1,2", "--dry-run", "--", "echo", "hi")
    assert r.code == 0 and "app, strong, 2 rank(s)" in r.out and "weak" not in r.out, r.err

    assert_user_error(hpcprobe("app", "x", "y", "--dry-run", "--", "true"),
                      "y: more values than app takes before --")


def test_the_counts_in_the_command_are_those_it_runs_on_by_layout_and_hosts():
    """`{ranks}` and `{nodes}` without --ranks: the layout's ranks on the hosts given (as a
    campaign's `--scale app` runs it), planned for a recorded 2 x 4-NUMA node."""
    for extra, said in (((), "`echo 8 1` 5 time(s) on 8 rank(s)"),
                        (("--hosts", "a,b"), "`echo 16 2` 5 time(s) on 16 rank(s)")):
        r = hpcprobe("app", "x", "--layout", "numa", *extra, "--dry-run", "--input",
                     str(DATA / "epyc-2s-nps4-128c.xml"), "--", "echo", "{ranks}", "{nodes}")
        assert r.code == 0 and said in r.out, r.out + r.err


# -- HPCG: the real benchmark when the user has it (a stand-in writes HPCG 3.1's results file)

STANDIN = APP / "xhpcg-standin"


def test_hpcg_results_file_gives_the_rating_kernels_and_bandwidth(tmp_path):
    hpcg = known.of("hpcg", [str(STANDIN)])
    assert hpcg is not None and hpcg.name == "hpcg" and hpcg.rate == "rating"
    shutil.copy(APP / "HPCG-Benchmark_3.1_valid.txt", tmp_path)
    report = hpcg.read("", tmp_path, 0.0)
    got = _figures(report)
    assert got == {"rating": 2.944, "DDOT": 5.532, "WAXPBY": 6.014, "SpMV": 4.527, "MG": 2.731,
                   "bandwidth": 22.917, "optimization_time": 3.1e-08}
    assert report.figures[0].name == "rating" and (report.procs, report.threads) == (2, 1)
    assert any("under the 1800 s" in n for n in report.notes)
    assert any("reference kernels" in n for n in report.notes)


def test_an_invalid_hpcg_run_or_no_results_file_is_no_figure(tmp_path):
    hpcg = known.of("hpcg", [])
    assert hpcg is not None
    with pytest.raises(MeasurementError, match="no HPCG-Benchmark"):
        hpcg.read("", tmp_path, 0.0)
    shutil.copy(APP / "HPCG-Benchmark_3.1_invalid.txt", tmp_path)
    with pytest.raises(MeasurementError, match=r"INVALID \(Spectral Convergence Tests, "
                                               r"Reproducibility Information failed\)"):
        hpcg.read("", tmp_path, 0.0)


def test_hpcgs_local_grid_takes_a_quarter_of_the_memory():
    grid = known.hpcg_grid(known.Setup(2, 24 << 30, 60.0))
    side = grid[0]
    assert grid == (side,) * 3 and side % 8 == 0
    quarter = (24 << 30) / 4
    assert 2 * side ** 3 * known.HPCG_BYTES_PER_EQUATION <= quarter
    assert 2 * (side + 8) ** 3 * known.HPCG_BYTES_PER_EQUATION > quarter
    assert known.hpcg_grid(known.Setup(1, None, 60.0)) == (16, 16, 16)
    assert known.hpcg_grid(known.Setup(1, 1 << 40, 60.0, (32, 24, 16))) == (32, 24, 16)


def _hpcg(tmp_path: Path, mode: str, *args: str) -> tuple[object, dict]:
    out = tmp_path / f"{mode}.json"
    r = hpcprobe("app", "hpcg", "--repeat", "2", "--quick", "--no-store", "--json", str(out),
                 *args, "--", str(STANDIN), env={"HPCG_STANDIN": mode})
    return r, json.loads(out.read_text()) if out.exists() else {}


def test_app_hpcg_writes_hpcg_dat_for_the_node_and_stores_the_rating(tmp_path):
    r, doc = _hpcg(tmp_path, "valid", "--hpcg-time", "5")
    assert r.code == 0, r.err
    results.validate(doc)
    figs = {m["params"]["figure"]: m for m in doc["metrics"]}
    assert figs["rating"]["samples"] == [2.944, 2.944] and figs["rating"]["unit"] == "GFLOP/s"
    assert set(figs) == {"rating", "DDOT", "WAXPBY", "SpMV", "MG", "bandwidth",
                         "optimization_time"}
    given = doc["provenance"]["app"]["hpcg"]["input"]
    assert given["written"] is True and given["seconds"] == 5.0
    side = int(given["grid"].split("x")[0])
    assert side % 8 == 0 and side >= 16
    assert any("a quick look" in w for w in doc["warnings"])
    assert "its hpcg.dat written for this node" in hpcprobe(
        "app", "hpcg", "--dry-run", "--", str(STANDIN)).out


def test_hpcg_with_the_cg_proxy_shows_both_and_how_far_apart(tmp_path):
    """`app hpcg --with cg`: one run holds HPCG's rating and the CG proxy's rate, both on the
    one-screen answer, and the app's view sets them side by side with their ratio."""
    from hpcprobe import registry
    r, doc = _hpcg(tmp_path, "valid", "--hpcg-time", "5", "--with", "cg")
    assert r.code == 0, r.err
    run = results.Run.from_dict(doc)
    assert {"app", "cg"} <= set(run.benchmarks)
    assert "hpcg rating" in r.out and "CG " in r.out
    [table] = [b for v in registry.views() for b in v(run)
               if "its proxy" in getattr(b, "title", "")]
    rows = {row[0].split(":")[0]: row for row in table.rows}
    assert rows["HPCG's rating"][1].startswith("2.944")
    [cg] = [m for m in run.select("cg", "gflops")
            if f"CG {m.params['grid']}" in table.rows[1][0]]
    assert rows["proxy / real"][1] == f"{cg.summary.median / 2.944:.2f}"
    assert_user_error(hpcprobe("app", "hpcg", "--with", "app", "--dry-run", "--", str(STANDIN)),
                      "--with app: it is this command's own benchmark")
    assert_user_error(hpcprobe("app", "hpcg", "--with", "nope", "--dry-run", "--", str(STANDIN)),
                      "benchmark 'nope' is unknown")


def test_the_users_hpcg_dat_is_kept(tmp_path):
    (tmp_path / "hpcg.dat").write_text("HPCG benchmark input file\nmine\n16 16 16\n3\n")
    r, doc = _hpcg(tmp_path, "valid", "--cwd", str(tmp_path))
    assert r.code == 0, r.err
    assert doc["provenance"]["app"]["hpcg"]["input"] == {"file": str(tmp_path / "hpcg.dat"),
                                                         "written": False}
    assert "16x16x16" in (tmp_path / "hpcg.dat").read_text().replace(" ", "x")


@pytest.mark.parametrize("mode, said", [("invalid", "HPCG says its result is INVALID"),
                                        ("crash", "exited with 1")])
def test_an_invalid_or_crashed_hpcg_run_is_no_figure(tmp_path, mode, said):
    r, doc = _hpcg(tmp_path, mode)
    assert r.code == 1 and "Traceback" not in r.err, r.err
    assert doc["metrics"] == [] and said in doc["errors"][0], doc["errors"]


def test_a_hung_hpcg_run_times_out(tmp_path):
    r, doc = _hpcg(tmp_path, "hang", "--timeout", "1")
    assert r.code == 1 and doc["metrics"] == [] and "timed out" in doc["errors"][0]


@needs_mpi
@needs_two
def test_hpcg_on_two_ranks_each_bound(tmp_path):
    r, doc = _hpcg(tmp_path, "valid", "--ranks", "2")
    assert r.code == 0, r.err
    rating = next(m for m in doc["metrics"] if m["params"]["figure"] == "rating")
    assert (rating["params"]["ranks"], len(rating["params"]["cpus"].split(";"))) == (2, 2)


def test_hpcg_bad_input_is_one_line():
    for bad in ("100x100x100", "8x8x8", "16x16"):
        assert_user_error(hpcprobe("app", "hpcg", "--hpcg-grid", bad, "--", str(STANDIN)),
                          "--hpcg-grid", "multiple of 8")


def test_the_ranks_by_threads_sweep_example_runs_lammps_under_each_layout():
    """docs/examples/lammps-ranks.toml: a configuration's `layout` reaches the application's
    workload (its own dry run checks each command line)."""
    r = hpcprobe("sweep", str(EXAMPLE.parent / "lammps-ranks.toml"), "--dry-run")
    assert r.code == 0, r.err
    lines = [ln for ln in r.out.splitlines() if "hpcprobe app lammps" in ln]
    assert len(lines) == 2 and "--layout core" in lines[0] and "--layout socket" in lines[1]
