"""The node's state around each benchmark: a short STREAM triad on one CPU of every core the run
may use, its arrays four times the last-level cache, read before the first benchmark and after
each one. Two readings around a benchmark that disagree say that the node changed while it ran
(another job or tenant on the memory, throttling, a daemon waking up), which steal time does not
show: it counts CPU time taken, not memory bandwidth shared. The readings are kept in the run's
provenance; a benchmark whose readings moved is a warning and a `node_changed` finding."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import HpcprobeError
from hpcprobe.common.stats import summarize
from hpcprobe.common.units import format_bytes
from hpcprobe.machine.placement import plan
from hpcprobe.machine.sizing import elems_for, llc_bytes
from hpcprobe.machine.topology import Topology
from hpcprobe.native import Team
from hpcprobe.native.kernels import ELEMENT_BYTES, KERNELS, MAX_REL_ERROR, bandwidth_gbs
from hpcprobe.results.conditions import Sentinel
from hpcprobe.results.findings import Finding, kind, of_kind

#: Working set: this many times the last-level cache of the CPUs, and at least FLOOR bytes.
LLC_FACTOR = 4
FLOOR = 64 << 20
#: Timed samples of a reading, and the least time one lasts (one untimed pass comes first).
SAMPLES = 9
SAMPLE_S = 0.005
#: Readings around a benchmark whose medians differ by this share, their 95 % CIs apart, are a
#: warning: the node was not the same machine at the start and at the end of that benchmark.
#: Back-to-back readings on this project's KVM guest, nothing run between them, differed by up
#: to 12 % with their CIs apart (x0.88, x0.90); the steps seen around benchmarks were 30 % and
#: more.
MOVE = 0.15


@dataclass(frozen=True)
class Probe:
    """What a reading measures: the triad on these CPUs over this many bytes."""

    cpus: tuple[int, ...]
    elems: int

    @property
    def size_bytes(self) -> int:
        return KERNELS["triad"].arrays * ELEMENT_BYTES * self.elems * len(self.cpus)

    def describe(self) -> dict[str, Any]:
        return {"kernel": "triad", "stores": "regular", "unit": "GB/s",
                "cpus": format_cpulist(self.cpus), "size_bytes": self.size_bytes}


def probe(topo: Topology) -> Probe:
    """One CPU of each core the run may use, and the arrays that make them stream from DRAM."""
    cpus = plan(topo, "one-per-core").cpus
    size = max(LLC_FACTOR * llc_bytes(topo, cpus), FLOOR)
    return Probe(cpus, elems_for("triad", size, len(cpus)))


def read(p: Probe, isa: str) -> list[float]:
    """One reading: SAMPLES timed triads (GB/s, STREAM counting), the arrays checked after
    them; `HpcprobeError` where the CPUs cannot be pinned or the arrays did not validate."""
    k = KERNELS["triad"]
    with Team(p.cpus) as team:
        team.stream_prepare(p.elems)
        team.stream_begin(k.kernel_id, p.elems)
        first, _ = team.stream_measure(k.kernel_id, isa, "regular", p.elems, 1, 1)
        inner = max(1, math.ceil(SAMPLE_S / max(max(first[0]), 1e-9)))
        times, _ = team.stream_measure(k.kernel_id, isa, "regular", p.elems, inner, SAMPLES)
        err = team.stream_check(k.kernel_id, p.elems)
    if not err <= MAX_REL_ERROR:
        raise HpcprobeError(f"the triad's arrays did not validate (max relative error {err:.3g})")
    return [bandwidth_gbs(k, "regular", p.elems, len(p.cpus), inner, max(t)) for t in times]


def moved(before: Sequence[float], after: Sequence[float]) -> float | None:
    """after/before of the medians where they differ by MOVE or more and their CIs do not
    overlap; None where the node read the same."""
    a, b = summarize(before), summarize(after)
    if a.median <= 0:
        return None
    ratio = b.median / a.median
    apart = b.ci95[0] > a.ci95[1] or b.ci95[1] < a.ci95[0]
    return ratio if apart and abs(ratio - 1) >= MOVE else None


NODE_CHANGED = kind("node_changed", "the node's DRAM bandwidth, read before and after a "
                    "benchmark, moved while it ran: its figures may mix two states of the node",
                        code="HP104", action="re-measure")


def finding(benchmark: str, before: list[float], after: list[float]) -> Finding | None:
    """A `node_changed` finding for a benchmark whose readings before and after it moved."""
    ratio = moved(before, after)
    if ratio is None:
        return None
    a, b = summarize(before).median, summarize(after).median
    return Finding(benchmark, NODE_CHANGED,
                   f"the node's DRAM triad (the sentinel read around each benchmark) went "
                   f"from {a:.1f} to {b:.1f} GB/s (x{ratio:.2f}) while it ran: its figures "
                   "may mix two states of the node (another job or tenant on the memory, "
                   "throttling); run it again on a quiet node",
                   {"before": round(a, 2), "after": round(b, 2), "ratio": round(ratio, 3)})


def changes(findings: list[dict[str, Any]]) -> dict[str, float]:
    """Benchmark -> after/before of a run's `node_changed` findings."""
    return {f["benchmark"]: f["ratio"] for f in of_kind(findings, NODE_CHANGED)
            if isinstance(f.get("ratio"), (int, float))}


class Brackets:
    """The readings of one run: `take` one before the first benchmark and after each; it
    returns the finding of a benchmark whose two readings moved."""

    def __init__(self, topo: Topology, isa: str) -> None:
        self.isa = isa
        self.readings: list[dict[str, Any]] = []
        self.failed: str | None = None
        try:
            self.probe: Probe | None = probe(topo)
        except HpcprobeError as exc:
            self.probe, self.failed = None, str(exc)

    def take(self, after: str | None) -> Finding | None:
        """A reading after the benchmark `after` (None: before the first), and the finding of
        `after` where its readings moved."""
        if self.failed is not None:  # no probe, or a reading failed: no more readings
            return None
        assert self.probe is not None
        try:
            samples = read(self.probe, self.isa)
        except HpcprobeError as exc:  # said once, at the end; the benchmarks go on
            self.failed = str(exc)
            return None
        found = (finding(after, self.readings[-1]["samples"], samples)
                 if after is not None and self.readings else None)
        self.readings.append({"after": after, "samples": samples})
        return found

    def provenance(self) -> dict[str, Any] | None:
        """The run's `sentinel`: what was read, and every reading in order (those before a
        reading failed)."""
        if self.probe is None or not self.readings:
            return None
        return {**self.probe.describe(), "readings": self.readings}

    def warning(self) -> str | None:
        """Why the node went unwatched, where a reading failed."""
        return None if self.failed is None else (
            f"node sentinel: not read ({self.failed}); changes of the node during the run go "
            "unseen")


def line(kept: Sentinel | None) -> str | None:
    """A run's sentinel in one line: its first and last readings (None without readings)."""
    readings = () if kept is None else kept.readings
    if kept is None or not readings:
        return None
    first, last = (summarize(r.samples).median for r in (readings[0], readings[-1]))
    what = (f"Node sentinel (DRAM triad on CPUs {kept.about.get('cpus', '?')}, "
            f"{format_bytes(kept.about.get('size_bytes', 0))}): {first:.1f} GB/s before the "
            "first "
            "benchmark")
    return what + (f", {last:.1f} after the last" if len(readings) > 1 else "")
