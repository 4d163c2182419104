"""The topology model from recorded hwloc XML, synthetic XML, sysfs and the live machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DATA
from hpcprobe.common.errors import UserError
from hpcprobe.machine import topology


def test_counts_from_xml(machine):
    topo, counts = machine
    c = topo.counts()
    assert (c["packages"], c["numa_nodes"], c["l3_domains"], c["cores"], c["pus"]) == counts


def test_every_pu_in_exactly_one_domain_of_each_kind(machine):
    topo, _ = machine
    for doms in (topo.packages, topo.numa_nodes, topo.cores):
        cpus = [c for d in doms for c in d.cpus]
        assert sorted(cpus) == sorted(p.os_index for p in topo.pus)


def test_nps4_structure(nps4):
    assert all(len(n.cpus) == 16 for n in nps4.numa_nodes)
    assert all(d.size_bytes == 32_000_000 for d in nps4.l3_domains)
    assert {n.memory_bytes for n in nps4.numa_nodes} == {1 << 30}
    # each NUMA domain lies within one package and holds four L3 domains
    for n in nps4.numa_nodes:
        assert len({nps4.pu(c).package for c in n.cpus}) == 1
        assert len({nps4.pu(c).l3 for c in n.cpus}) == 4
    assert [c["level"] for c in topology.cache_summary(nps4)] == [1, 2, 3]
    l3 = [c for c in nps4.caches if c.level == 3]
    assert len(l3) == 32 and sum(c.size_bytes for c in l3) == 32 * 32_000_000


def test_smt_node(xeon_smt):
    assert xeon_smt.smt == 2
    assert all(len(c.cpus) == 2 for c in xeon_smt.cores)
    l2 = xeon_smt.cache_for(2, 0)
    assert l2 is not None and len(l2.cpus) == 2


def test_json_model_has_counts(nps4):
    d = nps4.to_dict()
    assert d["counts"] == {"packages": 2, "numa_nodes": 8, "l3_domains": 32, "cores": 128,
                           "pus": 128}
    assert d["numa_nodes"][0]["cpus"] == "0-15"


def test_render_is_condensed(nps4):
    text = topology.render(nps4)
    assert "2 package(s), 8 NUMA domain(s), 32 L3 domain(s), 128 core(s)" in text
    assert text.count("NUMA ") >= 8 and "L3 #31" in text
    assert "Caches: L1" in text


def test_recorded_live_machine_has_caches():
    topo = topology.load_xml(DATA / "vm-live-2c.xml")
    assert topo.cpu_model and "Xeon" in topo.cpu_model
    assert [c.level for c in topo.caches if 0 in c.cpus] == [3, 2, 1]


@pytest.mark.parametrize("content,needle", [
    ("<topology><object", "not valid XML"),
    ("<html></html>", "not an hwloc topology"),
    ("<topology></topology>", "no objects"),
    ('<topology><object type="Machine"/></topology>', "no processing units"),
    ('<topology><object type="Machine"><object type="PU"/></object></topology>', "os_index"),
])
def test_malformed_xml(tmp_path, content, needle):
    f = tmp_path / "bad.xml"
    f.write_text(content)
    with pytest.raises(UserError, match=needle):
        topology.load_xml(f)


def test_unreadable_xml(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        topology.load_xml(tmp_path / "missing.xml")


def test_live_machine_matches_os():
    topo = topology.discover()
    assert len(topo.pus) >= len(os.sched_getaffinity(0))
    assert set(topo.allowed_cpus) == set(os.sched_getaffinity(0))
    assert topo.counts()["numa_nodes"] >= 1


def test_sysfs_of_this_machine_agrees_with_discovery():
    live = topology.discover()
    sysfs = topology.from_sysfs("/", set(os.sched_getaffinity(0)))
    assert sysfs.counts()["pus"] == live.counts()["pus"]
    assert sysfs.counts()["cores"] == live.counts()["cores"]
    assert sysfs.counts()["packages"] == live.counts()["packages"]


def _fake_sysfs(root: Path) -> None:
    """Two packages of two cores, one L3 each, two NUMA nodes."""
    cpu = root / "sys/devices/system/cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-3\n")
    for c in range(4):
        d = cpu / f"cpu{c}"
        (d / "topology").mkdir(parents=True)
        (d / "topology/physical_package_id").write_text(f"{c // 2}\n")
        (d / "topology/core_id").write_text(f"{c % 2}\n")
        for idx, (level, kind, size, shared) in enumerate([
                (1, "Data", "32K", str(c)), (1, "Instruction", "32K", str(c)),
                (2, "Unified", "1024K", str(c)),
                (3, "Unified", "16384K", "0-1" if c < 2 else "2-3")]):
            i = d / f"cache/index{idx}"
            i.mkdir(parents=True)
            (i / "level").write_text(f"{level}\n")
            (i / "type").write_text(kind + "\n")
            (i / "size").write_text(size + "\n")
            (i / "shared_cpu_list").write_text(shared + "\n")
    for n in range(2):
        d = root / f"sys/devices/system/node/node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(f"{2 * n}-{2 * n + 1}\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       1048576 kB\n")
    (root / "proc").mkdir()
    (root / "proc/cpuinfo").write_text("model name\t: Fake CPU 9000\n")


def test_sysfs_fallback_from_recorded_tree(tmp_path):
    _fake_sysfs(tmp_path)
    topo = topology.from_sysfs(tmp_path)
    assert topo.counts() == {"packages": 2, "numa_nodes": 2, "l3_domains": 2, "cores": 4, "pus": 4}
    assert topo.cpu_model == "Fake CPU 9000"
    assert topo.numa_nodes[1].memory_bytes == 1 << 30
    assert [c.size_bytes for c in topo.caches if 0 in c.cpus] == [32 << 10, 1 << 20, 16 << 20]


def test_sysfs_missing(tmp_path):
    with pytest.raises(UserError, match="online"):
        topology.from_sysfs(tmp_path)


@pytest.mark.hwloc
@pytest.mark.skipif(not shutil.which("lstopo-no-graphics"), reason="hwloc's lstopo not installed")
@pytest.mark.parametrize("desc,counts", [
    ("pack:2 numa:4 l3:4 core:4 pu:1", (2, 8, 32, 128, 128)),
    ("pack:2 numa:2 l3:4 core:8 pu:2", (2, 4, 16, 128, 256)),
    ("pack:1 l3:2 core:4 pu:1", (1, 1, 2, 8, 8)),
])
def test_synthetic_from_lstopo(tmp_path, desc, counts):
    xml = subprocess.run(["lstopo-no-graphics", "--input", desc, "--of", "xml", "-"],
                         capture_output=True, text=True, check=True).stdout
    topo = topology.from_hwloc_xml(xml, "synthetic")
    c = topo.counts()
    assert (c["packages"], c["numa_nodes"], c["l3_domains"], c["cores"], c["pus"]) == counts
