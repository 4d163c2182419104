"""What a careless user's input and a busy or odd node can do to a verdict (issue 61): references
that `reference make` writes are the ones `--against` reads (one tolerance rule, bad values
refused with their key named), `--against` that judges nothing exits 3, fewer than three
previous runs are not judged, tags cannot reach a script's lines, and stored strings cannot
drive the terminal."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from conftest import DATA, hpcprobe
from hpcprobe import cli, registry
from hpcprobe.analysis import reference
from hpcprobe.analysis.verdict import Headline
from hpcprobe.results import model as results

PROBE = DATA / "cluster" / "probe-quick.json"


def _scaled(run: results.Run, benchmark: str, factor: float, run_id: str) -> results.Run:
    """The run with another id, one family's figures times `factor`."""
    out = copy.deepcopy(run)
    out.run_id = run_id
    out.metrics = [dataclasses.replace(m, samples=[x * factor for x in m.samples])
                   if m.benchmark == benchmark else m for m in out.metrics]
    return out


def test_a_figure_too_noisy_to_be_a_reference_is_left_out_and_said(tmp_path):
    """Two runs whose DRAM triads differ tenfold would make a tolerance of 2.5 (every reader
    refused such a file): the figure is left out, named, and the file written is read back."""
    run = results.read_json(PROBE)
    docs = []
    for i, factor in enumerate((1.0, 10.0)):
        docs.append(tmp_path / f"r{i}.json")
        results.write_json(_scaled(run, "memory", factor, f"{i:012x}"), docs[-1])
    r = hpcprobe("reference", "make", *map(str, docs), "-o", str(tmp_path / "ref.toml"))
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    assert "left out, too noisy to be a reference: memory.dram_triad_all" in flat, r.out
    assert "rest on fewer than 3 runs" in flat, r.out
    groups = reference.load(str(tmp_path / "ref.toml"), registry.figure_units)
    assert groups and not any(k.startswith("memory.") for g in groups for k in g.figures)
    assert any(k.startswith("compute.") for g in groups for k in g.figures)
    shown = hpcprobe("reference", "show", str(tmp_path / "ref.toml"))
    assert shown.code == 0, shown.err


def _ref_text(figure: str = "", hardware: str = "") -> str:
    return ('format = "hpcprobe-reference"\nversion = 1\n'
            '[[hardware]]\ncpu = "X"\nsockets = 1\ncores = 2\nprofile = "quick"\n'
            f'{hardware}[hardware.figures."memory.dram_triad_all"]\nlabel = "DRAM triad"\n'
            'unit = "GB/s"\nbetter = "higher"\nexpected = 80.0\ntolerance = 0.05\nruns = 3\n'
            f'{figure}')


BAD_REFERENCES = [
    (_ref_text().replace("expected = 80.0", "expected = nan"), "'memory.dram_triad_all'"),
    (_ref_text().replace("tolerance = 0.05", "tolerance = inf"), "'memory.dram_triad_all'"),
    (_ref_text().replace("tolerance = 0.05", "tolerance = 2.535"), "tolerance a fraction"),
    (_ref_text().replace('unit = "GB/s"', 'unit = "MB/s"'), "unit 'MB/s' is not its figure"),
    (_ref_text().replace("cores = 2", 'cores = "two"'), "hardware 1: cpu (text)"),
    (_ref_text(hardware='devices = [1, "a"]\n'), "is not a list of device names"),
    (_ref_text().replace("runs = 3", 'runs = "3"'), "'memory.dram_triad_all'"),
    (_ref_text() + _ref_text().split("version = 1\n")[1], "the same hardware and profile"),
]


@pytest.mark.parametrize(("text", "needle"), BAD_REFERENCES,
                         ids=[n for _, n in BAD_REFERENCES])
