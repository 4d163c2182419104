"""The registry of benchmark families, in the order `hpcprobe run` runs them. A family is one
package under families/ and one line here; nothing else names it."""

from __future__ import annotations

from hpcprobe.families import (
    app,
    cg,
    compute,
    dslash,
    fio,
    frequency,
    gpu,
    hpl,
    iperf3,
    latency,
    memory,
    mpi,
    numa,
    pgbench,
    roofline,
)
from hpcprobe.measure.family import Family

FAMILIES: dict[str, Family] = {f.name: f for f in (
    memory.FAMILY,
    latency.FAMILY,
    numa.FAMILY,
    frequency.FAMILY,
    compute.FAMILY,
    mpi.FAMILY,
    hpl.FAMILY,
    dslash.FAMILY,
    cg.FAMILY,
    gpu.FAMILY,
    roofline.FAMILY,
    app.FAMILY,
    fio.FAMILY,
    iperf3.FAMILY,
    pgbench.FAMILY,
)}
