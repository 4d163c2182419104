"""Recorded nodes, and a model of their figures that stands in for the native core.

A recorded node is made of the trees the project keeps (hwloc XML or a synthetic hwloc export of
the machine's shape, its /proc/cpuinfo, SMBIOS type 17 entries, EDAC, network links, GPUs); its
figures come from a model (clock, cache ports, DRAM channels, latencies), computed per job by
`ModelTeam` in place of the native thread team. The whole product path then runs on it as on a
real node: the families plan and run their own code, the roofline derives, the run is
validated, stored, judged, exported. This lives in the tests only: nothing in the package can
reach it.

Faults are injected into the model (`Figures.slow_cpus`, a DIMM missing from the SMBIOS tree, a
degraded link tree): the judgement they belong to must find them, and nothing else."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from hpcprobe import native
from hpcprobe.machine import (
    cacheports,
    clock,
    dimms,
    energy,
    facts,
    flopmodel,
    gpuhealth,
    gpus,
    links,
    provenance,
    steal,
    sysinfo,
    topology,
)
from hpcprobe.machine.sizing import cache_shares
from hpcprobe.machine.topology import Topology
from hpcprobe.native.kernels import KERNELS, StreamKernel
from hpcprobe.native.peak import PEAK_KERNELS

DATA = Path(__file__).parent / "data"
#: A tree that is not there: a node without SMBIOS, EDAC or links
NOWHERE = DATA / "absent"


@dataclass(frozen=True)
class Figures:
    """What the modelled node delivers: its all-core clock under each load (GHz), its DRAM
    bandwidth per socket and per core (GB/s), its latencies (ns) and its share of the cache
    ports' rate; `slow_cpus` CPU -> its clock as a share of the others' (a fault)."""

    clock_ghz: dict[str, float]
    dram_socket_gbs: float
    dram_core_gbs: float = 18.0
    dram_ns: float = 110.0
    remote_ns: float = 60.0  # added for memory on another socket
    l3_bytes_per_cycle: float = 24.0
    port_share: float = 0.85  # of the cache ports' bytes a cycle
    flop_share: float = 0.97  # of the FLOP model
    slow_cpus: dict[int, float] = field(default_factory=dict)
    noise: float = 0.002


@dataclass(frozen=True)
class Node:
    """A recorded node: its trees and a model of its figures."""

    name: str
    xml: str  # a file under data/, or a synthetic shape "sockets x cores [x smt] / numa"
    cpuinfo: str
    figures: Figures
    smbios: str | None = None
    edac: str | None = None
    links: str | None = None
    gpus: str | None = None  # a recorded GPU node (tests/gpunodes.py) or None
    #: what its recorded trees hold that a check must fail it for (the A100 node's GPUs
    #: were recorded with memory errors, a failed row remapping and a link at x8)
    recorded_faults: tuple[str, ...] = ()

    def topology(self) -> Topology:
        if self.xml.endswith(".xml"):
            return topology.load_xml(DATA / self.xml)
        return topology.from_hwloc_xml(synthetic_xml(self.xml, self.cpu_model()), self.xml)

    def cpuid(self) -> flopmodel.CpuId:
        got = flopmodel.parse_cpuinfo((DATA / self.cpuinfo).read_text())
        assert got is not None, self.cpuinfo
        return got

    def cpu_model(self) -> str:
        return self.cpuid().model_name

    def isas(self) -> list[str]:
        flags = self.cpuid().flags
        return [i for i in native.isa_names()
                if i == "scalar" or (i == "avx2" and {"avx2", "fma"} <= flags)
                or (i == "avx512" and "avx512f" in flags)]


def _cpuset(cpus: Sequence[int]) -> str:
    return hex(sum(1 << c for c in cpus))


def synthetic_xml(shape: str, model: str) -> str:
    """An hwloc 2 export of a regular machine: "2x64/4" is 2 sockets of 64 cores, 4 NUMA
    domains a socket (NPS4), one L3 per 8 cores (AMD's CCDs); "2x28x2/1" 28 cores with two PUs
    each, one L3 a NUMA domain (Intel's mesh, for an Intel model name)."""
    dims, numa = shape.split("/")
    parts = [int(x) for x in dims.split("x")]
    sockets, cores, smt = parts[0], parts[1], parts[2] if len(parts) > 2 else 1
    intel = "Intel" in model
    l3_cores = cores // int(numa) if intel else 8
    pus = sockets * cores * smt

    def pu_ids(core: int) -> list[int]:  # Linux numbers the second PU of each core after all
        return [core + k * sockets * cores for k in range(smt)]

    out = ['<?xml version="1.0" encoding="UTF-8"?>', '<topology version="2.0">',
           f'<object type="Machine" os_index="0" cpuset="{_cpuset(range(pus))}" '
           f'allowed_cpuset="{_cpuset(range(pus))}">']
    core = 0
    for s in range(sockets):
        out.append(f'<object type="Package" os_index="{s}"><info name="CPUModel" '
                   f'value="{model}"/>')
        per_numa = cores // int(numa)
        for n in range(int(numa)):
            node = s * int(numa) + n
            cpus = [p for c in range(core, core + per_numa) for p in pu_ids(c)]
            out.append(f'<object type="Group" cpuset="{_cpuset(cpus)}"><object type="NUMANode" '
                       f'os_index="{node}" cpuset="{_cpuset(cpus)}" '
                       f'local_memory="{(768 << 30) // (sockets * int(numa))}"/>')
            for first in range(core, core + per_numa, l3_cores):
                l3 = [p for c in range(first, first + l3_cores) for p in pu_ids(c)]
                size = (2 << 20) * l3_cores if intel else 32 << 20
                out.append(f'<object type="L3Cache" cache_size="{size}" depth="3" '
                           f'cpuset="{_cpuset(l3)}">')
                for c in range(first, first + l3_cores):
                    out.append(f'<object type="L2Cache" cache_size="{(2 if intel else 1) << 20}" '
                               'depth="2"><object type="L1Cache" cache_size="49152" depth="1">'
                               f'<object type="Core" os_index="{c}">')
                    out += [f'<object type="PU" os_index="{p}"/>' for p in pu_ids(c)]
                    out.append("</object></object></object>")
                out.append("</object>")
            out.append("</object>")
            core += per_numa
        out.append("</object>")
    return "\n".join([*out, "</object>", "</topology>"])


# -- the model of a node's figures, in place of the native thread team -------------------------

_BY_ID: dict[int, StreamKernel] = {k.kernel_id: k for k in KERNELS.values()}


class ModelTeam:
    """native.Team's interface, each job's seconds from the node's model (a little noise, from
    a seeded generator): nothing runs, nothing is pinned."""

    node: Node
    topo: Topology

    def __init__(self, cpus: Sequence[int]) -> None:
        self.cpus = tuple(cpus)
        self.active = self.cpus
        self.prepared_elems = 0
        self.memory_node: int | None = None
        self.ring = 0
        self.kernel = _BY_ID[min(_BY_ID)]
        self.rng = random.Random(sum(self.cpus) * 7919 + len(self.cpus))
        self.shares: dict[tuple[int, ...], list[tuple[str, int]]] = {}
        self.pus = {p.os_index: p for p in self.topo.pus}
        self.sockets = {p.numa: p.package for p in self.topo.pus}
        self.arch = flopmodel.identify(self.node.cpuid()).arch

    def __enter__(self) -> ModelTeam:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        pass

    def close(self) -> None:
        pass

    @property
    def size(self) -> int:
        return len(self.active)

    def select(self, cpus: Sequence[int]) -> None:
        self.active = tuple(cpus)

    def binding(self) -> native.Binding:
        return native.Binding(self.active, tuple(1 for _ in self.active))

    # the model
    def _noisy(self, x: float) -> float:
        return x * (1 + self.node.figures.noise * self.rng.random())

    def _ghz(self, cpu: int, load: str) -> float:
        f = self.node.figures
        return f.clock_ghz.get(load, f.clock_ghz["scalar"]) * f.slow_cpus.get(cpu, 1.0)

    def _level(self, per_thread: int) -> str:
        if self.active not in self.shares:
            self.shares[self.active] = cache_shares(self.topo, self.active)
        for name, share in self.shares[self.active]:
            if per_thread <= share:
                return name
        return "DRAM"

    def _socket_of_memory(self, cpu: int) -> int:
        node = self.memory_node if self.memory_node is not None else self.pus[cpu].numa
        return self.sockets[node]

    def _stream_gbs(self, cpu: int, k: StreamKernel, isa: str, stores: str, level: str,
                    sharing: dict[int, int]) -> float:
        """GB/s (STREAM counting) of one thread of the team; `sharing`: threads streaming
        from each socket's memory."""
        f, ghz = self.node.figures, self._ghz(cpu, isa)
        if level in ("L1", "L2"):
            ports = cacheports.PORTS.get(self.arch.name) if self.arch else None
            width = cacheports.ISA_WIDTH.get(isa, 64)
            bpc = ports.bytes_per_cycle(level, k.loads, k.stores, width, stores == "regular") \
                if ports else None
            return (bpc or (32.0 if level == "L1" else 16.0)) * f.port_share * ghz
        if level != "DRAM":
            return f.l3_bytes_per_cycle * ghz
        socket = self._socket_of_memory(cpu)
        gbs = min(f.dram_core_gbs, f.dram_socket_gbs / sharing[socket])
        return gbs if self.pus[cpu].package == socket else gbs / 2

    def _latency_ns(self, cpu: int) -> float:
        f, level = self.node.figures, self._level(self.ring)
        cycles = {"L1": 4, "L2": 14}.get(level)
        if cycles is not None:
            return cycles / self._ghz(cpu, "scalar")
        if level != "DRAM":
            return 50 / self._ghz(cpu, "scalar")
        remote = self.pus[cpu].package != self._socket_of_memory(cpu)
        return f.dram_ns + (f.remote_ns if remote else 0.0)

    # streaming
    def stream_prepare(self, elems_per_thread: int, huge_pages: bool = False,
                       node: int | None = None) -> None:
        self.prepared_elems, self.memory_node = elems_per_thread, node

    def stream_begin(self, kernel_id: int, elems: int) -> None:
        self.kernel = _BY_ID[kernel_id]

    def stream_measure(self, kernel_id: int, isa: str, stores: str, elems: int, inner: int,
                       reps: int) -> tuple[list[list[float]], int]:
        k = _BY_ID[kernel_id]
        level = self._level(k.arrays * 8 * elems)
        sockets = [self._socket_of_memory(c) for c in self.active]
        sharing = {s: sockets.count(s) for s in sockets}
        secs = [k.stream_bytes * elems * inner / (
            self._stream_gbs(c, k, isa, stores, level, sharing) * 1e9) for c in self.active]
        return [[self._noisy(t) for t in secs] for _ in range(reps)], 0

    def stream_check(self, kernel_id: int, elems: int) -> float:
        return 0.0

    def stream_buffer(self, cpu: int) -> tuple[int, int]:
        return self._address(cpu), self.prepared_elems * 8

    # chasing
    def chase_prepare(self, size_bytes: int, stride: int, group_bytes: int, huge_pages: bool,
                      seed: int, node: int | None = None, order: str = "ring") -> None:
        self.ring, self.memory_node = size_bytes, node

    def chase_measure(self, loads: int, reps: int) -> list[list[float]]:
        return [[self._noisy(loads * self._latency_ns(c) * 1e-9) for c in self.active]
                for _ in range(reps)]

    def chase_check(self, max_steps: int) -> bool:
        return True

    def chase_mapping(self, cpu: int) -> tuple[int, int]:
        return self._address(cpu), self.ring

    def _address(self, cpu: int) -> int:
        """A made-up address that says which NUMA domain holds the memory (memory_node)."""
        node = self.memory_node if self.memory_node is not None else self.pus[cpu].numa
        return (node + 1) << 40

    def loaded_latency(self, loads: int, kernel_id: int, isa: str,
                       elems: int) -> tuple[float, list[tuple[float, int]]]:
        cpu, loaders = self.active[0], self.active[1:]
        k = _BY_ID[kernel_id]
        chase = loads * self._latency_ns(cpu) * (1 + 0.05 * len(loaders)) * 1e-9
        gbs = self.node.figures.dram_core_gbs
        passes = max(1, int(chase * gbs * 1e9 / (k.stream_bytes * elems)))
        return self._noisy(chase), [(passes * k.stream_bytes * elems / (gbs * 1e9), passes)
                                    for _ in loaders]

    def c2c_measure(self, rounds: int, reps: int) -> list[float]:
        a, b = self.active[:2]
        ns = 40.0 if self.pus[a].package == self.pus[b].package else 130.0
        return [self._noisy(2 * rounds * ns * 1e-9) for _ in range(reps)]

    # the clock and the FLOP kernels
    def clock_chain(self, load: str, iters: int,
                    reps: int) -> tuple[list[list[float]], list[list[bool]]]:
        times = [[self._noisy((iters * 64 + 200) / (self._ghz(c, load) * 1e9))
                  for c in self.active] for _ in range(reps)]
        return times, [[False] * len(self.active) for _ in range(reps)]

    def peak_measure(self, isa: str, precision: str, op: str, iters: int, calls: int,
                     reps: int) -> tuple[list[list[float]], list[list[bool]]]:
        k = next(p for p in PEAK_KERNELS if (p.isa, p.precision, p.op) == (isa, precision, op))
        per_cycle = (self.arch.flops_per_cycle(k) if self.arch else None) \
            or k.flops_per_iter / 4
        flops = calls * iters * k.flops_per_iter
        times = [[self._noisy(flops / (per_cycle * self.node.figures.flop_share
                                       * self._ghz(c, isa) * 1e9)) for c in self.active]
                 for _ in range(reps)]
        return times, [[False] * len(self.active) for _ in range(reps)]


@contextmanager
def recorded(node: Node, mp: pytest.MonkeyPatch) -> Iterator[Topology]:
    """This process as the recorded node: its topology, CPU, firmware and links read from its
    trees, its thread teams the model's. Everything is undone on leaving."""
    topo = node.topology()
    team = type("Team", (ModelTeam,), {"node": node, "topo": topo})
    real = native.Team
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("hpcprobe") and \
                getattr(mod, "Team", None) is real:
            mp.setattr(mod, "Team", team)
    cpuid = node.cpuid()
    mp.setattr(flopmodel, "read_cpuid", lambda path="/proc/cpuinfo": cpuid)
    mp.setattr(provenance, "cpu_flags", lambda: sorted(cpuid.flags))
    mp.setattr(native, "supported_isas", node.isas)
    mp.setattr(native, "best_isa", lambda: node.isas()[-1])
    mp.setattr(native, "memory_node", lambda addr: (addr >> 40) - 1)
    # the node's facts from its recorded trees: a fact the harness does not know fails here,
    # never read from this machine
    recorded = {"dram_ceiling": lambda cpu_model, sysfs: dimms.dram_ceiling(
                    cpu_model, str(DATA / "smbios" / node.smbios if node.smbios else NOWHERE),
                    str(DATA / "edac" / node.edac if node.edac else NOWHERE)).to_dict(),
                "links": lambda cpu_model, sysfs: links.read(
                    DATA / "links" / node.links if node.links else NOWHERE),
                # no recorded node keeps energy counters (test_energy's trees do): none read,
                # by the header's fact nor by the run's meter
                "energy": lambda cpu_model, sysfs: energy.fact(NOWHERE),
                # its GPUs as the harness hands them in (test_whole_path.as_node replaces
                # gpus.discover with the node's recorded nvidia-smi document, or none)
                "gpu_health": lambda cpu_model, sysfs: gpuhealth.stored(gpus.discover())}
    mp.setattr(energy, "POWERCAP", NOWHERE)
    mp.setattr(facts, "FACTS", tuple(replace(f, read=recorded[f.key]) for f in facts.FACTS))
    mp.setattr(sysinfo, "mem_total_bytes", lambda: topo.memory_bytes)
    # the hypervisor's steal from this host's CPUs is none of the recorded node's
    mp.setattr(steal, "read", lambda cpus=None, path="/proc/stat": None)
    # the model has no idle clock for a warm-up to leave: one chain, not half a second of them
    mp.setattr(clock, "warm_up", lambda team, load, seconds=0.0: team.clock_chain(load, 1, 1))
    mp.setattr("socket.gethostname", lambda: node.name)
    yield topo


def with_figures(node: Node, **changes: Any) -> Node:
    """The node with its model changed (a fault)."""
    return replace(node, figures=replace(node.figures, **changes))


#: The machines the project claims, each built from what it has recorded of it.
NODES: tuple[Node, ...] = (
    Node("epyc7763-nps4", "epyc-2s-nps4-128c.xml", "cpuinfo/zen3-epyc-7763.txt",
         Figures({"scalar": 2.9, "avx2": 2.8}, 150.0), "epyc-7763-2s-full",
         "epyc-7763-2s-full", "hdr-node"),
    Node("epyc7742", "2x64/1", "cpuinfo/zen2-epyc-7742.txt",
         Figures({"scalar": 3.0, "avx2": 2.9}, 140.0)),
    Node("epyc9654", "2x96/4", "cpuinfo/zen4-epyc-9654.txt",
         Figures({"scalar": 3.5, "avx2": 3.4, "avx512": 3.3}, 330.0), "epyc-9654-2s-genoa"),
    Node("epyc9755", "2x128/1", "cpuinfo/zen5-epyc-9755.txt",
         Figures({"scalar": 3.8, "avx2": 3.6, "avx512": 3.5}, 440.0)),
    Node("xeon8180", "2x28x2/1", "cpuinfo/skylake-sp-8180.txt",
         Figures({"scalar": 2.6, "avx2": 2.3, "avx512": 1.9}, 100.0)),
    Node("xeon8380", "2x40x2/1", "cpuinfo/ice-lake-sp-8380.txt",
         Figures({"scalar": 3.0, "avx2": 2.8, "avx512": 2.5}, 150.0),
         "xeon-8380-2s-mixed-speed", "xeon-8380-2s-uncorrected"),
    Node("xeon8480", "2x56x2/1", "cpuinfo/sapphire-rapids-8480.txt",
         Figures({"scalar": 3.0, "avx2": 2.7, "avx512": 2.4}, 240.0)),
    Node("a100-8gpu", "2x64/1", "cpuinfo/zen2-epyc-7742.txt",
         Figures({"scalar": 3.0, "avx2": 2.9}, 140.0), gpus="a100",
         recorded_faults=("GPU3", "GPU5", "GPU6")),
    Node("h100-guest", "1x16/1", "cpuinfo/sapphire-rapids-8480.txt",
         Figures({"scalar": 2.9, "avx2": 2.6, "avx512": 2.3}, 60.0), gpus="h100-vm"),
    Node("guest-2vcpu", "vm-live-2c.xml", "cpuinfo-vm-masked.txt",
         Figures({"scalar": 2.9, "avx2": 2.6, "avx512": 2.3}, 20.0, dram_core_gbs=12.0)),
)