def test_a_bad_reference_is_refused_with_its_key_named(tmp_path, text, needle):
    ref = tmp_path / "ref.toml"
    ref.write_text(text)
    for args in (("reference", "show", str(ref)), ("show", str(PROBE), "--against", str(ref))):
        r = hpcprobe(*args)
        assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
        assert needle in r.err, r.err


@pytest.fixture
def toy_headlines(monkeypatch: pytest.MonkeyPatch, toy_family: None) -> None:
    """The toy family's figure is a headline (`toy.items`), judged like any."""
    monkeypatch.setattr(registry, "pickers", lambda: [lambda run: [
        Headline("toy.items", "toy items", m) for m in run.metrics if m.benchmark == "toy"]])


def _toy_reference(path: Path, cpu: str | None = None) -> Path:
    from hpcprobe.machine import provenance, topology
    from hpcprobe.native import best_isa

    topo = topology.discover()
    run = results.Run("x", "2026-11-28T00:00:00+00:00", "h", "default", [],
                      provenance.collect(topo, best_isa()), topo.to_dict())
    hw = reference.hardware(run, registry.hardware_labels)
    if cpu:
        hw["cpu"] = cpu
    from hpcprobe.analysis.verdict import Expected

    e = Expected("toy.items", "toy items", "items", "higher", 1.0, 0.05, 5)
    path.write_text(reference.to_toml([reference.Group(hw, "default", ["r"], ["h"],
                                                       {"toy.items": e})], "test"))
    return path


@pytest.mark.usefixtures("toy_headlines")
def test_against_a_reference_that_judges_nothing_exits_3(tmp_path, capsys):
    """`run --against ref.toml || alert` must not pass without judging: a reference of
    another CPU judges nothing (exit 3, why on stderr); of this one, the figure is judged."""
    same = _toy_reference(tmp_path / "same.toml")
    other = _toy_reference(tmp_path / "other.toml", cpu="Some Other CPU 9999")
    assert cli.main(["run", "toy", "--no-store", "--against", str(same)]) == 0
    capsys.readouterr()
    assert cli.main(["run", "toy", "--no-store", "--against", str(other)]) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "judged nothing" in err and "has no figures for this hardware" in err, err


@pytest.mark.usefixtures("toy_headlines")
def test_fewer_than_three_previous_runs_are_not_judged(tmp_path, capsys, monkeypatch):
    """One or two previous runs say nothing of how far a figure moves: not judged, with why;
    from the third on, judged (this guest's own noise, the sentinel and steal, kept out)."""
    from hpcprobe.machine import sentinel
    from hpcprobe.measure import runner

    monkeypatch.setattr(sentinel, "finding", lambda *a: None)
    monkeypatch.setattr(runner.steal, "read", lambda: None)
    db = str(tmp_path / "s.sqlite")
    for i in range(4):
        time.sleep(1.1)  # each run of its own second: a reference is made of runs before it
        assert cli.main(["run", "toy", "--db", db]) == 0
        out = " ".join(capsys.readouterr().out.split())
        if i in (1, 2):
            assert f"{i} run(s), 3 needed" in out, out
        if i == 3:
            assert "run(s), 3 needed" not in out and " ok" in out, out


@pytest.mark.parametrize("tag", ["x\ntouch /tmp/owned\n#", "a\tb", "esc\x1b[2J"])
def test_a_tag_is_printable_on_one_line(tag):
    for args in (("run", "--dry-run", "--tag", tag), ("check", "--state-only", "--tag", tag),
                 ("cluster", "run", "--dry-run", "--tag", tag)):
        r = hpcprobe(*args)
        assert r.code == 2 and "printable, on one line" in r.err and "Traceback" not in r.err, \
            (args, r.err)


