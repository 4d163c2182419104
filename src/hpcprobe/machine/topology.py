"""The machine model (packages, NUMA, L3 domains, cores, PUs, caches) from hwloc, XML or sysfs."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe import tools
from hpcprobe.common.cpulist import format_cpulist, parse_cpulist, parse_hwloc_bitmap
from hpcprobe.common.errors import UserError
from hpcprobe.common.files import read_input
from hpcprobe.common.kernelfiles import read_text
from hpcprobe.common.units import format_bytes

if TYPE_CHECKING:  # parsed where hwloc's XML is read: a state-only check reads sysfs
    import xml.etree.ElementTree as ET


@dataclass(frozen=True)
class Domain:
    """A set of PUs sharing something: a package, a NUMA node, an L3 cache or a core."""

    kind: str  # "package", "numa", "l3", "core"
    index: int  # logical index among domains of this kind, in topology order
    os_index: int | None
    cpus: tuple[int, ...]  # PU OS indices in topology order
    memory_bytes: int | None = None  # NUMA nodes
    size_bytes: int | None = None  # caches


@dataclass(frozen=True)
class Cache:
    """One instance of a data or unified cache."""

    level: int
    size_bytes: int
    line_bytes: int
    cpus: tuple[int, ...]


@dataclass(frozen=True)
class PU:
    """A hardware thread with the logical index of each domain that contains it."""

    os_index: int
    core: int
    package: int
    numa: int
    l3: int | None
    allowed: bool = True


@dataclass(frozen=True)
class Topology:
    """The machine, flattened into domains keyed by PU sets, with PUs in topology order."""

    source: str
    pus: tuple[PU, ...]
    packages: tuple[Domain, ...]
    numa_nodes: tuple[Domain, ...]
    l3_domains: tuple[Domain, ...]
    cores: tuple[Domain, ...]
    caches: tuple[Cache, ...]
    cpu_model: str | None = None

    def counts(self) -> dict[str, int]:
        return {
            "packages": len(self.packages),
            "numa_nodes": len(self.numa_nodes),
            "l3_domains": len(self.l3_domains),
            "cores": len(self.cores),
            "pus": len(self.pus),
        }

    @property
    def recorded(self) -> bool:
        """Read from a file (`--input`: another machine, or this one another time), not this
        machine now."""
        return self.source.startswith("xml:")

    @property
    def memory_bytes(self) -> int:
        """The memory its NUMA domains state (0 where none does)."""
        return sum(d.memory_bytes or 0 for d in self.numa_nodes)

    @property
    def allowed_cpus(self) -> tuple[int, ...]:
        return tuple(p.os_index for p in self.pus if p.allowed)

    def pu(self, os_index: int) -> PU:
        for p in self.pus:
            if p.os_index == os_index:
                return p
        raise KeyError(os_index)

    @property
    def smt(self) -> int:
        """Hardware threads per core (the most common count)."""
        return Counter(len(c.cpus) for c in self.cores).most_common(1)[0][0] if self.cores else 1

    def cache_levels(self) -> list[int]:
        return list(self._levels)

    @cached_property
    def _levels(self) -> tuple[int, ...]:
        return tuple(sorted({c.level for c in self.caches}))

    def cache_for(self, level: int, cpu: int) -> Cache | None:
        """The cache instance of `level` that serves `cpu`."""
        return self._cache_of.get((level, cpu))

    @cached_property
    def _cache_of(self) -> dict[tuple[int, int], Cache]:
        """(level, CPU) -> the cache instance serving it (the first listed, as a search of
        `caches` finds it): planning asks this for every CPU of every team, thousands of
        times on a 2 x 64-core node."""
        out: dict[tuple[int, int], Cache] = {}
        for c in self.caches:
            for cpu in c.cpus:
                out.setdefault((c.level, cpu), c)
        return out

    def to_dict(self) -> dict[str, Any]:
        def dom(d: Domain) -> dict[str, Any]:
            out: dict[str, Any] = {"index": d.index, "os_index": d.os_index,
                                   "cpus": format_cpulist(d.cpus)}
            if d.memory_bytes is not None:
                out["memory_bytes"] = d.memory_bytes
            if d.size_bytes is not None:
                out["size_bytes"] = d.size_bytes
            return out

        return {
            "source": self.source,
            "cpu_model": self.cpu_model,
            "counts": self.counts(),
            "smt": self.smt,
            "allowed_cpus": format_cpulist(self.allowed_cpus),
            "packages": [dom(d) for d in self.packages],
            "numa_nodes": [dom(d) for d in self.numa_nodes],
            "l3_domains": [dom(d) for d in self.l3_domains],
            "cores": [dom(d) for d in self.cores],
            "caches": cache_summary(self),
        }


def cache_summary(topo: Topology) -> list[dict[str, Any]]:
    """Per level: the common instance size, line size, instance count and PUs per instance."""
    out = []
    for level in topo.cache_levels():
        inst = [c for c in topo.caches if c.level == level]
        out.append({
            "level": level,
            "size_bytes": Counter(c.size_bytes for c in inst).most_common(1)[0][0],
            "line_bytes": Counter(c.line_bytes for c in inst).most_common(1)[0][0],
            "instances": len(inst),
            "pus_per_instance": Counter(len(c.cpus) for c in inst).most_common(1)[0][0],
        })
    return out


# ---------------------------------------------------------------- building from raw facts

@dataclass
class _Raw:
    """Facts gathered by a source before they become a Topology."""

    pus: list[int] = field(default_factory=list)  # topology order
    packages: list[tuple[int | None, list[int]]] = field(default_factory=list)
    numa: list[tuple[int | None, list[int], int | None]] = field(default_factory=list)
    cores: list[tuple[int | None, list[int]]] = field(default_factory=list)
    caches: list[Cache] = field(default_factory=list)
    allowed: set[int] | None = None
    cpu_model: str | None = None


def _build(raw: _Raw, source: str) -> Topology:
    if not raw.pus:
        raise UserError(f"{source}: the topology has no processing units (PU objects)")
    twice = sorted(c for c, n in Counter(raw.pus).items() if n > 1)
    if twice:
        raise UserError(f"{source}: PU os_index {format_cpulist(twice)} appear(s) more than once; "
                        "export the topology again with lstopo")
    order = {cpu: i for i, cpu in enumerate(raw.pus)}

    def ordered(cpus: Iterable[int]) -> tuple[int, ...]:
        return tuple(sorted((c for c in set(cpus) if c in order), key=order.__getitem__))

    def domains(kind: str, items: list[tuple[int | None, list[int]]],
                extra: list[int | None] | None = None) -> tuple[Domain, ...]:
        rows = []
        for k, (os_idx, cpus) in enumerate(items):
            oc = ordered(cpus)
            if oc:
                rows.append((oc, os_idx, extra[k] if extra else None))
        rows.sort(key=lambda r: order[r[0][0]])
        return tuple(
            Domain(kind, i, os_idx, oc,
                   memory_bytes=val if kind == "numa" else None,
                   size_bytes=val if kind == "l3" else None)
            for i, (oc, os_idx, val) in enumerate(rows))

    all_cpus = list(raw.pus)
    packages = domains("package", raw.packages or [(0, all_cpus)])
    numa = domains("numa", [(o, c) for o, c, _ in raw.numa] or [(0, all_cpus)],
                   [m for _, _, m in raw.numa] or [None])
    cores = domains("core", raw.cores or [(None, [c]) for c in all_cpus])
    caches = tuple(Cache(c.level, c.size_bytes, c.line_bytes, ordered(c.cpus))
                   for c in raw.caches if ordered(c.cpus))
    l3_levels = [c for c in caches if c.level == 3]
    l3 = domains("l3", [(None, list(c.cpus)) for c in l3_levels],
                 [c.size_bytes for c in l3_levels])

    def owner(doms: tuple[Domain, ...], cpu: int) -> int | None:
        for d in doms:
            if cpu in d.cpus:
                return d.index
        return None

    pus = []
    for cpu in raw.pus:
        allowed = raw.allowed is None or cpu in raw.allowed
        core, pkg, nd = owner(cores, cpu), owner(packages, cpu), owner(numa, cpu)
        pus.append(PU(cpu, core if core is not None else 0, pkg if pkg is not None else 0,
                      nd if nd is not None else 0, owner(l3, cpu), allowed))
    return Topology(source, tuple(pus), packages, numa, l3, cores, caches, raw.cpu_model)


# ---------------------------------------------------------------- hwloc XML

_CACHE_TYPES = {"L1Cache": 1, "L2Cache": 2, "L3Cache": 3, "L4Cache": 4, "L5Cache": 5}


def from_hwloc_xml(text: str, source: str) -> Topology:
    """Parse hwloc's XML export (format 1.x or 2.x)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise UserError(f"{source}: not valid XML ({exc}); export one with "
                        "`lstopo --of xml FILE.xml`") from exc
    if root.tag != "topology":
        raise UserError(f"{source}: not an hwloc topology (root element <{root.tag}>, "
                        "expected <topology>); export one with `lstopo --of xml FILE.xml`")
    machine = root.find("object")
    if machine is None:
        raise UserError(f"{source}: the hwloc XML has no objects")

    raw = _Raw()
    pu_memo: dict[int, list[int]] = {}

    def pus_under(el: ET.Element) -> list[int]:
        key = id(el)
        if key not in pu_memo:
            pu_memo[key] = [_int_attr(e, "os_index", source) for e in el.iter("object")
                            if e.get("type") == "PU"]
        return pu_memo[key]

    def walk(el: ET.Element, parent: ET.Element | None) -> None:
        kind = el.get("type", "")
        if kind == "PU":
            raw.pus.append(_int_attr(el, "os_index", source))
        elif kind in ("Package", "Socket"):
            raw.packages.append((_opt_int(el.get("os_index")), pus_under(el)))
            for info in el.findall("info"):
                if info.get("name") == "CPUModel" and raw.cpu_model is None:
                    raw.cpu_model = info.get("value")
        elif kind == "NUMANode":
            # hwloc 2 attaches NUMA nodes as memory children of the object whose PUs are local.
            cpus = pus_under(el) or (pus_under(parent) if parent is not None else [])
            raw.numa.append((_opt_int(el.get("os_index")), cpus,
                             _opt_int(el.get("local_memory"))))
        elif kind == "Core":
            raw.cores.append((_opt_int(el.get("os_index")), pus_under(el)))
        else:
            level = _CACHE_TYPES.get(kind)
            if kind == "Cache":  # hwloc 1.x: one type, level in "depth"
                level = _opt_int(el.get("depth"))
            # cache_type 2 is an instruction cache
            if level is not None and el.get("cache_type") != "2":
                raw.caches.append(Cache(level, _opt_int(el.get("cache_size")) or 0,
                                        _opt_int(el.get("cache_linesize")) or 64,
                                        tuple(pus_under(el))))
        for child in el.findall("object"):
            walk(child, el)

    walk(machine, None)
    allowed = machine.get("allowed_cpuset")
    if allowed:
        try:
            raw.allowed = parse_hwloc_bitmap(allowed)
        except ValueError as exc:
            raise UserError(f"{source}: bad allowed_cpuset: {exc}") from exc
    raw.caches = [c for c in raw.caches if c.size_bytes > 0]
    return _build(raw, source)


