"""User applications (`hpcprobe app`) and the external-tool families (fio, iperf3, pgbench):
their parsers on recorded output, real runs at small sizes where the tool is installed, the
tool's version in the provenance, failures with their last lines, and bad input: one line each
(a pattern that never matches, a command not found, a tool absent)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe, interrupt_at, run_json
from hpcprobe.common.errors import MeasurementError
from hpcprobe.families.fio import bench as fio
from hpcprobe.families.iperf3 import bench as iperf3
from hpcprobe.families.pgbench import bench as pgbench
from hpcprobe.tools import pgserver

TOOLS = DATA / "tools"


def app(tmp_path: Path, *args: str) -> tuple[object, dict]:
    out = tmp_path / "app.json"
    r = hpcprobe("app", *args[:args.index("--")], "--no-store", "--json", str(out),
                 *args[args.index("--"):])
    return r, json.loads(out.read_text()) if out.exists() else {}


# -- hpcprobe app


def test_an_interrupted_app_keeps_the_repetitions_that_ended(tmp_path):
    """Ctrl-C in the third of five repetitions: the two that ended are the figure's samples,
    stored and marked interrupted; the third's program does not outlive hpcprobe."""
    count, marker, db, doc = (tmp_path / n for n in ("count", "stalled", "r.sqlite", "a.json"))
    script = (f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}; "
              f"if [ $n -ge 3 ]; then echo $$ > {count}.pid; mv {count}.pid {marker}; "
              "exec sleep 600; fi; echo value = $n")
    cli = Path(sys.executable).parent / "hpcprobe"
    r = interrupt_at(signal.SIGINT, marker, [
        str(cli), "app", "x", "--repeat", "5", "--warmup", "0", "--fom", "value = ([0-9]+)",
        "--db", str(db), "--json", str(doc), "--", "sh", "-c", script])
    assert r.code == 130 and "Traceback" not in r.err, r.err
    run = json.loads(doc.read_text())
    [m] = run["metrics"]
    assert m["samples"] == [1.0, 2.0]
    assert "x: interrupted after 2 of 5 repetition(s); those are kept" in run["warnings"]
    assert run["provenance"]["interrupted"] == {"benchmark": "app", "not_run": []}
    assert sqlite3.connect(db).execute("select run_id from runs").fetchall() == \
        [(run["run_id"],)]
    with pytest.raises(ProcessLookupError):  # the stalled repetition's sleep was stopped
        os.kill(int(marker.read_text()), 0)


def test_an_applications_figure_of_merit_is_stored_per_repetition(tmp_path):
    r, doc = app(tmp_path, "oltp", "--fom", r"TPS = ([0-9.]+)", "--unit", "tx/s", "--repeat",
                 "4", "--env", "TPS_SEEN=1234.5", "--", "sh", "-c",
                 'echo "warming up"; echo "TPS = $TPS_SEEN"; echo "TPS = 999"')
    assert r.code == 0, r.err
    [m] = doc["metrics"]
    assert (m["benchmark"], m["name"], m["unit"], m["better"]) == ("app", "app:oltp", "tx/s",
                                                                  "higher")
    assert m["samples"] == [999.0] * 4  # the last match counts
    assert doc["provenance"]["app"]["oltp"]["command"][:2] == ["sh", "-c"]
    assert doc["provenance"]["app"]["oltp"]["env"] == {"TPS_SEEN": "1234.5"}


def test_wall_time_in_its_working_directory_lower_is_better(tmp_path):
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "input.txt").write_text("x\n")
    r, doc = app(tmp_path, "cat", "--repeat", "2", "--warmup", "1", "--cwd",
                 str(tmp_path / "here"), "--", "cat", "input.txt")
    assert r.code == 0, r.err
    [m] = doc["metrics"]
    assert m["unit"] == "s" and m["better"] == "lower" and len(m["samples"]) == 2
    assert all(0 < x < 30 for x in m["samples"])


def test_a_failing_application_is_reported_with_its_last_lines_and_not_counted(tmp_path):
    r, doc = app(tmp_path, "bad", "--repeat", "3", "--", "sh", "-c",
                 "echo step one; echo out of memory >&2; exit 7")
    assert r.code == 1
    assert doc["metrics"] == []
    assert "exited with 7" in doc["errors"][0] and "out of memory" in doc["errors"][0]


def test_a_timeout_is_a_failure(tmp_path):
    r, doc = app(tmp_path, "slow", "--repeat", "1", "--timeout", "0.5", "--", "sleep", "20")
    assert r.code == 1 and "timed out" in doc["errors"][0]


