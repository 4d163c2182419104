"""`hpcprobe check`, the health tier: the node's state against its reference's (recorded /sys
trees: an InfiniBand port down, a DIMM missing), error counters that rose since the last check,
the three outcomes and their exit codes, a suspect figure measured again before it fails, the
monitoring files parsed with prometheus_client's own parsers, and bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import DATA, hpcprobe
from hpcprobe import native, registry
from hpcprobe.analysis import health, reference
from hpcprobe.analysis.verdict import Expected, Reference, Verdict
from hpcprobe.commands import check
from hpcprobe.health import drain
from hpcprobe.machine import counters, links, provenance, topology
from hpcprobe.results import model as results
from hpcprobe.results.store import Store
from hpcprobe.views import prometheus

PROBE = DATA / "cluster" / "probe-quick.json"
SMBIOS = DATA / "smbios"


def fake_sys(root: Path, state: str = "4: ACTIVE", symbol: int = 0, ue: int = 0) -> Path:
    """A /sys tree with one InfiniBand HCA port (its state, rate and error counters) and one
    memory controller's EDAC counts."""
    port = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "counters").mkdir(parents=True, exist_ok=True)
    (port / "state").write_text(state + "\n")
    (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
    for name in links.IB_COUNTERS:
        (port / "counters" / name).write_text(f"{symbol if name == 'symbol_error' else 0}\n")
    mc = root / "devices" / "system" / "edac" / "mc" / "mc0"
    mc.mkdir(parents=True, exist_ok=True)
    (mc / "mc_name").write_text("amd64_edac\n")
    (mc / "ce_count").write_text("3\n")
    (mc / "ue_count").write_text(f"{ue}\n")
    return root


def this_node(sysfs: Path) -> results.Run:
    """A run of this node that measured nothing, its links read from `sysfs` (as `check
    --state-only --sysfs` reads them)."""
    topo = topology.discover()
    run = results.Run(uuid.uuid4().hex[:12], datetime.now(UTC).isoformat(), socket.gethostname(),
                      "check", [], provenance.collect(topo, native.best_isa()), topo.to_dict())
    check.recorded_sysfs(run, sysfs)
    return run


def write_reference(path: Path, sysfs: Path, figures: dict[str, Expected] | None = None,
                    cpu: str | None = None) -> Path:
    """A reference file for this node's hardware (or another CPU's), profile check, whose state
    is this node's as `sysfs` shows it."""
    run = this_node(sysfs)
    hw = reference.hardware(run, registry.hardware_labels)
    if cpu is not None:
        hw["cpu"] = cpu
    g = reference.Group(hw, "check", ["r1"], ["h1"], figures or {}, health.state_of(run))
    path.write_text(reference.to_toml([g], "test"))
    return path


# ---------------------------------------------------------------- the state, pure


def test_state_of_a_recorded_run_and_what_differs():
    run = results.read_json(PROBE)
    state = health.state_of(run)
    assert state["cores"] == str(run.topology["counts"]["cores"])
    assert state["CPUs online"] == str(run.topology["counts"]["pus"])
    ref = {**state, "port mlx5_0/1": "ACTIVE 200 Gb/s", "memory": "512.0 GiB"}
    now = {**state, "port mlx5_0/1": "DOWN 200 Gb/s", "memory": "505.0 GiB"}
    found = health.differences(now, ref)
    assert found == ["port mlx5_0/1: DOWN 200 Gb/s, the reference has ACTIVE 200 Gb/s"]
    lost = health.differences({**now, "memory": "480.0 GiB"}, ref)  # 6 %: a DIMM gone
    assert "memory: 480.0 GiB, the reference has 512.0 GiB" in lost
    edited = health.differences({"memory": "512.0 GiB"}, {"memory": "half a terabyte"})
    assert edited == ["memory: 512.0 GiB, the reference has half a terabyte"]
    gone = health.differences({k: v for k, v in state.items() if k != "cores"}, state)
    assert gone == [f"cores: absent, the reference has {state['cores']}"]


def test_a_reference_keeps_only_the_state_its_runs_share():
    a = {"THP": "always", "governor": "performance", "DIMMs": "24"}
    b = {"THP": "madvise", "governor": "performance", "DIMMs": "24"}
    assert health.common([a, b]) == {"governor": "performance", "DIMMs": "24"}
    assert health.common([]) == {}


def test_a_reference_file_round_trips_its_state(tmp_path):
    run = results.read_json(PROBE)
    groups = reference.make([run], registry.pickers(), registry.hardware_labels)
    assert groups and groups[0].state == health.state_of(run)
    path = tmp_path / "ref.toml"
    reference.write(groups, "test", str(path))
    back = reference.load(str(path))
    assert back[0].state == groups[0].state
    # a check run (another profile) of the same hardware gets the state, no figures
    check = replace(run, profile="check", metrics=[])
    ref = reference.for_run(back, check, registry.hardware_labels, str(path))
    assert ref.state == groups[0].state and not ref.figures


def test_counters_that_rose_since_the_last_check(tmp_path):
    before = counters.read(fake_sys(tmp_path / "a"), None)
    assert before["mlx5_0/1 symbol_error"] == 0 and before["EDAC uncorrected"] == 0
    now = counters.read(fake_sys(tmp_path / "b", symbol=12, ue=1), None)
    assert sorted(counters.rising(before, now)) == [  # each node fact's, in the facts' order
        "EDAC uncorrected rose by 1 since the last check (0 -> 1)",
        "mlx5_0/1 symbol_error rose by 12 since the last check (0 -> 12)"]
    assert counters.rising(now, before) == []  # cleared counters are no rise


#: The machine-check rows of an AMD EPYC host's /proc/interrupts (4 CPUs shown), with the rows
#: around them that must not count (polls and thermal events rise on a healthy node)
INTERRUPTS = """\
            CPU0       CPU1       CPU2       CPU3
 NMI:         11         10         12          9   Non-maskable interrupts
 TRM:          0          4          0          0   Thermal event interrupts
 THR:          0          0          0          0   Threshold APIC interrupts
 DFR:          0          0          0          0   Deferred Error APIC interrupts
 MCE:          0          0          0          0   Machine check exceptions
 MCP:        412        412        412        412   Machine check polls
 ERR:          0
"""


def test_machine_checks_outside_edac_that_rose(tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    (tmp_path / "before").write_text(INTERRUPTS)
    before = counters.read(sysfs, tmp_path / "before")
    assert {k: v for k, v in before.items() if "machine check" in k} == {
        "machine check threshold interrupts": 0, "deferred machine check errors": 0,
        "machine check exceptions": 0}
    (tmp_path / "now").write_text(INTERRUPTS.replace(
        " MCE:          0          0", " MCE:          0          2").replace(
        " MCP:        412", " MCP:        980").replace(" TRM:          0          4",
                                                       " TRM:          7          4"))
    assert counters.rising(before, counters.read(sysfs, tmp_path / "now")) == [
        "machine check exceptions rose by 2 since the last check (0 -> 2)"]


def _verdict(mark: str, why: str = "") -> Verdict:
    from hpcprobe.analysis.verdict import Headline, Row

    run = results.read_json(PROBE)
    m = run.metrics[0]
    e = Expected("k", "a figure", m.unit, m.better, 2 * m.summary.median, 0.05, 5)
    return Verdict([Row(Headline("k", "a figure", m), e, mark, why)],
                   Reference("a file", {"k": e}, state={"cores": "2"}))


def test_the_three_outcomes():
    assert health.outcome([], _verdict("ok")).status == health.PASS
    failed = health.outcome([(health.STATE, "port mlx5_0/1: DOWN")], _verdict("ok"))
    assert failed.status == health.FAIL and failed.exit_code == 1
    assert failed.reasons == ["HP311 port mlx5_0/1: DOWN"]  # each reason led by its code
    below = health.outcome([], _verdict("below"))
    assert below.status == health.FAIL and "-50.0% against" in below.reasons[0]
    assert below.reasons[0].startswith("HP314 ")
    noisy = health.outcome([], _verdict("not judged", "noisy ±9%"))
    assert noisy.status == health.UNJUDGED and noisy.exit_code == 3
    assert noisy.unjudged == ["a figure: noisy ±9%"]
    assert health.outcome([], Verdict([], None)).status == health.UNJUDGED


# ---------------------------------------------------------------- monitoring


def test_prometheus_textfile_and_openmetrics_parse_back(tmp_path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families

    run = results.read_json(PROBE)
    v = registry.judge(run, None)
    reg = prometheus.registry([(run, v)])
    prometheus.add_check(reg, "n7", "fail", [health.STATE, health.STATE], 1.8e9, 4.2)
    path = tmp_path / "hpcprobe.prom"
    prometheus.write(str(path), reg)
    fams = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    head = v.rows[0].headline
    suffix, factor = prometheus.base_unit(head.metric.unit)
    name = f"hpcprobe_figure_{suffix}"
    got = {s.labels["figure"]: s.value for s in fams[name].samples}
    assert got[head.key] == pytest.approx(head.metric.summary.median * factor)
    assert {s.labels["host"] for s in fams[name].samples} == {run.host}
    outcome = {s.labels["outcome"]: s.value for s in fams["hpcprobe_check_outcome"].samples}
    assert outcome == {"pass": 0.0, "fail": 1.0, "cannot judge": 0.0}
    [fault] = fams["hpcprobe_check_fault"].samples  # the reasons by code, with their action
    assert (fault.labels["code"], fault.labels["action"], fault.value) == ("HP311", "drain", 2)
    assert fams["hpcprobe_check_reasons"].samples[0].value == 2
    marks = [s for s in fams["hpcprobe_figure_verdict"].samples
             if s.labels["figure"] == head.key]
    assert sum(s.value for s in marks) == 1.0  # one mark per figure
    om_fams = {f.name for f in om(prometheus.openmetrics(reg).decode())}
    assert name in om_fams and "hpcprobe_check_outcome" in om_fams


def _promtool(text: str) -> tuple[int, str]:
    """`promtool check metrics` on this exposition: its exit status and the problems it names."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60, check=False)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="no promtool (Debian's prometheus package: `make setup` as root)")
def test_promtool_finds_nothing_to_change_in_the_exports(tmp_path):
    """Prometheus's own linter (names in base units, `_total` on counters alone, help text)
    on what a check and a run write (every kind of series: figures, ceilings, marks, the
    check's outcome and faults) and on `export`'s OpenMetrics; it names what it would change
    in the old names (GB/s as `gigabytes`, ns as `nanoseconds`)."""
    run = results.read_json(PROBE)
    reg = prometheus.registry([(run, registry.judge(run, None))])
    prometheus.add_check(reg, "n7", "fail", [health.STATE, health.STATE], 1.8e9, 4.2)
    path = tmp_path / "hpcprobe.prom"
    prometheus.write(str(path), reg)
    assert "hpcprobe_check_fault" in path.read_text()
    assert _promtool(path.read_text()) == (0, "")
    assert _promtool(prometheus.openmetrics(reg).decode()) == (0, "")
    old = "".join(f"# HELP hpcprobe_figure_{u} x\n# TYPE hpcprobe_figure_{u} gauge\n"
                  f"hpcprobe_figure_{u} 80\n" for u in ("gigabytes_per_second", "nanoseconds"))
    code, said = _promtool(old)
    assert code != 0 and 'base unit "bytes"' in said and 'base unit "seconds"' in said


def test_a_run_writes_its_headline_figures_for_node_exporter(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    prom = tmp_path / "run.prom"
    r = hpcprobe("run", "memory", "--quick", "--kernel", "triad", "--stores", "regular",
                 "--no-store", "--prometheus", str(prom))
    assert r.code == 0, r.err
    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    got = {s.labels["figure"]: s for s in fams["hpcprobe_figure_bytes_per_second"].samples}
    [triad] = [s for k, s in got.items() if k.startswith("memory.dram_triad")]
    assert triad.value > 1e8 and triad.labels["profile"] == "quick"  # bytes/s, not GB/s


@pytest.mark.parametrize("unit,suffix,factor", [
    ("GB/s", "bytes_per_second", 1e9), ("MB/s", "bytes_per_second", 1e6),
    ("KiB/s", "bytes_per_second", 1024), ("Gbit/s", "bytes_per_second", 1.25e8),
    ("GFLOP/s", "flops_per_second", 1e9), ("Mflop/s", "flops_per_second", 1e6),
    ("FLOP/B", "flops_per_byte", 1), ("GHz", "hertz", 1e9), ("ns", "seconds", 1e-9),
    ("us", "seconds", 1e-6), ("ms", "seconds", 1e-3), ("%", "ratio", 0.01),
    ("IOPS", "operations_per_second", 1), ("tx/s", "transactions_per_second", 1)])
def test_figures_are_exported_in_base_units(unit, suffix, factor):
    """Prometheus's naming guide: base units (bytes, seconds), ratios 0-1."""
    assert prometheus.base_unit(unit) == (suffix, pytest.approx(factor))


def test_every_declared_unit_has_a_base_unit():
    from hpcprobe import registry

    units = {s.unit for f in registry.families().values() for s in f.metrics.specs}
    unknown = {u for u in units if prometheus.base_unit(u)[0].replace("_per_", " ").split()[0]
               not in {w for w, _ in prometheus._BASE.values()}}
    assert unknown == set()


def test_export_openmetrics_of_stored_runs(tmp_path):
    db = str(tmp_path / "s.sqlite")
    assert hpcprobe("import", str(PROBE), "--db", db).code == 0
    r = hpcprobe("export", "--db", db, "--format", "openmetrics")
    assert r.code == 0, r.err
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om

    names = {f.name for f in om(r.out)}
    assert "hpcprobe_figure_bytes_per_second" in names and "hpcprobe_figure_verdict" in names
    bad = hpcprobe("export", "--db", db, "--format", "openmetrics", "--metric", "memory.bandwidth")
    assert bad.code == 2 and bad.err.count("\n") == 1


# ---------------------------------------------------------------- the command


def _check(tmp_path: Path, *args: str):
    """`hpcprobe check` (its store none unless --db is given), its output's lines unfolded
    (the terminal folds them at 100 columns)."""
    store = () if "--db" in args else ("--no-store",)
    r = hpcprobe("check", *store, "--counters", str(tmp_path / "counters.json"), *args)
    r.out = r.out.replace("\n", " ").replace("  ", " ")
    return r


def test_state_only_check_passes_then_fails_on_a_port_down_and_counters(tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    ok = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref))
    assert ok.code == 0, ok.out + ok.err
    assert ok.out.startswith("PASS")
    fake_sys(sysfs, state="1: DOWN")
    down = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref),
                  "--json", str(tmp_path / "c.json"))
    assert down.code == 1 and down.out.startswith("FAIL")
    assert "port mlx5_0/1: DOWN 100 Gb/s, the reference has ACTIVE 100 Gb/s" in down.out
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["status"] == "fail"
    # the broken rule is a judgement record too: the state's label, a health rule, failed
    [rule] = [j for j in doc["judgements"] if j["basis"] == "health rule"]
    assert rule["figure"] == "port mlx5_0/1" and rule["mark"] == "failed"
    assert "the reference has ACTIVE" in rule["why"]
    # a check's result stands for its profile's day (cluster run --only stale)
    assert datetime.fromisoformat(doc["valid_until"]) == \
        datetime.fromisoformat(doc["run"]["created"]) + timedelta(days=1)
    fake_sys(sysfs, symbol=40)  # the port is back; its symbol errors rose
    rose = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref))
    assert rose.code == 1 and "symbol_error rose by 40" in rose.out
    again = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref))
    assert again.code == 1, "a rise stays a fault until it is dealt with"
    accepted = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref),
                      "--accept-counters")
    assert accepted.code == 0, accepted.out


