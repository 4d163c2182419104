"""The machine's roofline, derived from a run's peak compute and per-level bandwidths: compute
ceilings per precision, bandwidth ceilings per level, and the ridge points between them. Pure:
no measurement; every ceiling carries the samples of the figure it comes from."""

from __future__ import annotations

from hpcprobe.results.model import Metric

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
    for precision, c in compute.items():
        for level, b in memory.items():
            # FLOP/B where the level's bandwidth stops limiting: a ratio of the two medians
            out.append(Metric("roofline", "ridge_point", "FLOP/B",
                              {"precision": precision, "level": level, "threads": threads},
                              [c.summary.median / b.summary.median]))
    return out
