"""The latency benchmark: chase orders, page-size verification, planning, a real small run."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA, assert_user_error, hpcprobe, run_json, two_cpus
from hpcprobe import native
from hpcprobe.common.errors import UserError
from hpcprobe.families.latency import bench as latency
from hpcprobe.families.latency.bench import LatencyOptions, Point
from hpcprobe.machine import topology
from hpcprobe.machine.smaps import mapping_pages, page_label
from hpcprobe.measure import profiles
from hpcprobe.measure.family import RunContext
from hpcprobe.results import model as results
from hpcprobe.results.findings import of_kind


@settings(max_examples=60, deadline=None)
@given(lines=st.integers(1, 3000), group=st.integers(0, 500), seed=st.integers(0, 2**63))
def test_chase_order_is_one_cycle_through_every_line(lines, group, seed):
    order = native.chase_order(lines, group, seed)
    assert sorted(order) == list(range(lines))  # every line exactly once: one cycle
    g = group if 0 < group < lines else lines
    n_groups = -(-lines // g)
    # with several groups, two passes: every even line, then every odd one, so no line meets
    # its 128-byte buddy (2k, 2k+1) until half the ring later
    evens = (lines + 1) // 2
    passes = [order[:evens], order[evens:]] if n_groups > 1 else [order]
    if n_groups > 1:
        assert all(i % 2 == 0 for i in passes[0]) and all(i % 2 == 1 for i in passes[1])
    # group locality: within a pass the walk finishes a group before it enters another
    for walk in passes:
        groups = [i // g for i in walk]
        changes = sum(1 for a, b in zip(groups, groups[1:], strict=False) if a != b)
        assert changes == len(set(groups)) - 1


def test_chase_order_depends_on_seed():
    assert native.chase_order(1000, 0, 1) != native.chase_order(1000, 0, 2)


@settings(max_examples=40, deadline=None)
@given(lines=st.integers(2, 3000), group=st.integers(2, 500), seed=st.integers(0, 2**63))
def test_the_random_order_walks_each_group_whole_in_one_pass(lines, group, seed):
    """--order random: one pass over the groups, every line of a group (both parities) before
    the next group, as a plain random chase walks; still one cycle through every line."""
    order = native.chase_order(lines, group, seed, "random")
    assert sorted(order) == list(range(lines))
    g = min(group, lines)
    groups = [i // g for i in order]
    assert sum(1 for a, b in zip(groups, groups[1:], strict=False) if a != b) == \
        len(set(groups)) - 1
    if -(-lines // g) > 1 and g >= 4:  # the ring's first pass holds even lines only
        ring = native.chase_order(lines, group, seed)
        assert any(i % 2 for i in order[:(lines + 1) // 2]) and ring != order
    with pytest.raises(ValueError):  # the C core refuses an unknown kind too (core_test.c)
        native.chase_order(lines, group, seed, "zigzag")


def test_a_random_order_run_says_its_order_and_a_ring_run_keeps_its_params(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    opts = LatencyOptions(size_bytes=64 << 10, pages="default", order="random")
    assert latency.labels(ctx, opts)[0].endswith(", random order")
    latency.run(ctx, opts)
    [m] = [m for m in ctx.metrics if m.name == "latency"]
    assert m.params["order"] == "random" and not ctx.errors
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=64 << 10, pages="default"))
    [m] = [m for m in ctx.metrics if m.name == "latency"]
    assert "order" not in m.params  # a ring run's figures join the stored ones as before


SMAPS = """\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
Rss:                   8 kB
AnonHugePages:         0 kB
7f0000000000-7f0040200000 rw-p 00000000 00:00 0
Size:            1050624 kB
Rss:             1048576 kB
Pss:             1048576 kB
AnonHugePages:   1046528 kB
7f0040200000-7f0040400000 rw-p 00000000 00:00 0
Size:               2048 kB
Rss:                2048 kB
AnonHugePages:      2048 kB
"""


def test_smaps_parsing():
    assert mapping_pages(SMAPS, 0x7F0000001000) == (1048576 * 1024, 1046528 * 1024)
    assert mapping_pages(SMAPS, 0x7F0040200000) == (2048 * 1024, 2048 * 1024)
    assert mapping_pages(SMAPS, 0x55D0C0000010) == (8 * 1024, 0)
    assert mapping_pages(SMAPS, 0x1000) is None


def test_page_label_never_claims_what_was_not_granted():
    assert page_label(4 << 20, 4 << 20, 4096, 2 << 20) == ("2MiB", 1.0)
    assert page_label(4 << 20, 0, 4096, 2 << 20) == ("4KiB", 0.0)
    label, frac = page_label(4 << 20, 2 << 20, 4096, 2 << 20)
    assert label == "mixed" and frac == 0.5
    assert page_label(0, 0, 65536, 512 << 20) == ("64KiB", 0.0)


def test_plan_sweeps_l1_to_dram_largest_first():
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    pts = latency.plan(topo, 0, LatencyOptions())
    small = [p for p in pts if not p.huge]
    assert small == sorted(small, key=lambda p: -p.size_bytes)
    assert small[-1].size_bytes == 8 << 10 and small[-1].level == "L1"
    # only the DRAM point is DRAM: the octaves between the L3 (32,000,000 B) and it are past it
    assert [p.level for p in small[:6]] == ["DRAM"] + ["past-L3"] * 5
    assert small[0].size_bytes == 1 << 30 and small[6].level == "L3"
    assert {p.level for p in small} == {"L1", "L2", "L3", "past-L3", "DRAM"}
    huge = sorted(p.size_bytes for p in pts if p.huge)
    assert huge[0] == 4 << 20 and huge[-1] == 1 << 30
    assert all((s // (4 << 20)).bit_length() % 2 == 1 for s in huge[:-1])  # every other octave
    # the VM's claimed 480 MiB L3 pushes the DRAM point to 2x that, rounded up to 1 GiB
    vm = topology.load_xml(DATA / "vm-live-2c.xml")
    assert latency.dram_size(vm, 0) == 1 << 30


def test_groups_only_for_cache_levels():
    assert latency.group_bytes(Point(1 << 30, False, "DRAM"), 4096, 2 << 20) == 0
    assert latency.group_bytes(Point(64 << 20, False, "past-L3"), 4096, 2 << 20) == 0
    assert latency.group_bytes(Point(1 << 20, False, "L2"), 4096, 2 << 20) == 64 * 4096
    assert latency.group_bytes(Point(8 << 20, True, "L3"), 4096, 2 << 20) == 64 << 21


def test_real_run_on_small_rings(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=128 << 10, pages="default"))
    [m] = ctx.metrics
    assert not ctx.errors
    assert m.unit == "ns" and m.better == "lower" and m.summary.median > 0
    assert m.params["page_size"].endswith("KiB") and m.params["level"] == "L2"


def test_a_ring_past_the_last_cache_is_walked_at_random_and_stored(tiny):
    """The 4 MiB ring is past the small topology's 2 MB L3 and below its 1 GiB DRAM point."""
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=4 << 20, pages="default"))
    [m] = ctx.metrics
    assert not ctx.errors and m.summary.median > 0
    assert m.params["level"] == "past-L3" and m.params["group_bytes"] == 0
    results.validate({**_doc_shell(), "metrics": [m.to_dict()]})