def test_a_missing_dimm_fails_the_check(tmp_path):
    """The reference's node had 16 DIMMs in 16 channels (a recorded two-socket Milan); one is
    gone now."""
    sysfs = fake_sys(tmp_path / "sys")
    entries = sysfs / "firmware" / "dmi" / "entries"
    shutil.copytree(SMBIOS / "epyc-7763-2s-full", entries)
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    assert 'DIMMs = "16"' in ref.read_text()
    shutil.rmtree(entries)
    shutil.copytree(SMBIOS / "epyc-7763-2s-one-missing", entries)
    r = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(ref))
    assert r.code == 1, r.out
    assert "DIMMs: 15, the reference has 16" in r.out
    assert "memory channels: socket 0: 8, socket 1: 7, the reference has socket 0: 8, " \
           "socket 1: 8" in r.out


def test_cannot_judge_without_a_reference_or_for_other_hardware(tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    none = _check(tmp_path, "--state-only", "--sysfs", str(sysfs))
    assert none.code == 3 and none.out.startswith("CANNOT JUDGE")
    other = write_reference(tmp_path / "other.toml", sysfs, cpu="Some Other CPU 9999")
    r = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), "--against", str(other))
    assert r.code == 3 and "has no figures for this hardware" in r.out


@pytest.mark.parametrize("args,says", [
    (("--against", "/nonexistent/ref.toml"), "/nonexistent/ref.toml"),
    (("--tmp-free", "lots"), "--tmp-free"),
    (("--tmp", "/nonexistent"), "--tmp"),
    (("--sysfs", "/nonexistent"), "--sysfs"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    r = _check(tmp_path, "--state-only", *args)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err and "Traceback" not in r.err


def test_a_reference_file_that_is_not_toml(tmp_path):
    bad = tmp_path / "ref.toml"
    bad.write_text("this is = = not toml")
    r = _check(tmp_path, "--against", str(bad))
    assert r.code == 2 and r.err.count("\n") == 1 and "not TOML" in r.err


def _thousandfold(tmp_path: Path, sysfs: Path) -> Path:
    """A reference of this node's state that expects a thousand times each headline figure a
    recorded node delivered."""
    run = results.read_json(PROBE)
    heads = {r.headline.key: r.headline for r in registry.judge(run, None).rows}
    figures = {k: Expected(k, h.label, h.metric.unit, h.metric.better,
                           1000 * h.metric.summary.median, 0.05, 5) for k, h in heads.items()}
    return write_reference(tmp_path / "ref.toml", sysfs, figures)


def test_a_measured_check_below_its_reference_is_measured_again_then_fails(tmp_path):
    """The reference expects a thousand times what a recorded node delivered: every figure is below,
    measured again once, and the check fails on them (or, where both readings were disturbed
    or too short on this busy guest, cannot judge and says why: never a pass)."""
    sysfs = fake_sys(tmp_path / "sys")
    ref = _thousandfold(tmp_path, sysfs)
    db = str(tmp_path / "s.sqlite")
    r = _check(tmp_path, "--db", db, "--sysfs", str(sysfs), "--against", str(ref),
               "--prometheus", str(tmp_path / "c.prom"))
    assert "Measured again once before judging" in r.out, r.out
    if r.code == 1:
        # a thousandth (give or take: this node's figures are not the recorded run's)
        assert r.out.startswith("FAIL") and " below " in r.out, r.out
        assert re.search(r" -(99\.[5-9]|100\.0)% against ", r.out), r.out
    else:  # both readings disturbed (steal, the sentinel) or too few samples: said, no verdict
        assert r.code == 3 and r.out.startswith("CANNOT JUDGE"), r.out
        assert "cannot judge: " in r.out and "no reference" not in r.out, r.out
    with Store.open(db) as st:  # one write: the run as judged, figures measured again
        [info] = st.runs()
        assert info.profile == "check" and st.load(info.run_id).provenance["retested"]
    assert "hpcprobe_check_outcome" in (tmp_path / "c.prom").read_text()


FAKE_SCONTROL = """#!/bin/sh
echo "$@" >> {log}
case "$1 $2" in
  "-o show") echo "NodeName=$4 Arch=x86_64 State={state} Reason={reason} Comment=(null)";;
  "update NodeName=n9") {update};;
esac
"""


def _fake_scontrol(tmp_path: Path, state: str = "IDLE", reason: str = "(null)",
                   update: str = "exit 0") -> tuple[dict[str, str], Path]:
    """A scontrol on PATH that shows node n9 in `state` and does `update` (its calls logged)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "scontrol.log"
    (bin_ / "scontrol").write_text(FAKE_SCONTROL.format(log=log, state=state, reason=reason,
                                                        update=update))
    (bin_ / "scontrol").chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}"}, log


def test_slurm_refusing_the_drain_is_one_line_and_exit_4(tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    fake_sys(sysfs, state="1: DOWN")
    env, log = _fake_scontrol(tmp_path, update="echo 'slurm_update error: Access/permission "
                                               "denied' >&2; exit 1")
    r = hpcprobe("check", "--slurm", "--node", "n9", "--state-only", "--no-store", "--sysfs",
                 str(sysfs), "--against", str(ref), "--counters", str(tmp_path / "c.json"),
                 env=env)
    assert r.code == 4 and r.err.count("\n") == 1 and "Traceback" not in r.err
    assert "scontrol could not drain n9: slurm_update error: Access/permission denied" in r.err
    assert "State=DRAIN Reason=hpcprobe: HP311 port mlx5_0/1: DOWN" in log.read_text()


def test_slurm_cannot_judge_changes_nothing_and_exits_0(tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    env, log = _fake_scontrol(tmp_path, state="IDLE+DRAIN", reason="hpcprobe: old fault "
                                                                   "[root@2026-11-27T10:00:00]")
    r = hpcprobe("check", "--slurm", "--node", "n9", "--state-only", "--no-store", "--sysfs",
                 str(sysfs), "--counters", str(tmp_path / "c.json"), env=env)
    assert r.code == 0 and r.out.startswith("CANNOT JUDGE"), r.out + r.err
    assert not log.exists()  # Slurm not even asked: neither drained nor released


@pytest.mark.parametrize("status", ["pass", "fail"])
def test_slurm_that_cannot_show_the_node_never_turns_a_pass_into_a_drain(tmp_path, status):
    """A pass whose node Slurm cannot show (slurmctld restarting, a timeout) exits 0 and
    changes nothing; a fail drains all the same (exit 1)."""
    sysfs = fake_sys(tmp_path / "sys")
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    if status == "fail":
        fake_sys(sysfs, state="1: DOWN")
    env, log = _fake_scontrol(tmp_path)
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(scontrol.read_text().replace(
        '"-o show") echo', '"-o show") echo "slurm_load_node error: Socket timed out" >&2; '
        'exit 1; echo'))
    r = hpcprobe("check", "--slurm", "--node", "n9", "--state-only", "--no-store", "--sysfs",
                 str(sysfs), "--against", str(ref), "--counters", str(tmp_path / "c.json"),
                 env=env)
    assert "Traceback" not in r.err and "Socket timed out" in r.err, r.err
    if status == "pass":
        assert r.code == 0 and r.out.startswith("PASS"), r.out + r.err
        assert "update" not in log.read_text()
    else:
        assert r.code == 1 and "State=DRAIN Reason=hpcprobe: HP311 port" in log.read_text()


@pytest.mark.parametrize("state", ["ALLOCATED", "MIXED+DRAIN"])
def test_slurm_a_node_running_jobs_is_not_measured_and_cannot_be_judged(tmp_path, state):
    """The measuring tier where Slurm has the node in use: its state is read and judged (a
    fault there still fails it), its figures are not measured; cannot judge, exit 0."""
    sysfs = fake_sys(tmp_path / "sys")
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    env, log = _fake_scontrol(tmp_path, state=state)
    r = hpcprobe("check", "--slurm", "--node", "n9", "--no-store", "--sysfs", str(sysfs),
                 "--against", str(ref), "--counters", str(tmp_path / "c.json"), env=env)
    flat = " ".join(r.out.split())
    assert r.code == 0 and r.out.startswith("CANNOT JUDGE"), r.out + r.err
    assert f"Slurm has n9 in use ({state})" in flat and "peak" not in flat, flat
    assert "update" not in log.read_text()
    if "DRAIN" in state:
        return  # someone else's drain: left as it is (tested above)
    fake_sys(sysfs, state="1: DOWN")
    down = hpcprobe("check", "--slurm", "--node", "n9", "--no-store", "--sysfs", str(sysfs),
                    "--against", str(ref), "--counters", str(tmp_path / "c.json"), env=env)
    assert down.code == 1 and "State=DRAIN Reason=hpcprobe: HP311 port" in log.read_text()


@pytest.mark.parametrize("content", ['[[reference]]\ncpu = "x"\n', '{"n9": {"counters": {"a"',
                                     '{"n9": {"counters": {"a": "many"}}}', '[1, 2]'])
def test_a_counters_file_that_is_not_one_is_refused_and_kept(tmp_path, content):
    """`--counters` naming the reference (or a damaged counters file) is one line and exit 2
    before anything is read; the file is left as it was: a baseline reset would forget a rise."""
    sysfs = fake_sys(tmp_path / "sys")
    other = tmp_path / "ref.toml"
    other.write_text(content)
    r = hpcprobe("check", "--state-only", "--no-store", "--sysfs", str(sysfs), "--counters",
                 str(other))
    assert r.code == 2 and r.err.count("\n") == 1 and "not a check's counters file" in r.err
    assert other.read_text() == content


def test_an_empty_sysfs_copy_is_a_usage_error(tmp_path):
    (tmp_path / "sys").mkdir()
    r = _check(tmp_path, "--state-only", "--sysfs", str(tmp_path / "sys"))
    assert r.code == 2 and "--sysfs" in r.err and "empty" in r.err, r.out + r.err


@pytest.mark.parametrize("option", ["--json", "--prometheus"])
def test_an_output_that_cannot_be_written_is_refused_before_the_check(tmp_path, option):
    """A directory, /proc (root may "access" it, nothing can be made there), an empty path:
    refused before the node is read, so a passing prolog never ends in exit 2."""
    sysfs = fake_sys(tmp_path / "sys")
    for bad in (str(tmp_path), "/proc/hpcprobe-check.out", ""):
        r = _check(tmp_path, "--state-only", "--sysfs", str(sysfs), option, bad)
        assert r.code == 2 and r.out == "" and r.err.count("\n") == 1, (bad, r.out, r.err)
        assert option in r.err and "Traceback" not in r.err


def _burn(cpus: set[int]) -> list[subprocess.Popen[bytes]]:
    """One process spinning on each of these CPUs (stopped by the caller, by their PIDs)."""
    return [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, "
                              f"{{{cpu}}})\nwhile True: pass"]) for cpu in sorted(cpus)]


def test_a_busy_node_cannot_be_judged_never_fails(tmp_path):
    """Other processes on every CPU while the check measures: the figures (half of what an
    idle node gives, far below the reference) are not judged (node busy), measured again once,
    and the check cannot judge (exit 3, exit 0 under --slurm): it never fails a node for the
    load of others."""
    sysfs = fake_sys(tmp_path / "sys")
    ref = _thousandfold(tmp_path, sysfs)
    burners = _burn(os.sched_getaffinity(0))
    try:
        r = _check(tmp_path, "--sysfs", str(sysfs), "--against", str(ref))
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert r.code == 3 and r.out.startswith("CANNOT JUDGE"), r.out + r.err
    assert "node busy" in r.out and "Measured again once before judging" in r.out, r.out


def test_drain_reasons_keep_under_slurms_line():
    reason = drain.drain_reason([f"port mlx5_{i}/1: DOWN 200 Gb/s, the reference has ACTIVE "
                                 "200 Gb/s" for i in range(8)])
    assert reason.startswith("hpcprobe: port mlx5_0/1") and len(reason) <= drain.REASON_MAX
    assert reason.endswith("...")


@pytest.mark.parametrize("euid", [0, 1000])
def test_the_counters_default_directory_is_made(tmp_path, monkeypatch, capsys, euid):
    """The documented hook calls `check` with no --counters: its default directory (root's
    /var/lib/hpcprobe, a user's state directory) is made, not a usage error on a fresh node
    (which, as a prolog, would drain every node); --help names the default used."""
    from hpcprobe import cli

    monkeypatch.setattr(check, "ROOT_STATE", tmp_path / "var-lib" / "hpcprobe")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    expected = (tmp_path / "var-lib" / "hpcprobe" if euid == 0 else
                tmp_path / "state" / "hpcprobe") / "check-counters.json"
    assert cli.main(["check", "--state-only", "--no-store"]) in (0, 3)
    assert expected.is_file()
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    assert str(expected) in "".join(capsys.readouterr().out.split())  # wrapped by argparse
    # a default that cannot be made is one line, before anything is read
    monkeypatch.setenv("XDG_STATE_HOME", "/proc/hpcprobe-test")
    monkeypatch.setattr(check, "ROOT_STATE", Path("/proc/hpcprobe-test"))
    assert cli.main(["check", "--state-only", "--no-store"]) == 2


def test_the_checks_plain_lines_fold_at_100_columns_without_control_characters(capsys):
    # the check's console is not rich's (a prolog imports nothing it does not use), and says
    # what rich's would: a long line folded at the answer's 100 columns, no escape sequence
    from hpcprobe.commands.base import WIDTH, Lines, say

    say(Lines(), "FAIL  n1: " + "reason " * 30 + "\x1b[2Jend\n  - second")
    out = capsys.readouterr().out.splitlines()
    assert all(len(x) <= WIDTH for x in out) and len(out) == 4, out
    assert out[0].startswith("FAIL  n1: reason") and out[-1] == "  - second"
    assert "\x1b" not in "".join(out) and "[2Jend" in out[-2]


def test_no_checking_family_has_hardware_labels_the_state_only_tier_would_miss():
    # the state-only tier is judged without the families (analysis.reference.state_only): their
    # hardware labels (GPU models) are of what they measured, which a check run holds none of
    # as long as no family that checks also inventories; one that did would need its labels
    # read from the node's facts instead
    from hpcprobe.measure.family import Check, Inventory

    assert set(registry.having(Check)) & set(registry.having(Inventory)) == set()
