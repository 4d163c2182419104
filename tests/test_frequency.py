"""The frequency benchmark: the curve's plan, its errors, and a real curve on this machine."""

import pytest

from conftest import DATA, assert_user_error, hpcprobe, run_json, two_cpus
from hpcprobe import native
from hpcprobe.common.errors import UserError
from hpcprobe.families.frequency.bench import curve
from hpcprobe.machine import topology


def test_curve_on_a_dual_socket_node_follows_the_placement():
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    name, cores, counts = curve(topo, "spread", None, 16)
    assert name == "spread" and len(cores) == 128
    assert cores[:2] == (0, 64)  # one per socket first
    assert counts[0] == 1 and counts[-1] == 128 and len(counts) <= 16
    assert curve(topo, None, (4, 1, 4), 16)[2] == [1, 4]


@pytest.mark.parametrize("threads,needle", [((0,), "at least 1"), ((129,), "1..128")])
def test_impossible_counts_are_refused(threads, needle):
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    with pytest.raises(UserError, match=needle):
        curve(topo, None, threads, 16)


def test_clock_curve_is_measured_for_every_load(tmp_path):
    _, doc = run_json(tmp_path, "frequency", "--quick", "--threads", "1", "--no-store")
    clocks = [m for m in doc["metrics"] if m["name"] == "clock"]
    assert {m["params"]["load"] for m in clocks} == set(native.supported_isas())
    for m in clocks:
        assert m["params"]["active_cores"] == 1 and m["summary"]["n"] >= 1
        assert 0.2 < m["summary"]["median"] < 10  # plausibility, not a timing
    assert not doc["errors"]


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_clock_with_two_active_cores_pools_both(tmp_path):
    _, doc = run_json(tmp_path, "frequency", "--quick", "--threads", "2", "--isa", "scalar",
                      "--no-store")
    (m,) = [m for m in doc["metrics"] if m["name"] == "clock"]
    assert m["params"]["active_cores"] == 2 and m["params"]["load"] == "scalar"


def test_too_many_threads_is_a_user_error():
    r = hpcprobe("run", "frequency", "--threads", "4096", "--no-store")
    assert_user_error(r, "--threads 4096", "one thread per CPU")