def test_huge_pages_are_labelled_as_granted(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=8 << 20, pages="huge"))
    [m] = ctx.metrics
    frac = m.params["huge_page_fraction"]
    assert m.params["huge_pages_requested"] is True
    if frac == 1.0:
        assert m.params["page_size"] == "2MiB"
    else:  # THP off or fragmented: a warning and the page size really obtained
        assert m.params["page_size"] in ("4KiB", "mixed")
        assert any("huge pages asked for" in w for w in ctx.warnings)


def test_cli_latency_run_and_errors(tmp_path):
    r, doc = run_json(tmp_path, "latency", "--size", "1MiB", "--pages", "default", "--quick",
                      "--details",
                      "--no-store")
    assert [m["params"]["size_bytes"] for m in doc["metrics"]] == [1 << 20]
    assert "Memory latency" in r.out
    assert_user_error(hpcprobe("run", "latency", "--cpu", "9999", "--no-store"), "--cpu 9999")
    assert_user_error(hpcprobe("run", "latency", "--size", "100", "--no-store"),
                      "--size 100 B: a pointer-chase ring needs at least 1024 B")
    assert_user_error(hpcprobe("run", "latency", "--size", "64TiB", "--no-store"), "available")
    assert_user_error(hpcprobe("run", "latency", "--size", "64TiB", "--dry-run"), "available")
    # one core: no other core streams, so no loaded curve by default and a mistake if asked
    one = str(DATA / "one-core.xml")
    r = hpcprobe("run", "latency", "--dry-run", "--input", one)
    assert r.code == 0 and "chase" in r.out and "loaded latency" not in r.out, r.err
    assert_user_error(hpcprobe("run", "latency", "--loaded", "--dry-run", "--input", one),
                      "--loaded: no core here but CPU 0's to stream")
    assert_user_error(hpcprobe("run", "memory", "--pages", "huge", "--no-store"), "--pages")


