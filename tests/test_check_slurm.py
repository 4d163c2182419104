"""`hpcprobe check --slurm` as Slurm's own HealthCheckProgram in the namespace cluster: a node
whose recorded /sys shows its InfiniBand port down is drained by Slurm's call of the check,
with the check's reason, and released once the port is up again; a drain someone else set is
never released; a healthy node is never drained."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

import slurmcluster
from test_check import fake_sys, write_reference

pytestmark = pytest.mark.skipif(slurmcluster.missing() is not None,
                                reason=str(slurmcluster.missing()))

#: Slurm runs the check on every node this often (seconds)
INTERVAL = 2
#: The HealthCheckProgram: does nothing until the test says where the cluster's slurm.conf is
#: (slurmd runs it once as it starts, before the cluster is up)
HEALTH = """#!/bin/sh
[ -f {dir}/conf ] || exit 0
export SLURM_CONF=$(cat {dir}/conf) PATH={path}
node=$(hostname)
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


def test_slurm_drains_a_faulty_node_through_the_check_and_releases_it(tmp_path):
    exe = shutil.which("hpcprobe", path=str(Path(sys.executable).parent))
    assert exe is not None
    for n in ("n1", "n2", "n3"):
        fake_sys(tmp_path / f"sys-{n}")
    ref = write_reference(tmp_path / "ref.toml", tmp_path / "sys-n1")
    script = tmp_path / "health.sh"
    script.write_text(HEALTH.format(path=os.environ["PATH"], exe=exe, ref=ref, dir=tmp_path))
    script.chmod(0o755)
    seen: set[str] = set()  # every node seen drained
    with slurmcluster.cluster(3, extra=f"HealthCheckProgram={script}\n"
                                       f"HealthCheckInterval={INTERVAL}\n") as c:
        def drains() -> dict[str, str]:
            return _drains(c, seen)

        (tmp_path / "conf").write_text(str(c.conf))
        c.client("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=admin: new DIMM")
        fake_sys(tmp_path / "sys-n2", state="1: DOWN")
        drained = _until(lambda: "n2" in (d := drains()) and d)
        assert drained.get("n2", "").startswith("hpcprobe: port mlx5_0/1: DOWN"), \
            (drained, (tmp_path / "check-n2.log").read_text())
        fake_sys(tmp_path / "sys-n2")  # the port is up again
        released = _until(lambda: "n2" not in (d := drains()) and d)
        assert "n2" not in released, (tmp_path / "check-n2.log").read_text()
        time.sleep(2 * INTERVAL)  # n3 passes its checks too, and stays drained
        assert drains() == {"n3": "admin: new DIMM"}
    assert "n1" not in seen  # a healthy node is never drained
    assert (tmp_path / "check-n1.log").read_text().count("PASS") >= 2
