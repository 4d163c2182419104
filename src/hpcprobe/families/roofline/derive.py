"""The machine's roofline, derived from a run's peak compute and per-level bandwidths: compute
ceilings per precision, bandwidth ceilings per level, and the ridge points between them. Pure:
no measurement; every ceiling carries the samples of the figure it comes from."""

from __future__ import annotations

from hpcprobe.machine import cacheports
from hpcprobe.native.kernels import KERNELS
from hpcprobe.results.ceilings import Ceiling
from hpcprobe.results.model import Metric, Run

LEVELS = ("L1", "L2", "L3", "DRAM")


def _best(metrics: list[Metric]) -> Metric:
    return max(metrics, key=lambda m: m.summary.median)


def derive(metrics: list[Metric]) -> list[Metric]:
    """Ceilings and ridge points at the largest thread count that both the compute and the
    memory benchmark measured (all cores in a full run); nothing when either is missing."""
    peaks = [m for m in metrics if m.benchmark == "compute" and m.name == "peak"]
    bandwidths = [m for m in metrics if m.benchmark == "memory" and m.name == "bandwidth"]
    common = {m.params["threads"] for m in peaks} & {m.params["threads"] for m in bandwidths}
    if not common:
        return []
    threads = max(common)
    out: list[Metric] = []
    compute: dict[str, Metric] = {}
    for precision in sorted({m.params["precision"] for m in peaks}):
        best = _best([m for m in peaks if m.params["precision"] == precision
                      and m.params["threads"] == threads])
        compute[precision] = best
        out.append(Metric("roofline", "compute_ceiling", "GFLOP/s",
                          {"precision": precision, "threads": threads,
                           "isa": best.params["isa"], "op": best.params["op"]},
                          list(best.samples)))
    memory: dict[str, Metric] = {}
    for level in LEVELS:
        found = [m for m in bandwidths if m.params["level"] == level
                 and m.params["threads"] == threads]
        if not found:
            continue
        best = _best(found)
        memory[level] = best
        out.append(Metric("roofline", "bandwidth_ceiling", "GB/s",
                          {"level": level, "threads": threads, "kernel": best.params["kernel"],
                           "stores": best.params["stores"],
                           "size_bytes": best.params["size_bytes"]}, list(best.samples)))
    out += port_ceilings(metrics)
    for precision, c in compute.items():
        for level, b in memory.items():
            # FLOP/B where the level's bandwidth stops limiting: a ratio of the two medians
            out.append(Metric("roofline", "ridge_point", "FLOP/B",
                              {"precision": precision, "level": level, "threads": threads},
                              [c.summary.median / b.summary.median]))
    return out


def port_ceilings(metrics: list[Metric]) -> list[Metric]:
    """The L1 and L2 bandwidth ceilings of the load/store ports (`machine.cacheports`) for the
    best figure the memory sweep measured at each level and thread count: bytes a cycle for
    its kernel and ISA x the fastest clock the compute family measured on that many cores (a
    ceiling: the kernel's own clock is no faster) x the cores; a sample per clock sample.
    Nothing where the compute family found no table row, or the row has no ports."""
    arch = next((m.params["microarch"] for m in metrics if m.benchmark == "compute"
                 and m.name == "peak_model" and m.params.get("microarch")), None)
    ports = cacheports.PORTS.get(str(arch))
    if ports is None:
        return []
    clocks: dict[int, Metric] = {}
    for m in metrics:
        if m.benchmark == "compute" and m.name == "clock":
            n = m.params.get("active_cores")
            if isinstance(n, int) and (n not in clocks or m.summary.max > clocks[n].summary.max):
                clocks[n] = m
    out = []
    for level in ("L1", "L2"):
        for threads, best in _level_points(metrics, level, set(clocks)).items():
            k = KERNELS.get(best.params["kernel"])
            width = cacheports.ISA_WIDTH.get(best.params.get("isa", ""))
            per_cycle = None if k is None or width is None else ports.bytes_per_cycle(
                level, k.loads, k.stores, width, best.params["stores"] == "regular")
            if k is None or per_cycle is None:
                continue
            clock = clocks[threads]
            out.append(Metric("roofline", "port_ceiling", "GB/s",
                              {"level": level, "threads": threads, "kernel": k.name,
                               "stores": best.params["stores"], "isa": best.params["isa"],
                               "size_bytes": best.params["size_bytes"],
                               "bytes_per_cycle": per_cycle, "source": ports.source},
                              [per_cycle * ghz * threads for ghz in clock.samples]))
    return out


#: The params a port ceiling shares with the memory figure it bounds
PORT_KEYS = ("level", "threads", "kernel", "stores", "size_bytes")


def port_ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """An L1 or L2 bandwidth figure's ceiling from the load/store ports (its `port_ceiling`
    at the fastest clock measured: the kernel's own clock is no faster); None where the run
    derived none for it."""
    got = next((c for c in run.select("roofline", "port_ceiling")
                if all(c.params[k] == metric.params.get(k) for k in PORT_KEYS)), None)
    if got is None:
        return None
    p = got.params
    return Ceiling(got.summary.max, f"load/store ports ({p['source']}): {p['bytes_per_cycle']:g}"
                   f" B a cycle x the fastest clock on {p['threads']} core(s)")


def _level_points(metrics: list[Metric], level: str, threads: set[int]) -> dict[int, Metric]:
    """Per thread count, the best memory figure of the level, leaving out the points within
    an octave of the level below (per thread: the largest such point's size x 2), which that
    level still partly serves."""
    bw = [m for m in metrics if m.benchmark == "memory" and m.name == "bandwidth"
          and m.params["threads"] in threads]
    below = {"L2": "L1"}.get(level)
    out = {}
    for n in sorted({m.params["threads"] for m in bw if m.params.get("level") == level}):
        mine = [m for m in bw if m.params["threads"] == n]
        edge = max((m.params["size_bytes"] for m in mine if m.params.get("level") == below),
                   default=0)
        got = [m for m in mine if m.params.get("level") == level and
               m.params["size_bytes"] >= 2 * edge]
        if got:
            out[n] = _best(got)
    return out