def test_stored_strings_cannot_drive_the_terminal(tmp_path):
    """A received document whose host, tag and warnings carry escape sequences (clear the
    screen, erase a line) is shown without them."""
    doc = json.loads(PROBE.read_text())
    doc["host"], doc["run_id"] = "n1\x1b[2J", "0123456789ab"
    doc["warnings"] = ["fine\x1b[1A\x1b[2Kall ok\x07"]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    for args in (("show", str(path), "--details"), ("compare", str(PROBE), str(path))):
        r = hpcprobe(*args)
        assert r.code in (0, 1), r.err
        assert "\x1b" not in r.out + r.err and "\x07" not in r.out + r.err, args
        assert "n1" in r.out


def test_non_utf8_inputs_are_one_line(tmp_path):
    binary = tmp_path / "bin.dat"
    binary.write_bytes(b"\xff\xfe\x00garbage\x80")
    for args in (("show", str(binary)), ("reference", "make", str(binary), "-o",
                                          str(tmp_path / "r.toml")),
                 ("reference", "show", str(binary)), ("import", str(binary)),
                 ("show", str(PROBE), "--against", str(binary)),
                 ("run", "--dry-run", "--input", str(binary))):
        r = hpcprobe(*args, env={"XDG_DATA_HOME": str(tmp_path / "data")})
        assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, \
            (args, r.err)
    assert not (tmp_path / "r.toml").exists() and not os.path.exists(tmp_path / "data" /
                                                                         "hpcprobe")


#: `hpcprobe ARGS` whose toy-like run stalls after measuring (marker 1) and whose store write
#: stalls too (marker 2): the test interrupts it at each
_TWICE = """
import dataclasses, pathlib, sys, time
from hpcprobe import cli, registry
from hpcprobe.commands import output
first, second = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
real_store = output._store
def slow_store(*a, **k):
    second.touch()
    time.sleep(3)
    return real_store(*a, **k)
output._store = slow_store
real = registry.FAMILIES["frequency"].run
def stall(ctx, options):
    real(ctx, options)
    first.touch()
    time.sleep(600)
registry.FAMILIES["frequency"] = dataclasses.replace(registry.FAMILIES["frequency"], run=stall)
sys.exit(cli.main(sys.argv[3:]))
"""


