"""The test Slurm cluster itself (tests/slurmcluster.py), which the cluster mode's tests build
on: four slurmd in namespaces of their own answer srun, MPI runs across them with pmix, the
test subnet is blackholed while the cluster lives, and nothing is left behind."""

from __future__ import annotations

import subprocess

import pytest

import slurmcluster

pytestmark = pytest.mark.skipif(slurmcluster.missing() is not None,
                                reason=str(slurmcluster.missing()))


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _blackholed() -> bool:
    out = subprocess.run(["ip", "route", "show", "type", "blackhole"], capture_output=True,
                         text=True).stdout
    return f"{slurmcluster.SUBNET}.0/24" in out


def test_four_nodes_answer_and_nothing_is_left_behind():
    before = _netns()
    with slurmcluster.cluster(4) as c:
        assert _blackholed()  # the test subnet cannot leave the machine
        r = c.client("srun", "-N4", "hostname")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split()) == ["n1", "n2", "n3", "n4"]
        pids = dict(c.pids)
    assert _netns() == before and not _blackholed()
    for pid in pids.values():  # every daemon stopped by its recorded PID
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0


def test_mpi_runs_across_two_nodes_with_pmix():
    from hpcprobe.mpi import build, find

    exe = build.build(find.find())
    with slurmcluster.cluster(2) as c:
        r = c.client("srun", "-N2", "-n2", "--mpi=pmix", str(exe), "--tests", "latency",
                     "--max-size", "8", "--reps", "3", timeout=120)
    assert r.returncode == 0, r.stderr
    samples = [line for line in r.stdout.splitlines() if '"type":"sample"' in line]
    assert len(samples) >= 3 and '"type":"done"' in r.stdout
    hosts = [line for line in r.stdout.splitlines() if '"type":"binding"' in line]
    assert len({h.split('"host":"')[1].split('"')[0] for h in hosts}) == 2  # two nodes
