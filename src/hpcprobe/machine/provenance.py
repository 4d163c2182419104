"""Provenance: the system state a result depends on, read without privileges."""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

import hpcprobe
from hpcprobe import native
from hpcprobe.common import secrets
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.kernelfiles import read_text
from hpcprobe.machine import cpufreq, facts, sysinfo
from hpcprobe.machine.topology import Topology
from hpcprobe.results.node import Node

#: Environment variables that change how kernels, OpenMP, BLAS and MPI behave.
ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "OPENBLAS_", "MKL_", "BLIS_", "I_MPI_", "OMPI_",
                "MPICH_", "UCX_", "FI_", "SLURM_CPU", "HPCPROBE_")


def cpu_flags() -> list[str]:
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith(("flags", "Features")):
            return sorted(line.split(":", 1)[1].split())
    return []


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables that change how the run behaves, their secrets masked (`HPCPROBE_DB`'s
    password)."""
    src = os.environ if env is None else env
    return {k: secrets.variable(k, v) for k, v in sorted(src.items())
            if k.startswith(ENV_PREFIXES)}


#: DMI strings that any user may read (serial numbers and UUIDs are root-only and not wanted).
DMI_FIELDS = ("bios_vendor", "bios_version", "bios_date", "sys_vendor", "product_name",
              "board_vendor", "board_name")


def dmi(root: str = "/sys/class/dmi/id") -> dict[str, str]:
    return {f: v for f in DMI_FIELDS if (v := read_text(f"{root}/{f}") or "")}


def numa_per_package(topo: Topology) -> int | None:
    """NUMA domains per socket: 1, 2 or 4 on AMD EPYC in NPS1/2/4 (None without packages)."""
    return len(topo.numa_nodes) // len(topo.packages) if topo.packages else None


def l3_as_numa(topo: Topology) -> bool:
    """Whether each NUMA domain is one L3 domain (AMD's "L3 as NUMA" BIOS option)."""
    return len(topo.numa_nodes) > len(topo.packages) and \
        len(topo.numa_nodes) == len(topo.l3_domains)


def blas() -> str | None:
    """The BLAS that Debian's alternatives select for programs linked against libblas."""
    for link in ("/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                 "/etc/alternatives/libblas.so.3-aarch64-linux-gnu",
                 "/etc/alternatives/libblas.so.3"):
        if os.path.exists(link):
            return os.path.realpath(link)
    return None


def node(topo: Topology, isa: str) -> Node:
    """This host and build as a run records them (results.node declares the record)."""
    smt_active = read_text("/sys/devices/system/cpu/smt/active")
    lim = sysinfo.cgroup_memory_limit()
    pol = cpufreq.policy(topo.allowed_cpus[0])
    return Node(
        host=socket.gethostname(), cpu_model=topo.cpu_model, cpu_flags=tuple(cpu_flags()),
        kernel=f"{platform.system()} {platform.release()}", machine=platform.machine(),
        smt=topo.smt, smt_active=None if smt_active is None else smt_active == "1",
        numa_nodes=len(topo.numa_nodes), numa_per_package=numa_per_package(topo),
        l3_as_numa=l3_as_numa(topo), tuned_profile=read_text("/etc/tuned/active_profile"),
        dmi=dmi(), blas=blas(),
        memory_limit=None if lim is None else {"bytes": lim.limit, "where": lim.where},
        mem_total_bytes=sysinfo.mem_total_bytes(),
        thp=sysinfo.sysfs_choice(f"{sysinfo.THP_SYSFS}/enabled"),
        thp_defrag=sysinfo.sysfs_choice(f"{sysinfo.THP_SYSFS}/defrag"),
        governor=read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        cpufreq=None if pol is None else pol.to_dict(), compiler=native.build_info(),
        isa_supported=tuple(native.supported_isas()), isa=isa,
        hpcprobe_version=hpcprobe.__version__, kernels=native.source_id(),
        python=platform.python_version(), topology_source=topo.source,
        allowed_cpus=format_cpulist(topo.allowed_cpus), environment=environment())


def collect(topo: Topology, isa: str) -> dict[str, Any]:
    """Everything about this host and build that decides what a kernel measures: the node
    record and the node's facts (the DRAM ceiling, the links, the energy counters), but the
    MPI found (measure.runner.node_provenance adds it: mpi/ sits above machine/)."""
    return {**node(topo, isa).to_dict(), **facts.read(topo.cpu_model or "")}
