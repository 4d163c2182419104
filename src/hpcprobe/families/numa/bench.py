"""The NUMA benchmark: latency and bandwidth matrices, threads in domain i reading memory bound
to domain j (mbind), each binding read back page by page."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import OptionError
from hpcprobe.machine.placement import plan as place
from hpcprobe.machine.sizing import dram_working_set, elems_for
from hpcprobe.machine.sysinfo import huge_page_bytes
from hpcprobe.machine.topology import Topology, numa_of
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, option
from hpcprobe.native import Team
from hpcprobe.probes.chase import CHECK_STEPS, SEED, STRIDE, chase_samples, dram_size, granted_pages
from hpcprobe.probes.stream import Invalid, Measurement, measure
from hpcprobe.results.findings import Finding, kind
from hpcprobe.results.model import Metric

SKIPPED = kind("skipped", "a benchmark the profile leaves out on this machine", "note",
               "the run's JSON document", code="HP106", action="none")

#: Share of the NUMA budget for the latency matrix; the bandwidth matrix gets the rest.
LATENCY_SHARE = 0.5


@dataclass(frozen=True)
class Settings:
    """What a profile gives the numa family."""

    budget_s: float
    on_one_node: bool  # run the 1x1 matrix where there is one NUMA domain


SETTINGS = {
    "quick": Settings(3.0, on_one_node=False),
    "default": Settings(3.0, on_one_node=True),
    "thorough": Settings(60.0, on_one_node=True),
}


@dataclass(frozen=True)
class NumaOptions:
    """Options that narrow `hpcprobe run numa` to one cell."""

    cpu_node: int | None = option(Flag(
        "--cpu-node", "only threads in this NUMA domain (OS index)",
        parse=options.at_least(0, "a NUMA domain's OS index")))
    memory_node: int | None = option(Flag(
        "--memory-node", "only memory bound to this NUMA domain",
        parse=options.at_least(0, "a NUMA domain's OS index")))


def domain_cpus(topo: Topology, node: int) -> tuple[int, ...]:
    """One thread per core of NUMA domain `node` (by OS index), in spread order."""
    return tuple(c for c in place(topo, "one-per-core").cpus if numa_of(topo, c) == node)


def cells(topo: Topology, opts: NumaOptions) -> list[tuple[int, int]]:
    """(CPU domain, memory domain) pairs, by OS index: every domain with allowed cores against
    every domain with memory, or the one cell asked for."""
    cpu_nodes = [n.os_index for n in topo.numa_nodes
                 if n.os_index is not None and domain_cpus(topo, n.os_index)]
    mem_nodes = [n.os_index for n in topo.numa_nodes
                 if n.os_index is not None and (n.memory_bytes is None or n.memory_bytes)]
    known = ", ".join(str(n.os_index) for n in topo.numa_nodes)
    for flag, value, valid in (("<cpu_node>", opts.cpu_node, cpu_nodes),
                               ("<memory_node>", opts.memory_node, mem_nodes)):
        if value is not None and value not in valid:
            raise OptionError(f"{flag} {value}: no such NUMA domain with "
                            f"{'allowed cores' if flag == '<cpu_node>' else 'memory'} here "
                            f"(domains: {known}); see `hpcprobe topology`")
    return [(i, j) for i in cpu_nodes for j in mem_nodes
            if opts.cpu_node in (None, i) and opts.memory_node in (None, j)]


def _bound_to(addr: int, length: int) -> list[int]:
    """The nodes holding the first and last page of a region ([j] when a binding to j held)."""
    return sorted({native.memory_node(addr), native.memory_node(addr + length - STRIDE)})


def skipped(ctx: RunContext, opts: NumaOptions) -> bool:
    """One NUMA domain and a profile that leaves the 1x1 matrix to memory and latency."""
    return (len(ctx.topo.numa_nodes) == 1 and not SETTINGS[ctx.profile.name].on_one_node
            and opts == NumaOptions())


def labels(ctx: RunContext, opts: NumaOptions | None) -> list[str]:
    """Each cell of the matrices (none where the profile skips them)."""
    opts = opts or NumaOptions()
    if skipped(ctx, opts):
        return []
    return [f"CPU domain {i}, memory bound to domain {j}: latency and bandwidth"
            for i, j in cells(ctx.topo, opts)]


def run(ctx: RunContext, opts: NumaOptions | None) -> None:
    opts = opts or NumaOptions()
    if skipped(ctx, opts):
        ctx.find(Finding("numa", SKIPPED, f"one NUMA domain: profile {ctx.profile.name} leaves "
                         "the 1x1 matrix to the memory and latency benchmarks"))
        return
    try:
        _run(ctx, opts, bind=True)
    except native.BindingUnavailable as exc:
        # Without mbind, memory goes where the touching thread is: only the diagonal is honest.
        ctx.warnings.append(f"numa: {exc}; measuring each domain with its own memory by first "
                            "touch (the diagonal only)")
        ctx.metrics[:] = [m for m in ctx.metrics if m.benchmark != "numa"]
        _run(ctx, opts, bind=False)


def _run(ctx: RunContext, opts: NumaOptions, bind: bool) -> None:
    topo = ctx.topo
    todo = [(i, j) for i, j in cells(topo, opts) if bind or i == j]
    policy = "bind" if bind else "first-touch"
    base_page, huge_page = resource.getpagesize(), huge_page_bytes()
    ctx.progress.start("NUMA matrices", 2 * len(todo))
    budget = SETTINGS[ctx.profile.name].budget_s
    lat_deadline = time.perf_counter() + budget * LATENCY_SHARE
    for n, (i, j) in enumerate(todo):
        cpu = domain_cpus(topo, i)[0]
        size = dram_size(topo, cpu)
        with Team([cpu]) as team:
            team.chase_prepare(size, STRIDE, 0, False, SEED, node=j if bind else None)
            addr, length = team.chase_mapping(cpu)
            seen = _bound_to(addr, length)
            label, fraction = granted_pages(team, cpu, base_page, huge_page)
            samples = chase_samples(ctx, team, max(0.0, lat_deadline - time.perf_counter())
                                    / (len(todo) - n), f"latency {i}->{j}", benchmark="numa")
            valid = team.chase_check(CHECK_STEPS)
        ctx.progress.advance(f"NUMA latency {i}->{j}")
        if not valid or not samples:
            ctx.errors.append(f"numa latency {i}->{j}: " + ("the ring did not validate" if not
                              valid else "every sample was rejected (disturbed)")
                              + "; no figure")
            continue
        _warn_binding(ctx, "latency", i, j, seen)
        ctx.metrics.append(Metric("numa", "latency", "ns", {
            "cpu_domain": i, "memory_domain": j, "memory_domain_seen": seen, "cpus": str(cpu),
            "threads": 1, "size_bytes": size, "level": "DRAM", "page_size": label,
            "huge_page_fraction": fraction, "memory_policy": policy, "load_threads": 0},
            samples, "lower"))
    bw_deadline = time.perf_counter() + budget * (1 - LATENCY_SHARE)
    for n, (i, j) in enumerate(todo):
        cpus = domain_cpus(topo, i)
        total = dram_working_set(topo, cpus)
        m = Measurement("numa", "load", "regular", f"numa{i}", cpus,
                        elems_for("load", total, len(cpus)), "DRAM")
        with Team(cpus) as team:
            team.stream_prepare(m.elems, node=j if bind else None)
            try:
                samples = measure(ctx, team, m, max(0.0, bw_deadline - time.perf_counter())
                                  / (len(todo) - n), "numa")
            except Invalid as exc:
                ctx.errors.append(str(exc))
                continue
            finally:
                ctx.progress.advance(f"NUMA bandwidth {i}->{j}")
            seen = sorted({s for c in cpus for s in _bound_to(*team.stream_buffer(c))})
            binding = format_cpulist(team.binding().cpus)
        _warn_binding(ctx, "bandwidth", i, j, seen)
        ctx.metrics.append(Metric("numa", "bandwidth", "GB/s", {
            "cpu_domain": i, "memory_domain": j, "memory_domain_seen": seen, "cpus": binding,
            "threads": len(cpus), "kernel": "load", "stores": "regular",
            "size_bytes": m.size_bytes, "level": "DRAM", "memory_policy": policy,
            "isa": ctx.isa}, samples))


def _warn_binding(ctx: RunContext, what: str, i: int, j: int, seen: list[int]) -> None:
    if seen != [j]:
        ctx.warnings.append(f"numa {what} {i}->{j}: memory bound to node {j} was found on "
                            f"node(s) {seen}")