def test_a_second_sigterm_keeps_what_the_first_kept(tmp_path):
    """SIGTERM once the first family measured (a job's time limit), then again while the run
    is being stored (scancel): the run is stored whole, and said so; never "nothing stored"."""
    import signal
    import subprocess
    import sys

    from hpcprobe.results.store import Store

    first, second, db = tmp_path / "m1", tmp_path / "m2", tmp_path / "s.sqlite"
    p = subprocess.Popen([sys.executable, "-c", _TWICE, str(first), str(second), "run",
                          "frequency", "numa", "--quick", "--db", str(db)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for marker in (first, second):
        deadline = time.monotonic() + 300
        while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), p.communicate()
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    assert "nothing of this run was stored" not in err and "Traceback" not in err, err
    with Store.open(str(db), create=False) as st:
        [info] = st.runs()
        assert st.load(info.run_id).provenance["interrupted"]["benchmark"] == "frequency"


def _damaged(tmp_path: Path) -> Path:
    """A store of three runs whose pages were overwritten (a disk, a copy cut short)."""
    from hpcprobe.results.store import Store

    db = tmp_path / "s.sqlite"
    with Store.open(str(db)) as st:
        for i in range(3):
            st.save(dataclasses.replace(results.read_json(PROBE), run_id=f"{i:012x}"))
    data = bytearray(db.read_bytes())
    page = 4096
    data[3 * page:6 * page] = b"\xa5" * (3 * page)  # past the header: it still opens
    db.write_bytes(bytes(data))
    return db


def test_a_damaged_store_is_said_before_measuring_and_by_every_reader(tmp_path):
    """A damaged store: `run` refuses it in one line with the recovery command before
    measuring; the readers say the same line."""
    db = _damaged(tmp_path)
    for args in (("run", "frequency", "--quick", "--json", str(tmp_path / "run.json")),
                 ("check", "--state-only", "--counters", str(tmp_path / "c.json")),
                 ("show", "latest"),
                 ("history",), ("compare", "000000000000", "000000000001"),
                 ("export",), ("list",)):
        r = hpcprobe(*args, "--db", str(db))
        assert r.code == 2 and r.err.count("\n") == 1 and "Traceback" not in r.err, \
            (args, r.err)
        assert "the store is damaged" in r.err and ".recover" in r.err, r.err
    assert not (tmp_path / "run.json").exists()  # refused before anything was measured


def test_a_read_that_meets_the_damage_before_the_check_ends_in_the_checks_line(tmp_path,
                                                                                 monkeypatch):
    """The check reads the file beside the command (a fleet's gigabyte store: 1.4 s); a read
    that fails on a damaged page before the check has answered ends in the check's line, not
    SQLite's error, and nothing is written to the store before its answer."""
    import sqlite3

    from hpcprobe.common.errors import OptionError
    from hpcprobe.results import sqlite as backend
    from hpcprobe.results.store import Selection, Store

    db = _damaged(tmp_path)
    check = backend.SqliteStore._quick_check
    monkeypatch.setattr(backend.SqliteStore, "_quick_check",
                        lambda self: (time.sleep(0.5), check(self)))
    read_first = []
    with pytest.raises(OptionError, match="the store is damaged") as caught:
        with Store.open(str(db), create=False) as st:
            try:
                st.load_all(Selection())
            except sqlite3.DatabaseError:
                read_first.append(True)
                raise
    assert read_first and ".recover" in str(caught.value)
    with pytest.raises(OptionError, match="the store is damaged"):
        with Store.open(str(db), create=False) as st:
            st.keep("steps", {"k": ("d", "[]")})  # waits for the check: refused, not kept
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM kept_results WHERE key = 'k'").fetchone() \
            == (0,)


def test_a_store_is_read_whole_only_where_it_changed_since_it_was_known_intact(tmp_path,
                                                                                monkeypatch):
    """A store left by hpcprobe (what it wrote, SQLite wrote whole) is marked intact; the next
    open reads it whole only where it changed since (another writer, a file written over):
    a fleet's store of a year is not read whole by every command. Damage that leaves the file
    as marked (a disk's) ends in the same line where a read meets it, and the mark goes."""
    import sqlite3

    from hpcprobe.common.errors import OptionError
    from hpcprobe.results import sqlite as backend
    from hpcprobe.results.store import Selection, Store

    checks: list[str] = []
    check = backend.SqliteStore._quick_check
    monkeypatch.setattr(backend.SqliteStore, "_quick_check",
                        lambda self: (checks.append("checked"), check(self)))
    db = tmp_path / "s.sqlite"
    with Store.open(str(db)) as st:
        st.save(dataclasses.replace(results.read_json(PROBE), run_id="0" * 12))
    mark = Path(f"{db}{backend.MARK}")
    assert mark.exists() and not checks  # made here: known intact
    for _ in range(2):  # unchanged, or changed by this connection alone: not read whole
        with Store.open(str(db), create=False) as st:
            st.keep("steps", {"k": ("d", "[]")})
    assert not checks
    with Store.open(str(db), create=False) as st:  # another writer meanwhile
        with sqlite3.connect(db) as other:
            other.execute("DELETE FROM kept_results")
        st.runs()
    with Store.open(str(db), create=False):
        pass
    assert checks == ["checked"]  # read whole once, then marked again
    with Store.open(str(db), create=False):
        pass
    assert checks == ["checked"]
    (tmp_path / "disk").mkdir()
    damaged = _damaged(tmp_path / "disk")
    stat = os.stat(damaged)
    state = [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
    Path(f"{damaged}{backend.MARK}").write_text(json.dumps(state))  # as a disk's damage
    with pytest.raises(OptionError, match="the store is damaged"):
        with Store.open(str(damaged), create=False) as st:
            st.load_all(Selection())
    assert not Path(f"{damaged}{backend.MARK}").exists()
    data = bytearray(damaged.read_bytes())  # its schema's page past the header: unreadable
    data[100:4096] = b"\xa5" * (4096 - 100)
    damaged.write_bytes(bytes(data))
    with pytest.raises(OptionError, match="the store is damaged"):
        with Store.open(str(damaged), create=False):
            pass


def test_read_commands_share_one_exit_policy(tmp_path):
    """The same run, below its reference: every command that shows its verdict exits 1,
    whatever it writes; against a file of another CPU, every one of them exits 3."""
    from hpcprobe.analysis.verdict import Expected

    run = results.read_json(PROBE)
    other = tmp_path / "other.json"
    results.write_json(dataclasses.replace(run, run_id="0123456789ab"), other)
    [g] = reference.make([run], registry.pickers(), registry.hardware_labels)
    g.figures = {k: dataclasses.replace(e, value=1000 * e.value, runs=5)
                 for k, e in g.figures.items() if isinstance(e, Expected)}
    below = tmp_path / "below.toml"
    below.write_text(reference.to_toml([g], "test"))
    g.hardware = {**g.hardware, "cpu": "Some Other CPU 9999"}
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(reference.to_toml([g], "test"))
    for ref, code in ((below, 1), (elsewhere, 3)):
        for args in (("show", str(PROBE)), ("show", str(PROBE), "--json", str(tmp_path / "d")),
                     ("report", str(PROBE), "-o", str(tmp_path / "r.html")),
                     ("compare", str(PROBE), str(other))):
            r = hpcprobe(*args, "--against", str(ref))
            assert r.code == code and "Traceback" not in r.err, (args, ref.name, r.err)
            if code == 3:
                assert "judged nothing" in " ".join(r.err.split()), r.err


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root to make")
def test_a_cached_program_another_user_could_write_is_never_run(tmp_path):
    """Root runs the cached MPI and CUDA programs (a check in a prolog): one that another user
    owns, or that others may write (the program or its directory), is refused in one line."""
    from hpcprobe.common import compiled
    from hpcprobe.common.errors import UserError

    exe = tmp_path / "cache" / "mpi" / "fp" / "hpb_mpi"
    built = compiled.compile_to(exe, lambda out: ["sh", "-c", f"echo '#!/bin/sh' > {out}"],
                                "sh")
    assert compiled.cached(built) == exe
    for spoil, undo in ((lambda: exe.chmod(0o777), lambda: exe.chmod(0o755)),
                        (lambda: exe.parent.chmod(0o777), lambda: exe.parent.chmod(0o755)),
                        (lambda: os.chown(exe, 4242, 4242), lambda: os.chown(exe, 0, 0))):
        spoil()
        with pytest.raises(UserError, match="a cached program there is not run"):
            compiled.compile_to(exe, lambda out: ["false"], "sh")
        undo()
    assert compiled.cached(exe) == exe


def test_prometheus_on_standard_output_carries_the_exposition_alone(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    r = hpcprobe("check", "--state-only", "--no-store", "--counters",
                 str(tmp_path / "c.json"), "--prometheus", "-")
    assert r.code == 3, r.err
    names = {f.name for f in text_string_to_metric_families(r.out)}  # every line parses
    assert "hpcprobe_check_outcome" in names and "CANNOT JUDGE" in r.err


def test_a_usage_error_leaves_no_store_behind(tmp_path):
    for i, args in enumerate((("run", "memory", "--kernel", "nosuch"),
                              ("run", "--json", "/proc/x.json", "memory", "--quick"),
                              ("run", "--isa", "nosuch"), ("check", "--json", str(tmp_path)))):
        db = tmp_path / f"s{i}.sqlite"
        r = hpcprobe(*args, "--db", str(db))
        assert r.code == 2 and "Traceback" not in r.err, (args, r.err)
        assert not db.exists(), args