def test_app_bad_input_is_one_line(tmp_path):
    assert_user_error(hpcprobe("app", "x", "--fom", "X=([0-9]+)", "--no-store", "--", "echo",
                               "nothing here"), "matched nothing", "nothing here")
    assert_user_error(hpcprobe("app", "x", "--no-store", "--", "no-such-program-here"),
                      "command 'no-such-program-here' not found")
    assert_user_error(hpcprobe("app", "x", "--fom", "no group", "--", "true"), "has no group")
    assert_user_error(hpcprobe("app", "x", "--no-store"), "needs a name and a command")
    assert_user_error(hpcprobe("app", "x y", "--", "true"), "an application's name")
    assert_user_error(hpcprobe("app", "x", "--cwd", str(tmp_path / "none"), "--", "true"),
                      "no such directory")
    assert_user_error(hpcprobe("app", "x", "--env", "1=2", "--", "true"), "NAME=VALUE")
    assert_user_error(hpcprobe("list", "--", "true"), "only app, scale take a command after --")


def test_apps_are_not_in_the_default_run():
    r = hpcprobe("run", "--dry-run")
    assert r.code == 0 and "app:" not in r.out
    for tool in ("fio:", "iperf3:", "pgbench:"):
        assert tool not in r.out


# -- parsers on recorded output


def test_fio_json_gives_iops_bandwidth_and_clat_percentiles_per_direction():
    got = fio.parse(json.loads((TOOLS / "fio-randrw.json").read_text()))
    by = {(p["direction"], name, p.get("percentile")): v for p, name, v, _ in got}
    assert by[("read", "iops", None)] == pytest.approx(28736.263736)
    assert by[("write", "iops", None)] == pytest.approx(28780.21978)
    assert by[("read", "clat", 99.0)] == pytest.approx(98.816)  # ns -> us
    assert {k[2] for k in by if k[1] == "clat"} == {50.0, 99.0, 99.9}
    with pytest.raises(MeasurementError, match="no I/O"):
        fio.parse({"jobs": []})


def test_iperf3_json_gives_throughput_and_retransmits_or_its_error():
    got = iperf3.parse(json.loads((TOOLS / "iperf3-client.json").read_text()))
    assert got == {"throughput": pytest.approx(22.757261343876976), "retransmits": 10}
    # recorded over loopback (iperf3 3.12, -u -b 200M), with 3 of its 763 datagrams lost
    udp = json.loads((TOOLS / "iperf3-udp.json").read_text())
    assert iperf3.parse(udp) == {"throughput": pytest.approx(0.199978675966),
                                 "jitter": pytest.approx(0.0022477882), "lost": 300 / 763}
    udp["end"]["sum_received"]["packets"] = 0
    with pytest.raises(MeasurementError, match="no UDP datagram"):
        iperf3.parse(udp)
    with pytest.raises(MeasurementError, match="unable to connect"):
        iperf3.parse(json.loads((TOOLS / "iperf3-refused.json").read_text()))


def test_iperf3_asks_again_while_the_server_it_started_starts_or_ends_a_test(tmp_path):
    """The server hpcprobe started refuses the client while it starts and says it is busy
    while it ends the repetition before (iperf3 runs one test at a time): both are asked again
    until START_S; a user's server (--iperf-server) is asked once."""
    said = tmp_path / "said"
    exe = tmp_path / "iperf3"
    recorded = TOOLS / "iperf3-client.json"
    exe.write_text(f"""#!/bin/sh
n=$(cat {said} 2>/dev/null || echo 0); echo $((n + 1)) > {said}
case $n in
0) cat {TOOLS / "iperf3-refused.json"};;
1) echo '{{"error": "the server is busy running a test. try again later"}}';;
*) cat {recorded};;
esac
""")
    exe.chmod(0o755)
    got = iperf3.once(str(exe), iperf3.IperfOptions(time_s=1), None, "127.0.0.1", 1, 30.0)
    assert said.read_text().strip() == "3" and got == iperf3.parse(json.loads(
        recorded.read_text()))
    said.unlink()
    with pytest.raises(MeasurementError, match="unable to connect"):
        iperf3.once(str(exe), iperf3.IperfOptions(time_s=1, server="127.0.0.1:1"), None,
                    "127.0.0.1", 1, 30.0)
    assert said.read_text().strip() == "1"


def test_a_figure_of_zero_is_shown_with_its_ci_in_its_own_unit():
    """No datagram lost, no retransmits: a median of 0 has no relative CI."""
    from hpcprobe.results.model import Metric
    from hpcprobe.viewkit.table import cell

    assert cell(Metric("iperf3", "lost", "%", {}, [0.0] * 5, "lower"), 2) == "0.00 ±0.00"
    assert cell(Metric("iperf3", "lost", "%", {}, [0, 0, 0, 0, 0, 0, 0, 0.5], "lower"),
                2) == "0.00 ±0.25"
    assert cell(Metric("iperf3", "jitter", "ms", {}, [2.0] * 5, "lower"), 1) == "2.0 ±0.0%"


def test_pgbench_summary_gives_tps_and_latency():
    assert pgbench.parse((TOOLS / "pgbench-15.txt").read_text()) == (6834.372686, 0.293)
    with pytest.raises(MeasurementError):
        pgbench.parse("connection refused")


