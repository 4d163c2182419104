"""The NUMA matrices: planning on recorded machines, binding for real on node 0."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import DATA, assert_user_error, hpcprobe, run_json
from hpcprobe import native
from hpcprobe.common.errors import UserError
from hpcprobe.families.numa import bench as numa
from hpcprobe.families.numa.bench import NumaOptions
from hpcprobe.machine import topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import RunContext

#: The quick profile with the 1x1 matrix that it leaves out on one-node machines.
QUICK = profiles.get("quick")


@pytest.fixture
def one_node_too(monkeypatch):
    """The quick profile, with the 1x1 matrix run where there is one NUMA domain."""
    monkeypatch.setitem(numa.SETTINGS, "quick",
                        dataclasses.replace(numa.SETTINGS["quick"], on_one_node=True))


def test_quick_profile_leaves_a_1x1_matrix_out(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    numa.run(ctx, None)
    assert not ctx.metrics and ctx.findings[0]["kind"] == "skipped"


def test_nps4_has_an_8x8_matrix(nps4):
    cells = numa.cells(nps4, NumaOptions())
    assert cells == [(i, j) for i in range(8) for j in range(8)]
    assert len(numa.domain_cpus(nps4, 3)) == 16
    assert all(nps4.pu(c).numa == 3 for c in numa.domain_cpus(nps4, 3))


def test_one_cell_and_missing_domains(nps4):
    assert numa.cells(nps4, NumaOptions(cpu_node=2, memory_node=5)) == [(2, 5)]
    assert numa.cells(nps4, NumaOptions(memory_node=0)) == [(i, 0) for i in range(8)]
    with pytest.raises(UserError, match="memory_node 8"):
        numa.cells(nps4, NumaOptions(memory_node=8))
    with pytest.raises(UserError, match="cpu_node 9"):
        numa.cells(nps4, NumaOptions(cpu_node=9))
    laptop = topology.load_xml(DATA / "laptop-8c.xml")
    assert numa.cells(laptop, NumaOptions()) == [(0, 0)]


def test_real_1x1_matrix_binds_to_node_0(tiny, one_node_too):
    ctx = RunContext(tiny, QUICK, native.best_isa())
    numa.run(ctx, None)
    assert not ctx.errors, ctx.errors
    lat = [m for m in ctx.metrics if m.name == "latency"]
    bw = [m for m in ctx.metrics if m.name == "bandwidth"]
    assert len(lat) == 1 and len(bw) == 1
    for m in lat + bw:
        assert m.params["memory_policy"] == "bind"
        assert m.params["memory_domain"] == 0 and m.params["memory_domain_seen"] == [0]
        assert m.summary.median > 0


def test_cli_missing_node(tmp_path):
    assert_user_error(hpcprobe("run", "numa", "--memory-node", "7", "--no-store"),
                      "--memory-node 7")
    assert_user_error(hpcprobe("run", "memory", "--cpu-node", "0", "--no-store"), "--cpu-node")


def test_cli_one_cell(tmp_path):
    r, doc = run_json(tmp_path, "numa", "--cpu-node", "0", "--memory-node", "0", "--quick",
                      "--no-store")
    assert {m["name"] for m in doc["metrics"]} == {"latency", "bandwidth"}
    assert "NUMA latency" in r.out and "NUMA read bandwidth" in r.out


def test_without_mbind_only_the_diagonal_by_first_touch(tiny, monkeypatch, one_node_too):
    """Where a seccomp filter forbids mbind, the matrix falls back to first touch, honestly."""
    for name in ("chase_prepare", "stream_prepare"):
        real = getattr(native.Team, name)

        def refuse(self, *args, _real=real, node=None, **kw):
            if node is not None:
                raise native.BindingUnavailable("binding memory is not permitted here (EPERM)")
            return _real(self, *args, node=node, **kw)

        monkeypatch.setattr(native.Team, name, refuse)
    ctx = RunContext(tiny, QUICK, native.best_isa())
    numa.run(ctx, None)
    assert any("first touch" in w for w in ctx.warnings)
    assert {m.params["memory_policy"] for m in ctx.metrics} == {"first-touch"}
    assert {(m.params["cpu_domain"], m.params["memory_domain"]) for m in ctx.metrics} == {(0, 0)}
