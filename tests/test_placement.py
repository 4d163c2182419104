"""Placements on recorded and synthetic machines."""

from __future__ import annotations

from collections import Counter

import pytest

from hpcprobe.common.errors import UserError
from hpcprobe.machine.placement import PLACEMENTS, placement_cpus, plan


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
def test_every_placement_on_every_machine(machine, name):
    topo, counts = machine
    cpus = placement_cpus(topo, name)
    assert len(set(cpus)) == len(cpus)
    assert set(cpus) <= {p.os_index for p in topo.pus}
    expected = {"compact": counts[4], "spread": counts[4], "one-per-core": counts[3],
                "one-per-l3": counts[2], "one-per-numa": counts[1], "one-per-socket": counts[0]}
    assert len(cpus) == expected[name]


def test_one_per_l3_on_nps4(nps4):
    cpus = plan(nps4, "one-per-l3").cpus
    assert len(cpus) == 32
    assert len({nps4.pu(c).l3 for c in cpus}) == 32
    # balanced over both sockets at every even prefix, and over NUMA domains
    for k in range(2, 33, 2):
        assert Counter(nps4.pu(c).package for c in cpus[:k]) == {0: k // 2, 1: k // 2}
    assert len({nps4.pu(c).numa for c in cpus[:8]}) == 8


def test_spread_8_is_one_per_numa(nps4):
    cpus = plan(nps4, "spread", 8).cpus
    assert sorted(nps4.pu(c).numa for c in cpus) == list(range(8))


def test_compact_is_topology_order(nps4):
    assert plan(nps4, "compact", 4).cpus == (0, 1, 2, 3)


def test_one_per_core_skips_smt_siblings(xeon_smt):
    cpus = plan(xeon_smt, "one-per-core").cpus
    assert len(cpus) == 52
    assert len({xeon_smt.pu(c).core for c in cpus}) == 52
    spread = plan(xeon_smt, "spread", 52).cpus
    assert len({xeon_smt.pu(c).core for c in spread}) == 52
    # the 53rd spread thread is the first to share a core
    more = plan(xeon_smt, "spread", 53).cpus
    assert len({xeon_smt.pu(c).core for c in more}) == 52


def test_one_per_socket_and_numa(xeon_smt, nps4):
    assert [xeon_smt.pu(c).package for c in plan(xeon_smt, "one-per-socket").cpus] == [0, 1]
    assert sorted(nps4.pu(c).numa for c in plan(nps4, "one-per-numa").cpus) == list(range(8))


def test_explicit_list_keeps_order(nps4):
    assert plan(nps4, "8,0-3").cpus == (8, 0, 1, 2, 3)
    assert plan(nps4, "0-3,8", 2).cpus == (0, 1)


@pytest.mark.parametrize("placement,threads,needle", [
    ("nowhere", None, "unknown"),
    ("0-3,x", None, "placement 0-3,x"),
    ("0,999", None, "do not exist"),
    ("1,1", None, "twice"),
    ("compact", 0, "at least 1"),
    ("one-per-numa", 9, "oversubscribe"),
])
def test_errors(nps4, placement, threads, needle):
    with pytest.raises(UserError, match=needle):
        plan(nps4, placement, threads)


def test_oversubscribe_wraps(nps4):
    p = plan(nps4, "one-per-socket", 4, oversubscribe=True)
    assert p.oversubscribed and p.cpus == (0, 64, 0, 64)


def test_disallowed_cpus_are_not_placed(tmp_path):
    from conftest import DATA
    from hpcprobe.machine import topology

    xml = (DATA / "laptop-8c.xml").read_text().replace(
        'allowed_cpuset="0x000000ff"', 'allowed_cpuset="0x0000000f"')
    topo = topology.from_hwloc_xml(xml, "restricted")
    assert topo.allowed_cpus == (0, 1, 2, 3)
    assert plan(topo, "compact").cpus == (0, 1, 2, 3)
    with pytest.raises(UserError, match="allowed cpuset"):
        plan(topo, "6")


def test_active_counts_cover_every_count_when_few():
    from hpcprobe.machine.placement import active_counts

    assert active_counts(2, 16) == [1, 2]
    assert active_counts(12) == list(range(1, 13))


def test_active_counts_thin_out_on_big_machines():
    from hpcprobe.machine.placement import active_counts

    counts = active_counts(128, 16)
    assert counts[:8] == list(range(1, 9)) and counts[-1] == 128
    assert {16, 32, 64} <= set(counts)  # the memory benchmark's ladder
    assert len(counts) <= 16 and counts == sorted(set(counts))