@pytest.mark.parametrize("bad", ["-1", "x"])
def test_cli_bad_cpu(bad):
    assert hpcprobe("run", "latency", "--cpu", bad, "--no-store").code == 2


def test_c2c_pairs_on_recorded_machines(nps4, xeon_smt):
    pairs = latency.c2c_pairs(nps4)
    rel = {latency.relation(nps4, a, b) for a, b in pairs}
    assert rel == {"same-l3", "same-numa", "same-package", "cross-package"}
    assert len(pairs) <= latency.MAX_PAIRS
    assert len(latency.c2c_pairs(nps4, all_pairs=True)) == 128 * 127 // 2
    x = latency.c2c_pairs(xeon_smt)
    assert {latency.relation(xeon_smt, a, b) for a, b in x} == {"same-core", "same-l3",
                                                                 "cross-package"}
    laptop = topology.load_xml(DATA / "laptop-8c.xml")
    assert [latency.relation(laptop, a, b) for a, b in latency.c2c_pairs(laptop)] == ["same-l3"]


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_c2c_measures_a_real_pair(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency._c2c(ctx, LatencyOptions(), deadline=time.perf_counter() + 1.0)
    [m] = ctx.metrics
    assert m.name == "core_to_core" and m.params["relation"] == "same-l3"
    assert m.summary.n >= 3 and m.summary.median > 0
    results.validate({**_doc_shell(), "metrics": [m.to_dict()]})


def _doc_shell() -> dict:
    return {"schema": "hpcprobe-result", "schema_version": 1, "run_id": "0" * 12,
            "created": "2026-01-01T00:00:00+00:00", "host": "h", "profile": "quick",
            "benchmarks": ["latency"], "provenance": {
                "host": "h", "cpu_model": None, "kernel": "k", "hpcprobe_version": "0",
                "compiler": "c", "isa_supported": [], "environment": {}},
            "topology": {"counts": {"packages": 1, "numa_nodes": 1, "l3_domains": 1,
                                    "cores": 2, "pus": 2}},
            "findings": [], "warnings": [], "errors": []}


def test_ring_bound_to_node_0_is_found_there():
    cpu = min(os.sched_getaffinity(0))
    with native.Team([cpu]) as team:
        team.chase_prepare(4 << 20, 64, 0, False, 7, node=0)
        addr, length = team.chase_mapping(cpu)
        assert length == 4 << 20
        assert native.memory_node(addr) == 0 == native.memory_node(addr + length - 64)
        assert team.chase_check(1 << 20)


def test_binding_to_a_missing_node_is_a_user_error():
    with native.Team([min(os.sched_getaffinity(0))]) as team:
        with pytest.raises(UserError, match="NUMA node 1000"):
            team.chase_prepare(1 << 20, 64, 0, False, 7, node=1000)


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_loaded_latency_curve(tiny):
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    a, b = sorted(os.sched_getaffinity(0))[:2]
    with native.Team([a, b]) as team:
        team.select([a])
        team.chase_prepare(4 << 20, 64, 0, False, 3)
        latency._loaded(ctx, team, a, [b], 4 << 20, 50.0, time.perf_counter() + 2.0)
    assert not ctx.errors
    lat = {m.params["load_threads"]: m for m in ctx.metrics if m.name == "loaded_latency"}
    bw = {m.params["load_threads"]: m for m in ctx.metrics if m.name == "loaded_bandwidth"}
    assert sorted(lat) == [0, 1] and lat[1].params["load_cpus"] == str(b)
    assert bw[0].summary.max == 0.0  # nobody streams at k = 0
    assert bw[1].summary.median > 0 and lat[1].summary.median > 0
    assert bw[1].unit == "GB/s" and lat[1].better == "lower"
    results.validate({**_doc_shell(), "metrics": [m.to_dict() for m in ctx.metrics]})


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_cli_pair():
    a, b = sorted(os.sched_getaffinity(0))[:2]
    r = hpcprobe("run", "latency", "--pair", f"{a},{b}", "--quick", "--no-store")
    assert r.code == 0, r.err
    assert "Core-to-core" in r.out
    assert_user_error(hpcprobe("run", "latency", "--pair", f"{a},9999", "--no-store"),
                      "--pair", "allowed cpuset")
    assert_user_error(hpcprobe("run", "latency", "--pair", f"{a},{a}", "--no-store"), "--pair")
    assert_user_error(hpcprobe("run", "latency", "--pair", "x", "--no-store"), "--pair")


def test_one_allowed_cpu_plans_no_pairs_and_no_readers():
    xml = (DATA / "laptop-8c.xml").read_text().replace(
        'allowed_cpuset="0x000000ff"', 'allowed_cpuset="0x00000001"')
    one = topology.from_hwloc_xml(xml, "one-cpu")
    assert latency.c2c_pairs(one) == []
    assert [p.level for p in latency.plan(one, 0, LatencyOptions(pages="default"))][-1] == "L1"


def test_huge_page_shortfalls_say_why():
    from hpcprobe.machine.sysinfo import huge_page_shortfall

    two = 2 << 20
    assert "smaller than one 2 MiB huge page" in huge_page_shortfall(1 << 20, two, "always",
                                                                      "madvise")
    assert "disabled" in huge_page_shortfall(8 << 20, two, "never", "madvise")
    assert "no transparent huge pages" in huge_page_shortfall(8 << 20, two, None, None)
    assert "fragmented" in huge_page_shortfall(8 << 20, two, "madvise", "defer")


def test_one_size_runs_no_level_check(tmp_path):
    _, doc = run_json(tmp_path, "latency", "--size", "64KiB", "--pages", "default", "--quick",
                      "--no-store")
    assert not [f for f in doc["findings"] if f.get("kind") == "cache_level"]
    assert not [w for w in doc["warnings"] if "not seen" in w]


def test_loaded_latency_needs_a_dram_ring():
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    ctx = RunContext(topo, profiles.get("quick"), "avx2")
    for size in (16 << 20, 64 << 20):  # in the L3, past it
        with pytest.raises(UserError, match="chases a DRAM ring"):
            latency.sweep(ctx, LatencyOptions(size_bytes=size, loaded=True))
    s, _ = latency.sweep(ctx, LatencyOptions(size_bytes=1 << 30, loaded=True))
    assert s.loaded and s.points[0].level == "DRAM"
    assert_user_error(hpcprobe("run", "latency", "--size", "64KiB", "--loaded", "--no-store"),
                      "--loaded", "--size")


def test_a_size_whose_every_sample_is_disturbed_keeps_a_figure_from_its_settled_passes(
        tiny, monkeypatch):
    """Every timed sample slower than the settled ring (here: any at all) is rejected: the
    size keeps a figure from the ring's settled passes (whole passes that agreed), with a
    finding and a warning that say so and name the host's load, and no error (the run does
    not exit 1 for the host's noise). A ring over half its cache level (tiny's L2 is 256000
    B) is not judged so: its passes vary by themselves (a ring of a Xeon guest's whole L2 had
    every sample rejected), and it keeps its samples."""
    from hpcprobe.probes import chase

    monkeypatch.setattr(chase, "DISTURBED", -1.0)
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=64 << 10, pages="default"))
    [m] = [m for m in ctx.metrics if m.name == "latency"]
    assert not ctx.errors and m.samples and all(x > 0 for x in m.samples)
    [f] = of_kind(ctx.findings, chase.MOSTLY_REJECTED)
    assert f["from"] == "settled passes" and f["rejected"] == f["timed"] > 0
    assert f["figure"] == "64 KiB default pages" and f["load_average"] >= 0
    [w] = [w for w in ctx.warnings if "settled pass(es) of the ring" in w]
    assert w.startswith("latency: 64 KiB default pages: ") and "load average" in w
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    latency.run(ctx, LatencyOptions(size_bytes=128 << 10, pages="default"))
    [m] = [m for m in ctx.metrics if m.name == "latency"]
    assert m.params["level"] == "L2" and not ctx.errors
    assert of_kind(ctx.findings, chase.MOSTLY_REJECTED) == []


def test_rejections_are_said_by_their_share(tiny):
    """A few rejected samples: one warning line; most: a finding and its warning, the figure
    from the samples left; all, with no settled pass either: nothing to keep (the family then
    says there is no figure)."""
    from hpcprobe.measure.sampling import Sampled
    from hpcprobe.probes import chase

    def said(samples: list[float], rejected: int, settled: list[float]
             ) -> tuple[RunContext, Sampled]:
        ctx = RunContext(tiny, profiles.get("quick"), "scalar")
        got = Sampled(samples=list(samples), rejected=rejected)
        chase._said(ctx, "latency", "1MiB", got, settled)
        return ctx, got

    few, got = said([5.0, 5.1, 5.2], 1, [5.0])
    assert few.findings == [] and len(few.warnings) == 1 and "1 sample(s)" in few.warnings[0]
    most, got = said([5.0], 3, [4.9])
    [f] = most.findings
    assert (f["rejected"], f["timed"], f["from"]) == (3, 4, "samples") and got.samples == [5.0]
    none, got = said([], 4, [])
    assert none.findings == [] and got.samples == []
