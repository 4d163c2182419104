"""`hpcprobe check --slurm` as Slurm's own HealthCheckProgram, Prolog and Epilog in the
namespace cluster, as the node image's check in one file (`make pyz`): a node whose recorded
/sys shows its InfiniBand port down is drained by Slurm's call of the check (the health
check's, a job's prolog's, or the epilog's after a job broke the port), with the check's reason,
and released by the health check once the port is up again; a drain someone else set is never
released; a healthy node is never drained."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

import pytest

import slurmcluster
from test_check import fake_sys, write_reference
from test_pyz import make_image

pytestmark = pytest.mark.skipif(slurmcluster.missing() is not None,
                                reason=str(slurmcluster.missing()))

#: Slurm runs the check on every node this often (seconds)
INTERVAL = 2
#: The HealthCheckProgram, Prolog and Epilog (Slurm says which in SLURM_SCRIPT_CONTEXT): does
#: nothing until the test says where the cluster's slurm.conf is (slurmd runs it once as it
#: starts, before the cluster is up), nor as a hook the test switched off (off-HOOK); each call
#: holds a shared lock, so the test knows when none is under way (_quiet)
HOOK = """#!/bin/sh
[ -f {dir}/conf ] || exit 0
exec 9>>{dir}/hook.lock
flock -s 9
hook=${{SLURM_SCRIPT_CONTEXT:-health}}
[ -f {dir}/off-$hook ] && exit 0
export SLURM_CONF=$(cat {dir}/conf) PATH={path}
node=$(hostname)
echo "== $hook" >> {dir}/check-$node.log
exec {exe} check --slurm --state-only --no-store --against {ref} --sysfs {dir}/sys-$node \\
    --counters {dir}/counters-$node.json >> {dir}/check-$node.log 2>&1
"""


def _drains(c: slurmcluster.Cluster, seen: set[str]) -> dict[str, str]:
    """Node -> its drain reason, for the drained nodes (sinfo -R); each one added to `seen`."""
    r = c.client("sinfo", "-h", "-R", "-N", "-o", "%N|%E")
    got = dict(line.split("|", 1) for line in r.stdout.splitlines() if "|" in line)
    seen.update(got)
    return got


def _until(what, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := what():
            return got
        time.sleep(0.5)
    return what()


def _quiet(tmp: Path, hook: str = "health") -> None:
    """Switch a hook off and wait for its calls under way to end."""
    (tmp / f"off-{hook}").touch()
    with open(tmp / "hook.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # every call of the hook before it has ended


def _port(sysfs: Path, state: str) -> str:
    """A shell command that sets the recorded port's state (a job breaking the port)."""
    return f"echo '{state}' > {sysfs}/class/infiniband/mlx5_0/ports/1/state"


def test_slurm_drains_a_faulty_node_through_the_check_and_releases_it(tmp_path):
    # the node image's check in one file (make pyz), as docs/check.md installs it; the
    # installed script's state-only check is test_check's
    exe = f"{sys.executable} -I {make_image(tmp_path / 'image') / 'hpcprobe.pyz'}"
    for n in ("n1", "n2", "n3"):
        fake_sys(tmp_path / f"sys-{n}")
    ref = write_reference(tmp_path / "ref.toml", tmp_path / "sys-n1")
    script = tmp_path / "hook.sh"
    script.write_text(HOOK.format(path=os.environ["PATH"], exe=exe, ref=ref, dir=tmp_path))
    script.chmod(0o755)
    log = tmp_path / "check-n2.log"
    seen: set[str] = set()  # every node seen drained
    with slurmcluster.cluster(3, extra=f"HealthCheckProgram={script}\n"
                                       f"HealthCheckInterval={INTERVAL}\n"
                                       f"Prolog={script}\nEpilog={script}\n") as c:
        def drains() -> dict[str, str]:
            return _drains(c, seen)

        def released() -> None:  # the port up again, the health check on: n2 released
            fake_sys(tmp_path / "sys-n2")
            (tmp_path / "off-health").unlink(missing_ok=True)
            assert "n2" not in _until(lambda: "n2" not in (d := drains()) and d), log.read_text()

        (tmp_path / "conf").write_text(str(c.conf))
        c.client("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=admin: new DIMM")
        # 1. HealthCheckProgram: Slurm's periodic call drains n2, port down
        fake_sys(tmp_path / "sys-n2", state="1: DOWN")
        drained = _until(lambda: "n2" in (d := drains()) and d)
        assert drained.get("n2", "").startswith("hpcprobe: HP311 port mlx5_0/1: DOWN"), \
            (drained, log.read_text())
        released()
        # 2. Prolog: the health check off, a job's prolog finds the port down; its drain (and
        # its reason, not Slurm's "Prolog error") stands; no job step ran on n2
        _quiet(tmp_path)
        fake_sys(tmp_path / "sys-n2", state="1: DOWN")
        job = c.client("srun", "-w", "n2", "-N1", "sh", "-c", "echo ran", timeout=60)
        assert job.returncode != 0 and "ran" not in job.stdout and "prolog failed" in job.stderr
        assert drains().get("n2", "").startswith("hpcprobe: HP311 port mlx5_0/1: DOWN"), \
            (job.stderr, log.read_text())
        assert "== prolog" in log.read_text()
        released()
        # 3. Epilog: a job breaks the port; the epilog after it drains n2
        _quiet(tmp_path)
        job = c.client("srun", "-w", "n2", "-N1", "sh", "-c",
                       _port(tmp_path / "sys-n2", "1: DOWN"), timeout=60)
        assert job.returncode == 0, job.stderr
        drained = _until(lambda: "n2" in (d := drains()) and d)
        assert drained.get("n2", "").startswith("hpcprobe: HP311 port mlx5_0/1: DOWN"), \
            (drained, log.read_text())
        assert "== epilog" in log.read_text()
        released()
        time.sleep(2 * INTERVAL)  # n3 passes its checks too, and stays drained
        assert drains() == {"n3": "admin: new DIMM"}
    assert "n1" not in seen  # a healthy node is never drained
    assert (tmp_path / "check-n1.log").read_text().count("PASS") >= 2