# -- real runs where the tool is installed


needs = {t: pytest.mark.skipif(shutil.which(t) is None, reason=f"{t} not installed "
                               "(make system-deps)") for t in ("fio", "iperf3", "pgbench")}


@needs["fio"]
def test_fio_runs_in_a_private_directory_and_records_its_version(tmp_path):
    r, doc = run_json(tmp_path, "fio", "--fio-dir", str(tmp_path), "--fio-size", "8MiB",
                      "--fio-runtime", "0.5", "--fio-buffered", "--fio-engine", "psync",
                      "--fio-iodepth", "1", "--repeat", "2", "--no-store")
    names = {m["name"] for m in doc["metrics"]}
    assert names == {"iops", "bandwidth", "clat"}
    assert all(len(m["samples"]) == 2 and min(m["samples"]) > 0 for m in doc["metrics"])
    assert doc["provenance"]["tools"]["fio"][0].isdigit()
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # its files removed


@needs["fio"]
def test_fio_bad_input(tmp_path):
    assert_user_error(hpcprobe("run", "fio", "--fio-dir", str(tmp_path / "none")),
                      "no such directory")
    assert_user_error(hpcprobe("run", "fio", "--fio-dir", str(tmp_path), "--fio-size",
                               "900000GiB"), "does not fit")


@needs["iperf3"]
def test_iperf3_on_loopback_starts_and_stops_its_server(tmp_path):
    r, doc = run_json(tmp_path, "iperf3", "--iperf-time", "1", "--repeat", "2",
                      "--no-store")
    [tput] = [m for m in doc["metrics"] if m["name"] == "throughput"]
    assert tput["params"]["server"] == "loopback" and min(tput["samples"]) > 0
    assert doc["provenance"]["tools"]["iperf3"][0].isdigit()
    assert_user_error(hpcprobe("run", "iperf3", "--iperf-peer", "n2"), "inside a Slurm "
                      "allocation")
    for rate in ("fast", "0", "-5M", "10X"):
        assert_user_error(hpcprobe("run", "iperf3", f"--iperf-udp={rate}"), "a bitrate a stream")
    # no server there: the run fails with iperf3's reason, named once
    r = hpcprobe("run", "iperf3", "--iperf-server", "127.0.0.1:1", "--repeat", "1", "--no-store")
    assert r.code == 1 and "error: iperf3: unable to connect to server" in r.err, r.err


@needs["iperf3"]
def test_iperf3_over_udp_gives_jitter_and_loss(tmp_path):
    r, doc = run_json(tmp_path, "iperf3", "--iperf-time", "1", "--repeat", "2",
                      "--iperf-udp", "100m", "--no-store")
    by = {m["name"]: m for m in doc["metrics"]}
    assert set(by) == {"throughput", "jitter", "lost"}
    assert by["throughput"]["params"] == {"streams": 1, "reverse": False, "protocol": "udp",
                                          "rate": "100M", "server": "loopback"}
    assert all(0 < s <= 0.1 * 1.05 for s in by["throughput"]["samples"])  # at most the rate
    assert all(0 <= s <= 100 for s in by["lost"]["samples"])
    assert by["jitter"]["better"] == "lower" and min(by["jitter"]["samples"]) >= 0
    assert "UDP throughput received" in r.out


@needs["pgbench"]
def test_pgbench_against_a_throwaway_postgresql(tmp_path):
    if pgserver.bin_dir() is None:
        pytest.skip("no PostgreSQL server binaries (make system-deps)")
    running = set(Path("/tmp").glob("hpcprobe-pg-*/data/postmaster.pid"))  # the suite's own
    r, doc = run_json(tmp_path, "pgbench", "--pg-time", "1", "--repeat", "2", "--pg-clients",
                      "2", "--quick", "--no-store")
    tps = [m for m in doc["metrics"] if m["name"] == "tps"][0]
    assert tps["params"] == {"mode": "tpcb-like", "scale": 1, "clients": 2}
    assert len(tps["samples"]) == 2 and min(tps["samples"]) > 0
    assert set(doc["provenance"]["tools"]) >= {"pgbench", "postgresql"}
    assert set(Path("/tmp").glob("hpcprobe-pg-*/data/postmaster.pid")) <= running  # stopped
    # tables of 15 PB: refused before the server starts, by the dry run as by the run
    for extra in (("--dry-run",), ()):
        assert_user_error(hpcprobe("run", "pgbench", "--pg-scale", "1000000000", "--no-store",
                                   *extra), "--pg-scale 1000000000", "TiB", "free in")


def test_an_absent_tool_is_one_line_and_names_its_package(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {"PATH": str(bare)}
    for family, package in (("fio", "fio"), ("iperf3", "iperf3"), ("pgbench", "postgresql")):
        r = hpcprobe("run", family, "--no-store", env=env)
        assert_user_error(r, f"needs {family}, which is not installed", f"package {package}")
    assert os.environ["PATH"]  # untouched
