"""A cgroup's memory limit (a Slurm job's --mem, a container's) bounds what a plan may take:
read from recorded cgroup v1 and v2 trees, and for real in a memory cgroup this test creates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import hpcprobe
from hpcprobe.machine import sysinfo

GIB = 1 << 30


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_slurm_jobs_v2_limit_is_the_tightest_over_its_ancestors(tmp_path):
    job = "system.slice/slurmstepd.scope/job_12"
    tree(tmp_path, {
        "proc": f"0::/{job}/step_0/user/task_0\n",
        "cg/cgroup.controllers": "cpuset cpu memory\n",
        "cg/system.slice/memory.max": "max\n", "cg/system.slice/memory.current": "9000000000\n",
        f"cg/{job}/memory.max": f"{4 * GIB}\n", f"cg/{job}/memory.current": f"{GIB}\n",
        f"cg/{job}/step_0/memory.max": "max\n", f"cg/{job}/step_0/memory.current": "5\n",
    })
    got = sysinfo.cgroup_memory_limit(str(tmp_path / "proc"), str(tmp_path / "cg"))
    assert got is not None and (got.limit, got.usage, got.headroom) == (4 * GIB, GIB, 3 * GIB)
    assert got.where == str(tmp_path / "cg" / job / "memory.max")
    # a parent with less left over is the one that binds
    (tmp_path / "cg/system.slice/memory.max").write_text(f"{9000000000 + GIB // 2}\n")
    got = sysinfo.cgroup_memory_limit(str(tmp_path / "proc"), str(tmp_path / "cg"))
    assert got is not None and got.headroom == GIB // 2
    assert got.where.endswith("system.slice/memory.max")


def test_a_v1_memory_hierarchy_beside_others_and_no_limit(tmp_path):
    tree(tmp_path, {
        "proc": "5:devices:/slurm/job_5\n4:memory:/slurm/uid_0/job_5\n0::/\n",
        "cg/unified/cgroup.controllers": "\n",
        "cg/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "cg/memory/memory.usage_in_bytes": "123\n",
        "cg/memory/slurm/uid_0/job_5/memory.limit_in_bytes": f"{2 * GIB}\n",
        "cg/memory/slurm/uid_0/job_5/memory.usage_in_bytes": f"{GIB // 4}\n",
    })
    got = sysinfo.cgroup_memory_limit(str(tmp_path / "proc"), str(tmp_path / "cg"))
    assert got is not None and (got.limit, got.headroom) == (2 * GIB, 2 * GIB - GIB // 4)
    (tmp_path / "cg/memory/slurm/uid_0/job_5/memory.limit_in_bytes").write_text(
        "9223372036854771712\n")  # v1's "no limit"
    assert sysinfo.cgroup_memory_limit(str(tmp_path / "proc"), str(tmp_path / "cg")) is None
    assert sysinfo.cgroup_memory_limit(str(tmp_path / "none"), str(tmp_path / "cg")) is None
    (tmp_path / "junk").write_text("not a cgroup listing\n")
    assert sysinfo.cgroup_memory_limit(str(tmp_path / "junk"), str(tmp_path / "cg")) is None


def _v1_memory_cgroup() -> Path | None:
    """This process's v1 memory cgroup, where root may make a child in it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            here = Path("/sys/fs/cgroup") / controllers / rel.strip("/")
            if os.geteuid() == 0 and (here / "memory.limit_in_bytes").exists() and \
                    os.access(here, os.W_OK):
                return here
    return None


@pytest.fixture
def limited(tmp_path):
    """A v1 memory cgroup of 1 GiB, made for this test and removed after it."""
    here = _v1_memory_cgroup()
    if here is None:
        pytest.skip("no writable cgroup v1 memory hierarchy (root on a v1 or hybrid host)")
    cg = here / f"hpcprobe-test-{os.getpid()}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(str(GIB))
        yield cg
    finally:
        cg.rmdir()  # its processes have ended


def in_cgroup(cg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """hpcprobe with these arguments, started inside the cgroup."""
    def enter() -> None:
        (cg / "cgroup.procs").write_text(str(os.getpid()))

    return subprocess.run([sys.executable, "-m", "hpcprobe", *args], capture_output=True,
                          text=True, timeout=300, preexec_fn=enter)


def test_a_plan_larger_than_the_cgroup_allows_is_refused_and_the_limit_kept(limited, tmp_path):
    assert hpcprobe("run", "memory", "--size", "2GiB", "--dry-run").code == 0  # the node's
    r = in_cgroup(limited, "run", "memory", "--size", "2GiB", "--dry-run")
    assert r.returncode == 2 and "of memory is available" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert hpcprobe("hpl", "--n", "20000", "--dry-run").code == 0  # 3 GiB of the node's 24
    r = in_cgroup(limited, "hpl", "--n", "20000", "--dry-run")  # HPL sizes by the limit
    assert r.returncode == 2 and "of the 1.0 GiB of the 1 node(s)" in r.stderr, r.stderr
    out = tmp_path / "run.json"
    r = in_cgroup(limited, "run", "frequency", "--quick", "--no-store", "--json", str(out))
    assert r.returncode == 0, r.stderr
    kept = json.loads(out.read_text())["provenance"]["memory_limit"]
    assert kept == {"bytes": GIB, "where": str(limited / "memory.limit_in_bytes")}
