"""Steal time: the CPU time the hypervisor took while each benchmark ran, read from /proc/stat,
kept with the run, and a warning where it is large enough to move figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from hpcprobe import cli
from hpcprobe.machine import steal
from hpcprobe.measure import runner
from hpcprobe.results import model as results

#: /proc/stat of a 2-CPU guest, then 10 s later: each CPU 1000 jiffies on, 30 of them stolen
BEFORE = """\
cpu  1000 10 400 8000 20 0 30 60 0 0
cpu0 500 5 200 4000 10 0 15 30 0 0
cpu1 500 5 200 4000 10 0 15 30 0 0
intr 12345 0 0
"""
AFTER = """\
cpu  2800 10 500 8040 20 0 30 120 50 0
cpu0 1400 5 250 4020 10 0 15 60 25 0
cpu1 1400 5 250 4020 10 0 15 60 25 0
intr 23456 0 0
"""


def test_the_share_stolen_is_read_per_cpu_from_proc_stat():
    a, b = steal.parse(BEFORE, [0, 1]), steal.parse(AFTER, [0, 1])
    assert a == steal.Times(60, 2 * 4760, 2 * 720) and b == steal.Times(120, 2 * 5760, 2 * 1670)
    assert steal.share(a, b) == pytest.approx(60 / 2000)
    assert steal.share(steal.parse(BEFORE, [1]), steal.parse(AFTER, [1])) == \
        pytest.approx(0.03)
    assert steal.share(a, a) is None and steal.share(None, b) is None


def test_a_cpu_without_its_line_or_steal_field_reads_nothing():
    assert steal.parse(BEFORE, [0, 2]) is None  # no cpu2 line (offline)
    assert steal.parse("cpu0 1 2 3 4 5 6 7\n", [0]) is None  # a kernel before steal time
    assert steal.read(path="/nonexistent/stat") is None


def test_others_share_is_the_busy_time_this_process_did_not_spend(monkeypatch):
    """Between the readings each CPU was busy 950 jiffies of 1000 (user, system, softirq);
    this process spent 1.5 s of the 19 s busy: others used 17.5 of the 20 s."""
    monkeypatch.setattr(steal.os, "sysconf", lambda name: 100)
    a, b = steal.parse(BEFORE, [0, 1]), steal.parse(AFTER, [0, 1])
    assert (a.busy, b.busy) == (2 * 720, 2 * 1670)
    a, b = replace(a, own=10.0), replace(b, own=11.5)
    assert steal.others(a, b) == pytest.approx((19.0 - 1.5) / 20.0)
    assert steal.others(b, replace(b, total=b.total + 20)) is None  # 0.2 s: too short to say
    assert steal.others(a, replace(b, own=40.0)) == 0.0  # never below nothing


@pytest.mark.parametrize("cgroup, stat_path, text, seconds", [
    ("0::/system.slice/slurmstepd.scope/job_12/step_0/user/task_0\n",
     "system.slice/slurmstepd.scope/job_12/cpu.stat", "usage_usec 2500000\nuser_usec 1\n", 2.5),
    ("4:cpu,cpuacct:/slurm/uid_0/job_7/step_batch/task_0\n3:memory:/slurm/uid_0/job_7\n",
     "cpu,cpuacct/slurm/uid_0/job_7/cpuacct.usage", "4000000000\n", 4.0),
    ("0::/user.slice/user-0.slice/session-3.scope\n", None, "", None),
])
def test_the_cpu_time_of_this_slurm_job_is_its_own(tmp_path, cgroup, stat_path, text, seconds):
    """Ranks an srun inside the job started are the job's own work, not others' (they are not
    this process's children): their time is read from the job's cgroup, v2 or v1; outside a
    job, none."""
    (tmp_path / "cgroup").write_text(cgroup)
    if stat_path:
        (tmp_path / "fs" / stat_path).parent.mkdir(parents=True)
        (tmp_path / "fs" / stat_path).write_text(text)
    assert steal.job_seconds(str(tmp_path / "cgroup"), str(tmp_path / "fs")) == seconds


def test_a_benchmark_that_shared_its_cpus_with_others_is_not_judged(monkeypatch):
    """The runner's finding and the verdict's mark, from readings where others used 80 %."""
    from hpcprobe.analysis import verdict as judged
    from hpcprobe.results.findings import Finding

    run = results.Run("r1", "2026-11-28T00:00:00+00:00", "h", "quick", ["toy"], {}, {},
                      findings=[Finding("toy", steal.BUSY, "x", {"percent": 80.0}).to_dict()])
    assert judged.disturbed(run) == {"toy": "node busy"}


def test_other_processes_on_the_cpus_are_read_while_a_benchmark_runs(tmp_path):
    """Real processes spinning on every CPU of this one for a second and a half: others' share
    is most of the CPUs' time."""
    cpus = os.sched_getaffinity(0)
    before = steal.read()
    burners = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, "
                                 f"{{{cpu}}})\nwhile True: pass"]) for cpu in sorted(cpus)]
    try:
        time.sleep(1.5)
        during = steal.read()
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert steal.others(before, during) > steal.OTHERS


def test_this_machine_reads_its_own_cpus():
    got = steal.read()
    assert got is not None and 0 <= got.steal <= got.total


def readings(*texts: str) -> Iterator[steal.Times | None]:
    for t in texts:
        yield steal.parse(t, [0, 1])


@pytest.mark.usefixtures("toy_family")
@pytest.mark.parametrize("after, warned", [(AFTER, True), (BEFORE.replace(
    "4000", "5000"), False)])
def test_a_benchmark_during_which_the_host_took_time_says_so(monkeypatch, tmp_path, after,
                                                              warned):
    seq = readings(BEFORE, after)
    monkeypatch.setattr(runner.steal, "read", lambda: next(seq))
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "--no-store", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    pct = 3.0 if warned else 0.0
    assert doc["provenance"]["steal_percent"] == {"toy": pct}
    said = [w for w in doc["warnings"] if "steal time" in w]
    found = [f for f in doc["findings"] if f["kind"] == "steal"]
    if warned:
        assert said == ["toy: the hypervisor took 3.0 % of this guest's CPU time while it ran "
                        "(steal time): its figures carry the host's other load; a host that is "
                        "not oversubscribed, or dedicated CPUs, give steadier ones "
                        "[HP102 re-measure]"]
        assert found == [{"benchmark": "toy", "kind": "steal", "code": "HP102",
                          "action": "re-measure", "percent": 3.0,
                          "message": said[0][len("toy: "):-len(" [HP102 re-measure]")]}]
    else:
        assert said == [] and found == []


@pytest.mark.usefixtures("toy_family")
def test_a_real_run_keeps_each_benchmarks_share(tmp_path):
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "--no-store", "--json", str(out)]) == 0
    got = json.loads(out.read_text())["provenance"]["steal_percent"]
    assert set(got) == {"toy"} and 0 <= got["toy"] <= 100