def _opt_int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _int_attr(el: ET.Element, name: str, source: str) -> int:
    v = _opt_int(el.get(name))
    if v is None:
        raise UserError(f"{source}: <object type={el.get('type')!r}> lacks a numeric {name}")
    return v


def load_xml(path: str | os.PathLike[str]) -> Topology:
    """Load an hwloc XML file given by the user."""
    p = Path(path)
    text = read_input(p, f"--input {p}", "give a readable hwloc XML file")
    return from_hwloc_xml(text, f"xml:{p}")


# ---------------------------------------------------------------- Linux sysfs

def from_sysfs(root: str | os.PathLike[str] = "/", allowed: set[int] | None = None) -> Topology:
    """Read /sys (under `root`, so tests can replay a recorded tree)."""
    base = Path(root)
    cpu_dir = base / "sys/devices/system/cpu"
    online = read_text(cpu_dir / "online")
    if online is None:
        raise UserError(f"sysfs under {base} has no devices/system/cpu/online")
    cpus = parse_cpulist(online)
    pkg_of: dict[int, int] = {}
    core_key: dict[int, tuple[int, int]] = {}
    caches: dict[tuple[int, str], Cache] = {}
    for cpu in cpus:
        d = cpu_dir / f"cpu{cpu}"
        pkg = int(read_text(d / "topology/physical_package_id") or 0)
        pkg_of[cpu] = max(pkg, 0)
        core_key[cpu] = (pkg_of[cpu], int(read_text(d / "topology/core_id") or cpu))
        for idx in sorted((d / "cache").glob("index*")):
            ctype = read_text(idx / "type") or ""
            if ctype == "Instruction":
                continue
            level = int(read_text(idx / "level") or 0)
            shared = read_text(idx / "shared_cpu_list") or str(cpu)
            key = (level, shared)
            if key not in caches:
                caches[key] = Cache(level, _parse_sysfs_size(read_text(idx / "size") or "0"),
                                    int(read_text(idx / "coherency_line_size") or 64),
                                    tuple(parse_cpulist(shared)))
    numa = []
    for nd in sorted((base / "sys/devices/system/node").glob("node[0-9]*"),
                     key=lambda p: int(p.name[4:])):
        mem = None
        for line in (read_text(nd / "meminfo") or "").splitlines():
            if "MemTotal:" in line:
                mem = int(line.split()[-2]) * 1024
        numa.append((int(nd.name[4:]), parse_cpulist(read_text(nd / "cpulist") or ""), mem))
    # Topology order: package, then L3 domain, then core, then thread; this is what hwloc does.
    l3_first = {}
    for c in caches.values():
        if c.level == 3:
            for cpu in c.cpus:
                l3_first[cpu] = min(c.cpus)
    order = sorted(cpus, key=lambda c: (pkg_of[c], l3_first.get(c, 0), core_key[c], c))
    raw = _Raw(pus=order, allowed=allowed)
    for pkg in sorted(set(pkg_of.values())):
        raw.packages.append((pkg, [c for c in order if pkg_of[c] == pkg]))
    for pkg_core in sorted(set(core_key.values())):
        raw.cores.append((pkg_core[1], [c for c in order if core_key[c] == pkg_core]))
    raw.numa = [(o, c, m) for o, c, m in numa if c]
    raw.caches = [c for c in caches.values() if c.size_bytes > 0]
    for line in (read_text(base / "proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            raw.cpu_model = line.split(":", 1)[1].strip()
            break
    return _build(raw, "sysfs")


def _parse_sysfs_size(text: str) -> int:
    t = text.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(t[-1:], 1)
    return int(t.rstrip("KMG") or 0) * mult


# ---------------------------------------------------------------- the live machine

def discover(use_hwloc: bool = True) -> Topology:
    """The live machine: hwloc's lstopo when installed, sysfs otherwise; PUs outside this
    process's affinity mask are marked not allowed."""
    allowed = set(os.sched_getaffinity(0))
    lstopo = tools.get("lstopo").find()
    if use_hwloc and lstopo:
        try:
            out = subprocess.run([lstopo, "--of", "xml", "-"], capture_output=True, text=True,
                                 timeout=60, check=True).stdout
            topo = from_hwloc_xml(out, "hwloc")
            return _restrict(topo, allowed)
        except (subprocess.SubprocessError, OSError, UserError):
            pass  # a broken hwloc install should not stop a run: sysfs still knows the basics
    return from_sysfs("/", allowed)


def _restrict(topo: Topology, allowed: set[int]) -> Topology:
    pus = tuple(PU(p.os_index, p.core, p.package, p.numa, p.l3, p.allowed and p.os_index in allowed)
                for p in topo.pus)
    return Topology(topo.source, pus, topo.packages, topo.numa_nodes, topo.l3_domains,
                    topo.cores, topo.caches, topo.cpu_model)


def load(input_path: str | None) -> Topology:
    """The topology to plan on: an XML file when given, the live machine otherwise."""
    return load_xml(input_path) if input_path else discover()


# ---------------------------------------------------------------- condensed view

def render(topo: Topology) -> str:
    """A condensed lstopo-like text view."""
    c = topo.counts()
    lines = [f"Machine ({topo.source}): {c['packages']} package(s), {c['numa_nodes']} NUMA "
             f"domain(s), {c['l3_domains']} L3 domain(s), {c['cores']} core(s), {c['pus']} "
             f"PU(s), SMT {topo.smt}"]
    if topo.cpu_model:
        lines.append(f"CPU: {topo.cpu_model}")
    not_allowed = [p.os_index for p in topo.pus if not p.allowed]
    if not_allowed:
        lines.append(f"Not allowed to this process: PUs {format_cpulist(not_allowed)}")
    core_of = {p.os_index: p.core for p in topo.pus}

    def core_desc(cpus: tuple[int, ...]) -> str:
        ncores = len({core_of[x] for x in cpus})
        return f"{ncores} core(s), PUs {format_cpulist(cpus)}"

    for pkg in topo.packages:
        lines.append(f"  Package {pkg.os_index if pkg.os_index is not None else pkg.index}: "
                     f"{core_desc(pkg.cpus)}")
        for nd in topo.numa_nodes:
            if not set(nd.cpus) & set(pkg.cpus):
                continue
            mem = format_bytes(nd.memory_bytes) if nd.memory_bytes else "memory unknown"
            lines.append(f"    NUMA {nd.os_index if nd.os_index is not None else nd.index}: "
                         f"{mem}, {core_desc(nd.cpus)}")
            for l3 in topo.l3_domains:
                shared = tuple(x for x in l3.cpus if x in nd.cpus)
                if shared:
                    lines.append(f"      L3 #{l3.index}: {format_bytes(l3.size_bytes or 0)}, "
                                 f"{core_desc(shared)}")
    if topo.caches:
        parts = [f"L{r['level']} {format_bytes(r['size_bytes'])} x{r['instances']} "
                 f"({r['pus_per_instance']} PU(s) each)" for r in cache_summary(topo)]
        lines.append("Caches: " + "; ".join(parts))
    return "\n".join(lines)


def numa_of(topo: Topology, cpu: int) -> int | None:
    """The OS index of the NUMA domain of `cpu`."""
    return topo.numa_nodes[topo.pu(cpu).numa].os_index


def relation(topo: Topology, a: int, b: int) -> str:
    """What two CPUs share: the nearest common domain."""
    pa, pb = topo.pu(a), topo.pu(b)
    if pa.core == pb.core:
        return "same-core"
    if pa.l3 is not None and pa.l3 == pb.l3:
        return "same-l3"
    if pa.numa == pb.numa:
        return "same-numa"
    return "same-package" if pa.package == pb.package else "cross-package"
