"""Planning the memory benchmark on recorded machines, and running it end to end."""

from __future__ import annotations

import re

import pytest

from conftest import DATA, two_cpus
from hpcprobe import native
from hpcprobe.common.errors import UserError
from hpcprobe.families.memory import bench as memory
from hpcprobe.families.memory.bench import MemoryOptions, default_plan, narrowed_plan
from hpcprobe.machine import provenance, sizing, topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import RunContext
from hpcprobe.results import model as results
from hpcprobe.results.model import Metric, Run


def _default(topo):
    s = memory.SETTINGS["default"]
    return default_plan(topo, s.sweep_kernels, s.stream_stores, s.sweep_points_per_octave)


def test_thread_ladder():
    assert sizing.thread_ladder(1) == [1]
    assert sizing.thread_ladder(6) == [1, 2, 4, 6]
    assert sizing.thread_ladder(8) == [1, 2, 4, 8]


def test_dram_working_sets_are_four_times_the_llc(machine):
    topo, _ = machine
    for m in _default(topo):
        if m.level == "DRAM":
            assert m.size_bytes >= 0.999 * 4 * sizing.llc_bytes(topo, m.cpus) - 3 * 512 * m.threads
            # and never less than the floor a guest's masked cache size cannot undercut
            memory = sum(d.memory_bytes or 0 for d in topo.numa_nodes)
            floor = min(sizing.DRAM_FLOOR, memory // 8) if memory else sizing.DRAM_FLOOR
            assert m.size_bytes >= 0.999 * floor - 3 * 512 * m.threads


def test_sweep_spans_l1_to_dram(nps4):
    plan = _default(nps4)
    one = [m for m in plan if (m.phase == "sweep" or m.in_sweep) and m.threads == 1
           and m.kernel == "triad"]
    levels = [m.level for m in sorted(one, key=lambda m: m.size_bytes)]
    order = ["L1", "L2", "L3", "past-L3", "DRAM"]
    assert levels[0] == "L1" and levels[-1] == "DRAM"
    assert set(order) <= set(levels)
    assert levels == sorted(levels, key=order.index)
    assert min(m.size_bytes for m in one) <= 48_000 // 2


def test_sweep_goes_one_octave_past_the_last_cache(nps4):
    """The points past the last level's share stop within an octave of it, so the level's edge
    is bracketed by points at most 2x apart; only the DRAM point lies further."""
    plan = _default(nps4)
    for m in plan:
        if m.phase != "sweep" or m.level == "DRAM":
            continue
        llc = dict(memory.cache_shares(nps4, m.cpus))["L3"]
        per_thread = m.size_bytes // m.threads
        assert per_thread < 2 * llc + sizing.SWEEP_QUANTUM
        assert (m.level == "past-L3") == (per_thread > llc)
    for threads in (1, 128):
        past = [m for m in plan if m.level == "past-L3" and m.threads == threads
                and m.kernel == "triad"]
        assert len(past) == 1  # one point per octave in the default profile


def test_a_sweep_point_at_a_capacity_is_that_level():
    """Octaves land on power-of-two capacities (this guest's 2 MiB L2), and rounding to whole
    quanta can put such a point a fraction of one past it: it is still that level's, not the
    next one's (a 32 MiB L3's point was once stored as DRAM at cache speed)."""
    topo = topology.load_xml(DATA / "vm-live-2c.xml")
    at = [m for m in _default(topo) if m.phase == "sweep"
          and abs((2 << 20) - m.size_bytes // m.threads) < sizing.SWEEP_QUANTUM]
    assert at and all(m.level == "L2" for m in at)


@pytest.mark.parametrize("machine_xml", ["vm-live-2c.xml", "no-caches"])
def test_every_planned_level_is_one_the_schema_takes(machine_xml, tiny):
    """Sweep points are stored with their level; a topology without cache information (the
    sweep then runs up to FALLBACK_LLC) labels them too."""
    if machine_xml == "no-caches":
        # the cache objects as groups: the tree and its CPUs as they were, no cache known
        text = re.sub(r'type="L\dCache"', 'type="Group"', (DATA / "tiny-2c.xml").read_text())
        topo = topology.from_hwloc_xml(text, "no caches")
        assert not topo.cache_levels()
    else:
        topo = topology.load_xml(DATA / machine_xml)
    plan = _default(topo)
    assert any(m.level.startswith("past-") for m in plan)
    metrics = [x for m in plan for x in memory._metrics(m, [1.0], "scalar", "0")]
    run = Run("0123456789ab", "2026-11-24T00:00:00+00:00", "h", "quick", ["memory"],
              provenance.collect(tiny, "scalar"), topo.to_dict(), metrics)
    results.validate(run.to_dict())


def test_stream_placements_on_nps4(nps4):
    stream = [m for m in _default(nps4) if m.phase == "stream"]
    teams = {(m.placement, m.threads) for m in stream}
    assert ("one-per-core", 128) in teams and ("one-per-core", 1) in teams
    assert ("one-per-l3", 32) in teams
    assert ("one-per-numa", 8) in teams
    for m in stream:
        if m.placement == "one-per-l3":
            assert len({nps4.pu(c).l3 for c in m.cpus}) == m.threads
    # all four STREAM kernels with both store types at each thread set
    per_team = {}
    for m in stream:
        per_team.setdefault(m.cpus, set()).add((m.kernel, m.stores))
    assert all(len(v) == 8 for v in per_team.values())
    # thread sets already measured under another placement are not measured twice
    assert len(per_team) == len({(m.placement, m.threads) for m in stream
                                 if m.kernel == "copy" and m.stores == "nt"})


def test_cache_share_of_shared_l3(nps4):
    team = tuple(range(4))  # one L3 domain
    shares = dict(memory.cache_shares(nps4, team))
    assert shares["L3"] == 32_000_000 // 4 and shares["L1"] == 48_000


def test_narrowed_plan(nps4):
    ms = narrowed_plan(nps4, MemoryOptions(kernels=("triad",), stores=("nt",), threads=(2,),
                                           size_bytes=2 << 30), False)
    assert len(ms) == 1
    m = ms[0]
    assert (m.kernel, m.stores, m.threads, m.level) == ("triad", "nt", 2, "DRAM")
    assert abs(m.size_bytes - (2 << 30)) < 3 * 8 * 64 * 2
    # past the L3 but below the DRAM working set (its floor, 1 GiB here): no DRAM figure
    [m] = narrowed_plan(nps4, MemoryOptions(kernels=("triad",), stores=("nt",), threads=(2,),
                                            size_bytes=256 << 20), False)
    assert m.level == "past-L3"
    # the DRAM floor itself (an eighth of this recorded node's 8 GiB) is DRAM on any thread
    # count, though both it and the DRAM working set are rounded to whole quanta
    assert {m.level for m in narrowed_plan(nps4, MemoryOptions(
        kernels=("triad", "copy"), threads=(1, 2, 3), size_bytes=1 << 30), False)} == {"DRAM"}


@pytest.mark.parametrize("opts,needle", [
    (MemoryOptions(kernels=("daxpy",)), "unknown"),
    (MemoryOptions(kernels=("load",), stores=("nt",)), "stores nothing"),
    (MemoryOptions(threads=(0,)), "at least 1"),
    (MemoryOptions(threads=(129,)), "oversubscribe"),
    (MemoryOptions(size_bytes=100), "too small"),
    (MemoryOptions(placement="bogus"), "unknown"),
])
def test_narrowed_errors(nps4, opts, needle):
    with pytest.raises(UserError, match=needle):
        narrowed_plan(nps4, opts, False)


def test_memory_check_refuses_too_large(nps4):
    ms = narrowed_plan(nps4, MemoryOptions(size_bytes=64 << 30), False)
    with pytest.raises(UserError, match="available"):
        memory.check_memory(ms, 8 << 30)
    memory.check_memory(ms, 1 << 40)


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_full_plan_runs_on_a_small_topology(tiny):
    """The default plan end to end, on a topology with this machine's CPU numbers but small
    caches, so that the DRAM sizes stay small."""
    ctx = RunContext(tiny, profiles.get("quick"), native.best_isa())
    memory.run(ctx, None)
    assert not ctx.errors
    bw = [m for m in ctx.metrics if m.name == "bandwidth"]
    assert {m.params["phase"] for m in bw} == {"sweep", "stream"}
    assert {m.params["level"] for m in bw} >= {"L1", "L2", "DRAM"}
    assert all(isinstance(m, Metric) and m.summary.n >= 3 and m.summary.median > 0 for m in bw)
    wa = {(m.params["kernel"], m.params["stores"], m.params["cpus"], m.params["size_bytes"]):
          m.summary.median for m in ctx.metrics if m.name == "bandwidth_write_allocate"}
    for m in bw:
        key = (m.params["kernel"], m.params["stores"], m.params["cpus"], m.params["size_bytes"])
        ratio = wa[key] / m.summary.median
        factors = {"copy": 1.5, "scale": 1.5, "add": 4 / 3, "triad": 4 / 3}
        expect = factors.get(m.params["kernel"], 1)
        assert ratio == pytest.approx(expect if m.params["stores"] == "regular" else 1.0)
    assert any(f["kind"] == "cache_level" for f in ctx.findings)


def test_default_plan_has_the_dram_triad_at_every_scaling_count():
    from conftest import DATA
    from hpcprobe.machine import topology
    from hpcprobe.machine.placement import active_counts

    topo = topology.load_xml(DATA / "laptop-8c.xml")
    s = memory.SETTINGS["default"]
    plan = default_plan(topo, s.sweep_kernels, s.stream_stores, s.sweep_points_per_octave,
                        active_counts(8, profiles.get("default").curve_points))
    triad = sorted(m.threads for m in plan if m.phase == "stream" and m.kernel == "triad"
                   and m.stores == "regular" and m.placement == "one-per-core")
    assert triad == list(range(1, 9))
    assert len(plan) == len(_default(topo)) + 4  # 3, 5, 6, 7 threads; triad only


def test_default_plan_on_one_allowed_cpu():
    from conftest import DATA
    from hpcprobe.machine import topology

    xml = (DATA / "laptop-8c.xml").read_text().replace(
        'allowed_cpuset="0x000000ff"', 'allowed_cpuset="0x00000001"')
    plan = _default(topology.from_hwloc_xml(xml, "one-cpu"))
    assert {m.cpus for m in plan} == {(0,)}
    assert {m.phase for m in plan} == {"sweep", "stream"}


def test_arrays_that_do_not_validate_give_no_figure(tiny, monkeypatch):
    """Every family that streams checks the arrays after its samples: a kernel that left them
    wrong gives an error naming the measurement, and no figure (memory and numa go on with
    their other measurements; a proxy's triad is its family's failure)."""
    from hpcprobe.common.errors import MeasurementError
    from hpcprobe.families.cg import bench as cg
    from hpcprobe.families.dslash import bench as dslash
    from hpcprobe.families.numa import bench as numa

    monkeypatch.setattr(native.Team, "stream_check", lambda self, kernel_id, elems: 1.0)
    quick = profiles.get("quick")
    ctx = RunContext(tiny, quick, native.best_isa())
    memory.run(ctx, MemoryOptions(kernels=("triad", "copy"), stores=("regular",), threads=(1,),
                                  size_bytes=1 << 20))
    assert not [m for m in ctx.metrics if m.benchmark == "memory"]
    assert len(ctx.errors) == 2 and all("validation failed" in e for e in ctx.errors)
    ctx = RunContext(tiny, quick, native.best_isa())
    numa.run(ctx, numa.NumaOptions(cpu_node=0, memory_node=0))
    assert not [m for m in ctx.metrics if m.name == "bandwidth"]
    assert [e for e in ctx.errors if e.startswith("numa ") and "validation failed" in e]
    for family, opts in ((cg, cg.CgOptions(grid=(16, 16, 16))),
                         (dslash, dslash.DslashOptions(l=(4,), actions=("wilson",)))):
        with pytest.raises(MeasurementError, match="validation failed"):
            family.run(RunContext(tiny, quick, native.best_isa()), opts)


class _ShiftingTeam:
    """A stand-in team whose timed samples run at one rate until `shift` of them were taken and
    at half of it after (a host that put the two vCPUs on one core for a while)."""

    def __init__(self, shift: float = float("inf"), invalid: str | None = None) -> None:
        self.shift, self.invalid, self.taken = shift, invalid, 0

    def stream_begin(self, kernel_id, elems):
        pass

    def stream_measure(self, kernel_id, isa, stores, elems, inner, reps):
        out = []
        for _ in range(reps):
            self.taken += 1
            out.append([elems * inner * 1e-9 * (1 if self.taken <= self.shift else 2)])
        return out, 0

    def stream_check(self, kernel_id, elems):
        from hpcprobe.native.kernels import KERNELS
        return 1.0 if self.invalid and kernel_id == KERNELS[self.invalid].kernel_id else 0.0


def test_cache_figures_take_their_samples_in_rounds(tiny):
    """Cache-resident figures of one thread set are sampled in turn, round after round, so a
    level the host holds for a while shows in every figure's samples and CI rather than in one
    figure's alone; a figure whose arrays fail validation after a round gives no figure, and
    the others still do."""
    from hpcprobe.probes.stream import Invalid, Measurement, measure_rounds

    quick = profiles.get("quick")
    ms = [Measurement("single", k, "regular", "one-per-core", (0,), 1024, "L1")
          for k in ("triad", "copy")]
    team = _ShiftingTeam()
    steady = measure_rounds(RunContext(tiny, quick, "scalar"), team, ms, 1.0, "memory")
    assert all(not isinstance(s, Invalid) and len(set(s)) == 1 for s in steady)
    assert all(quick.repetition.min_samples <= len(s) <= quick.repetition.max_samples
               for s in steady)
    team = _ShiftingTeam(shift=team.taken / 2)
    got = measure_rounds(RunContext(tiny, quick, "scalar"), team, ms, 1.0, "memory")
    for samples in got:
        assert not isinstance(samples, Invalid)
        fast, slow = max(samples), min(samples)
        assert fast == pytest.approx(2 * slow)
        assert sum(x == fast for x in samples) >= 2 and sum(x == slow for x in samples) >= 2
        m = Metric("memory", "bandwidth", "GB/s", {}, samples)
        assert m.summary.ci95 == (slow, fast)  # the CI says the level moved
    ctx = RunContext(tiny, quick, "scalar")
    got = measure_rounds(ctx, _ShiftingTeam(invalid="copy"), ms, 1.0, "memory")
    assert not isinstance(got[0], Invalid) and isinstance(got[1], Invalid)
    assert "copy" in str(got[1]) and "validation failed" in str(got[1])
