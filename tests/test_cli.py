"""The command line as a user meets it: output, exit codes, errors, nothing half-written."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe, interrupt_stalled, run_json, two_cpus
from hpcprobe import __version__


def test_topology_json_live():
    r = hpcprobe("topology", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert set(d["counts"]) == {"packages", "numa_nodes", "l3_domains", "cores", "pus"}
    assert d["counts"]["pus"] >= len(os.sched_getaffinity(0))


def test_topology_text_from_xml():
    r = hpcprobe("topology", "--input", str(DATA / "epyc-2s-nps4-128c.xml"))
    assert r.code == 0 and "8 NUMA domain(s)" in r.out and "L3 #31" in r.out


def test_plan_json_from_xml():
    r = hpcprobe("plan", "--placement", "one-per-l3", "--input",
                 str(DATA / "epyc-2s-nps4-128c.xml"), "--json")
    assert r.code == 0
    assert len(json.loads(r.out)["cpus"]) == 32
    r = hpcprobe("plan", "--placement", "spread", "--threads", "8", "--input",
                 str(DATA / "epyc-2s-nps4-128c.xml"), "--json")
    assert json.loads(r.out)["cpus"] == [0, 64, 16, 80, 32, 96, 48, 112]


def test_run_single_measurement_stores_and_reads_back(tmp_path):
    db, out = tmp_path / "r.sqlite", tmp_path / "run.json"
    r, doc = run_json(tmp_path, "memory", "--kernel", "triad", "--stores", "nt", "--threads",
                      "1", "--size", "8MiB", "--quick", "--db", str(db), "--tag", "t1")
    assert "triad" in r.out and "Stored as run" in r.out
    [bw] = [m for m in doc["metrics"] if m["name"] == "bandwidth"]
    assert bw["params"]["stores"] == "nt" and bw["params"]["threads"] == 1
    r = hpcprobe("list", "--db", str(db), "--json")
    assert json.loads(r.out)[0]["run_id"] == doc["run_id"]
    r = hpcprobe("show", "t1", "--db", str(db), "--json")
    assert json.loads(r.out) == doc
    r = hpcprobe("show", str(out))
    assert r.code == 0 and doc["run_id"] in r.out


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_a_run_document_on_standard_output_is_all_that_is_there(tmp_path, target):
    """`--json -` (or a name of standard output): the document alone on stdout, for a pipe;
    the tables and messages on stderr; the run stored as ever."""
    db = tmp_path / "r.sqlite"
    r = hpcprobe("run", "memory", "--kernel", "triad", "--threads", "1", "--size", "96KiB",
                 "--quick", "--db", str(db), "--json", target)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert "triad" in r.err and f"Stored as run {doc['run_id']}" in r.err
    assert f"Wrote {target}" not in r.err
    shown = hpcprobe("show", doc["run_id"], "--db", str(db), "--json")
    assert json.loads(shown.out) == doc


def test_the_command_line_starts_without_numpy_scipy_or_matplotlib():
    """Every command starts by building the whole parser (each family's options): what only
    a few need (NumPy for cg, dslash and the cluster verdict; SciPy for statistics;
    matplotlib for figures) is imported where it is used (issue 64: a tenth of a second and
    about a hundred files of every start, in every prolog of a fleet)."""
    code = ("import sys, hpcprobe.cli as c\n"
            "c.build_parser()\n"
            "loaded = [m for m in ('numpy.linalg', 'numpy._core', 'scipy', 'matplotlib')"
            " if m in sys.modules]\n"
            "print(loaded)\n"
            "from hpcprobe.families.dslash import kernel\n"  # NumPy loads where it is used
            "print(kernel.gamma().shape, 'numpy._core' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines() == ["[]", "(4, 4, 4) True"]


def test_the_version_is_the_installed_releases_without_importlib_metadata():
    """Read from the release's own METADATA beside the package, as importlib.metadata reads
    it (which costs a start 25 modules)."""
    import hpcprobe

    kept = Path(hpcprobe.__file__).resolve().parent.parent
    if not list(kept.glob("hpcprobe-*.dist-info")):
        pytest.skip("hpcprobe imported from a source tree (the suite imports its install)")
    from importlib.metadata import version

    assert hpcprobe._version() == version("hpcprobe") != "0+unknown"


def test_version_names_the_kernels_and_a_broken_install_is_one_line(tmp_path):
    from hpcprobe import native

    r = hpcprobe("--version")
    assert r.code == 0 and r.out.strip() == f"hpcprobe {__version__} (kernels {native.source_id()})"
    (tmp_path / "lib.so").write_text("not a library")
    (tmp_path / "rich").mkdir()  # a package the install lacks
    (tmp_path / "rich" / "__init__.py").write_text("raise ImportError('No module named rich')")
    broken = [({"HPCPROBE_NATIVE_LIB": str(tmp_path / "lib.so")}, "cannot load the native core"),
              ({"PYTHONPATH": str(tmp_path)}, "No module named rich; reinstall hpcprobe")]
    # `show` imports rich when it is parsed (a command's modules load when it runs: a missing
    # package is one line whenever it is met)
    for (env, said), args in itertools.product(broken, (["--version"], ["show", "latest"])):
        r = hpcprobe(*args, env=env)
        if args == ["--version"] and "PYTHONPATH" in env:  # it loads the native core alone
            assert r.code == 0 and r.out.startswith("hpcprobe "), r.err
            continue
        assert r.code == 1 and "Traceback" not in r.err, r.err
        assert r.err.startswith(f"hpcprobe: error: {said}") and r.err.count("\n") == 1, r.err


def _runs(db) -> int:
    if not db.exists():
        return 0
    return sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]


@pytest.mark.parametrize("args,needles", [
    (["--threads", "0"], ["--threads 0"]),
    (["--threads", "4096"], ["--threads 4096", "--oversubscribe"]),
    (["--threads", "two"], ["--threads"]),
    (["--size=-1GiB"], ["-1GiB", "positive"]),
    (["--size", "64TiB"], ["--size", "available"]),
    (["--size", "1k", "--threads", "1"], ["too small"]),
    (["--kernel", "daxpy"], ["daxpy", "kernels:"]),
    (["--placement", "diagonal"], ["diagonal", "unknown"]),
    (["--placement", "0,99999"], ["do not exist"]),
    (["--isa", "sve"], ["--isa", "sve"]),
    (["--kernel", "load", "--stores", "nt"], ["stores nothing"]),
    (["--profile", "forever"], ["forever", "profiles:"]),
    (["--placement", ""], ["--placement ''", "give a placement"]),
    (["--kernel", "triad,"], ["--kernel 'triad,'", "empty name"]),
    (["--tag", ""], ["--tag ''"]),
])
def test_run_user_errors(tmp_path, args, needles):
    db = tmp_path / "r.sqlite"
    r = hpcprobe("run", "memory", "--db", str(db), *args)
    assert_user_error(r, *needles)
    assert _runs(db) == 0
    # what the run refuses, its dry run refuses too (a 64 TiB working set included)
    assert_user_error(hpcprobe("run", "memory", "--dry-run", *args), *needles)


def test_unknown_benchmark(tmp_path):
    assert_user_error(hpcprobe("run", "teleport", "--db", str(tmp_path / "r.sqlite")),
                      "teleport", "benchmarks:")


def test_unwritable_db_fails_before_measuring(tmp_path):
    (tmp_path / "file").write_text("x")
    r = hpcprobe("run", "memory", "--kernel", "triad", "--size", "1MiB", "--db",
                 str(tmp_path / "file" / "r.sqlite"))
    assert_user_error(r, "--db")
    assert "GB/s" not in r.out


@pytest.mark.parametrize("benchmarks,sig", [
    (["memory", "numa", "--kernel", "triad", "--size", "1MiB"], signal.SIGINT),
    (["memory", "numa", "--kernel", "triad", "--size", "1MiB"], signal.SIGTERM),  # scancel
    (["numa"], signal.SIGINT),  # nothing measured yet
])
def test_an_interrupted_run_keeps_what_it_had_measured(tmp_path, benchmarks, sig):
    db, doc = tmp_path / "r.sqlite", tmp_path / "run.json"
    r = interrupt_stalled(sig, tmp_path / "stalled", "numa", 1, False, "run", *benchmarks,
                          "--db", str(db), "--json", str(doc))
    assert r.code == 130 and "Traceback" not in r.err, r.err
    if benchmarks == ["numa"]:  # the store it made, empty, is gone with it
        assert "nothing of this run was stored" in r.err and not db.exists()
        assert not doc.exists()
        return
    runs = sqlite3.connect(db).execute("select run_id from runs").fetchall()
    assert "interrupted; the figures measured before it are stored" in r.err
    run = json.loads(doc.read_text())
    assert run["metrics"] and {m["benchmark"] for m in run["metrics"]} == {"memory"}
    assert "numa: interrupted (Ctrl-C or SIGTERM); the 0 figure(s) it had measured are kept" \
        in run["errors"]
    assert run["provenance"]["interrupted"] == {"benchmark": "numa", "not_run": []}
    assert runs == [(run["run_id"],)]
    assert "INTERRUPTED during numa" in r.out and "numa: interrupted" in r.err  # the summary
    listed = json.loads(hpcprobe("list", "--db", str(db), "--json").out)
    assert [(x["run_id"], x["interrupted"]) for x in listed] == [(run["run_id"], True)]
    shown = hpcprobe("list", "--db", str(db)).out  # its cells fold at 100 columns
    assert "(interrupted)" in shown and "memory,numa" in "".join(shown.split())


def test_unwritable_json_path(tmp_path):
    r = hpcprobe("run", "memory", "--kernel", "triad", "--size", "1MiB", "--no-store",
                 "--json", str(tmp_path / "nodir" / "x.json"))
    assert_user_error(r, "--json")


@pytest.mark.parametrize("content", [
    "<topology", "not xml at all", "<html/>",
    # well-formed, but one PU twice: the model would count two cores and show one
    '<topology><object type="Machine" os_index="0"><object type="PU" os_index="0"/>'
    '<object type="PU" os_index="0"/></object></topology>'])
def test_malformed_xml_input(tmp_path, content):
    f = tmp_path / "bad.xml"
    f.write_text(content)
    assert_user_error(hpcprobe("topology", "--input", str(f)), str(f))
    assert_user_error(hpcprobe("plan", "--placement", "compact", "--input", str(f)), str(f))


def test_missing_xml_input(tmp_path):
    assert_user_error(hpcprobe("topology", "--input", str(tmp_path / "none.xml")), "cannot read")


def test_plan_errors():
    xml = str(DATA / "laptop-8c.xml")
    assert_user_error(hpcprobe("plan", "--placement", "one-per-numa", "--threads", "3",
                               "--input", xml), "--oversubscribe")
    r = hpcprobe("plan", "--placement", "one-per-numa", "--threads", "3", "--oversubscribe",
                 "--input", xml, "--json")
    assert r.code == 0 and json.loads(r.out)["cpus"] == [0, 0, 0]


def test_show_and_list_errors(tmp_path):
    db = tmp_path / "none.sqlite"
    assert_user_error(hpcprobe("list", "--db", str(db)), "no result store")
    assert_user_error(hpcprobe("show", "abc", "--db", str(db)), "no result store")
    assert not db.exists()


def test_bad_json_file_for_show(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"schema": "hpcprobe-result", "schema_version": 7}')
    assert_user_error(hpcprobe("show", str(f)), "schema version 7")


def test_usage_error_is_one_line():
    assert_user_error(hpcprobe("run", "--no-such-flag"), "--no-such-flag")
    assert_user_error(hpcprobe("plan"), "--placement")
    # an unknown option's value taken for the action: the option is named, not its value
    r = hpcprobe("hpl", "--hpl-n", "5")
    assert_user_error(r, "unrecognized arguments: --hpl-n")
    assert "'5'" not in r.err
    # a known flag that takes no value: the stray value is what is wrong
    assert_user_error(hpcprobe("hpl", "--tune", "5"), "invalid choice: '5'")
    # an unknown flag of a subcommand's subcommand: that command's help is named
    assert_user_error(hpcprobe("cluster", "run", "--nodes"),
                      "unrecognized arguments: --nodes (see `hpcprobe cluster run --help`)")
    assert_user_error(hpcprobe("--no-such-flag"), "(see `hpcprobe --help`)")


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_oversubscribe_allows_more_threads(tmp_path):
    n = len(os.sched_getaffinity(0)) + 1
    r = hpcprobe("run", "memory", "--kernel", "triad", "--stores", "regular", "--threads",
                 str(n), "--oversubscribe", "--size", "4MiB", "--quick", "--no-store")
    assert r.code == 0, r.err


def _commands() -> list[list[str]]:
    """Every command of the parser, and the top level."""
    import argparse

    from hpcprobe.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [[]] + [[name] for name in sub.choices]


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "hpcprobe")
def test_every_help_renders(command):
    r = hpcprobe(*command, "--help")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "usage: hpcprobe" in r.out


@pytest.mark.parametrize("args,needles", [
    (["mpi", "--np", "0"], ["--np 0", ">= 1"]),
    (["mpi", "--np", "-3"], ["--np -3"]),
    (["mpi", "--timeout", "-1"], ["--timeout -1"]),
    (["run", "latency", "--cpu", "-1"], ["--cpu -1"]),
    (["run", "numa", "--cpu-node", "-2"], ["--cpu-node -2"]),
    (["run", "compute", "--threads", "2,-1"], ["--threads 2,-1"]),
    (["plan", "--placement", "compact", "--threads", "0"], ["--threads 0"]),
    (["list", "--limit", "0"], ["--limit 0"]),
    (["compare", "a", "b", "--limit", "-1"], ["--limit -1"]),
])
def test_zero_and_negative_counts_are_usage_errors(tmp_path, args, needles):
    db = tmp_path / "r.sqlite"
    r = hpcprobe(*args, "--db", str(db)) if args[0] != "plan" else hpcprobe(*args)
    assert_user_error(r, *needles)
    assert not db.exists() or _runs(db) == 0


def test_option_errors_name_flags_on_the_command_line_and_fields_elsewhere():
    from hpcprobe import registry
    from hpcprobe.common.errors import OptionError

    exc = OptionError("<size_bytes> 1KiB: too small; use <size_bytes> >= 2KiB or <oversubscribe>")
    assert str(exc) == "size_bytes 1KiB: too small; use size_bytes >= 2KiB or oversubscribe"
    assert exc.render(registry.option_names()) == \
        "--size 1KiB: too small; use --size >= 2KiB or --oversubscribe"


def test_dry_run_lists_every_benchmarks_plan_and_measures_nothing(tmp_path):
    db = tmp_path / "r.sqlite"
    r = hpcprobe("run", "--dry-run", "--db", str(db))
    assert r.code == 0, r.err
    for name in ("memory", "latency", "numa", "frequency", "compute", "mpi"):
        assert f"\n{name}: " in r.out
    assert "triad regular" in r.out and not db.exists()


def test_dry_run_plans_for_a_recorded_machine(tmp_path):
    from conftest import DATA

    r = hpcprobe("run", "numa", "--dry-run", "--input", str(DATA / "epyc-2s-nps4-128c.xml"))
    assert r.code == 0, r.err
    assert "numa: 64 measurement(s)" in r.out  # 8 NUMA domains x 8
    assert "128 core(s) of " in r.out and "(ISA and kernel variants: this machine's)" in r.out
    # one CPU a core, arrays four times the 976.6 MiB of L3
    assert "the node sentinel: a DRAM triad on CPUs 0-127, 3.8 GiB, before the first" in \
        " ".join(r.out.split())
    assert_user_error(hpcprobe("run", "numa", "--input", str(DATA / "epyc-2s-nps4-128c.xml")),
                      "add --dry-run")
    # a recorded machine's free memory is not known (a synthetic one states 1 GiB a NUMA
    # domain, 8 GiB here): its own run checks the working set, the dry run lists it
    r = hpcprobe("run", "memory", "--dry-run", "--size", "64GiB", "--input",
                 str(DATA / "epyc-2s-nps4-128c.xml"))
    assert r.code == 0, r.err
    assert "triad regular" in r.out and "64 GiB" in r.out


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_document_that_cannot_be_written_loses_no_figures(tmp_path):
    full = tmp_path / "full"  # the kernel's /dev/full: the disk is full for every write
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    db = tmp_path / "r.sqlite"
    r = hpcprobe("run", "latency", "--size", "64KiB", "--quick", "--db", str(db), "--json",
                 str(full))
    assert_user_error(r, f"--json {full}: cannot write it (No space left on device)",
                      "the run is stored as", measured=True)
    (run_id,) = [row[0] for row in sqlite3.connect(db).execute("select run_id from runs")]
    assert f"stored as {run_id}" in r.err
    shown = hpcprobe("show", run_id, "--db", str(db), "--json")
    assert shown.code == 0 and json.loads(shown.out)["metrics"]
    # nowhere else to keep it: the error alone, as before
    r = hpcprobe("run", "latency", "--size", "64KiB", "--quick", "--no-store", "--json",
                 str(full))
    assert_user_error(r, "No space left on device", measured=True)
    assert "stored" not in r.err


@pytest.mark.parametrize("args,needles", [
    (["app", "x", "--unit", "", "--", "true"], ["--unit ''"]),
    (["run", "iperf3", "--iperf-server", "h:99999"], ["--iperf-server 'h:99999'", "65535"]),
    (["run", "iperf3", "--iperf-server", ":5201"], ["--iperf-server ':5201'"]),
    (["run", "pgbench", "--pg-url", "notaurl"], ["--pg-url 'notaurl'", "postgresql://"]),
    (["export", "--metric", "nosuch.metric"], ["no benchmark 'nosuch'", "benchmarks: memory"]),
])
def test_values_that_say_nothing_are_refused_before_anything_runs(tmp_path, args, needles):
    db = tmp_path / "r.sqlite"
    assert_user_error(hpcprobe(*args, "--db", str(db)), *needles)
    assert not db.exists()


@pytest.mark.parametrize("argv", [["--", "false"], ["--timeout", "1", "--", "sleep", "5"]])
def test_an_application_that_measured_nothing_is_not_stored(tmp_path, argv):
    db = tmp_path / "r.sqlite"
    r = hpcprobe("app", "nothing", "--db", str(db), *argv)
    assert r.code == 1 and "error: app nothing:" in r.err and "Not stored" in r.err, r.err
    assert not db.exists()  # the store this run opened holds nothing: not left behind
    assert "Stored as" not in r.out


def test_json_takes_a_file_in_every_command(tmp_path):
    out = tmp_path / "topo.json"
    r = hpcprobe("topology", "--json", str(out))
    assert r.code == 0 and json.loads(out.read_text())["counts"]["cores"] >= 1
    r = hpcprobe("plan", "--placement", "compact", "--threads", "1", "--json")
    assert r.code == 0 and json.loads(r.out)
    assert_user_error(hpcprobe("topology", "--json", "/nonexistent/dir/t.json"), "--json")


def test_run_family_help_shows_that_familys_options_only():
    r = hpcprobe("run", "memory", "--help")
    assert r.code == 0 and "narrowing the memory benchmark" in r.out
    assert "narrowing the latency benchmark" not in r.out and "--details" in r.out
    whole = hpcprobe("run", "--help")
    assert "narrowing the latency benchmark" in whole.out
    assert len(whole.out.splitlines()) > 2 * len(r.out.splitlines())
