"""The node's links from recorded sysfs trees (tests/data/links, written by its make.py): each
NIC/HCA/NVMe PCIe link against its maximum, each network port's rate and state."""

from pathlib import Path

from hpcprobe.machine import links

DATA = Path(__file__).parent / "data" / "links"


def test_a_healthy_node_states_its_ports_and_links_with_no_finding():
    got = links.read(DATA / "hdr-node")
    assert [(p["name"], p["rate_gbps"], p["state"]) for p in got["ports"]] == [
        ("mlx5_0/1", 200.0, "ACTIVE"), ("eth0", 25.0, "up")]  # lo has no device: not a port
    assert {d["name"]: (d["speed_gts"], d["width"]) for d in got["pcie"]} == {
        "mlx5_0": (16.0, 16), "eth0": (8.0, 8), "nvme0": (16.0, 4)}
    assert got["findings"] == []
    assert links.line(got) == ["Links: mlx5_0/1 200 Gb/s ACTIVE; eth0 25 Gb/s up; PCIe: 3 of 3 "
                               "NIC/NVMe link(s) at their maximum"]


def test_a_narrow_link_and_a_port_down_are_findings_stated_first():
    got = links.read(DATA / "hdr-node-degraded")
    first, *found = links.line(got)
    assert "PCIe: 2 of 3" in first and "mlx5_0/1 200 Gb/s DOWN" in first
    assert found[0].startswith("PCIe link of mlx5_0 (0000:41:00.0) trained at x8 of x16 lanes")
    assert found[1] == "InfiniBand port mlx5_0/1 is DOWN, not ACTIVE"


def test_a_machine_without_links_says_nothing(tmp_path):
    assert links.read(tmp_path) == {"pcie": [], "ports": [], "findings": []}
    assert links.line(links.read(tmp_path)) == [] and links.line(None) == []
