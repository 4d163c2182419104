"""A run's configuration fingerprint: the system state that decides its results, as labelled
values (NUMA domains per socket, L3 as NUMA, SMT, THP, governor, BIOS, MPI, BLAS, environment...),
and what differs between runs. Pure: reads only the run documents."""

from __future__ import annotations

from typing import Any

from hpcprobe.common.units import format_bytes
from hpcprobe.mpi import find, params
from hpcprobe.results.model import Run


def _on_off(v: Any) -> str:
    return "n/a" if v is None else ("on" if v else "off")


def fingerprint(run: Run) -> dict[str, str]:
    """Labelled configuration of one run; a value the run did not record reads "n/a" (runs
    stored by an older hpcprobe lack some)."""
    p, n = run.provenance, run.node
    c = run.topology.get("counts", {})
    packages = c.get("packages") or 0
    dmi = n.dmi or {}
    mpi = params.MPI.of(p)
    out: dict[str, Any] = {
        "CPU": n.cpu_model,
        "sockets x cores": f"{packages} x {c.get('cores', 0) // max(1, packages)}",
        "NUMA domains per socket": n.numa_per_package
        or c.get("numa_nodes", 0) // max(1, packages) or None,
        "L3 as NUMA": _on_off(n.l3_as_numa),
        "SMT": _on_off(n.smt_active if n.smt_active is not None
                       else (n.smt > 1 if n.smt is not None else None)),
        "THP": n.thp,
        "THP defrag": n.thp_defrag,
        "governor": n.governor,
        "tuned profile": n.tuned_profile,
        "kernel": n.kernel,
        "BIOS": " ".join(dmi[k] for k in ("bios_vendor", "bios_version", "bios_date")
                         if dmi.get(k)) or None,
        "system": " ".join(dmi[k] for k in ("sys_vendor", "product_name") if dmi.get(k))
        or None,
        "MPI": mpi.named if mpi else find.FOUND.of(p),
        # the message sizes where it changes protocol, as it reported them (an MCA parameter
        # file or a variable moves them)
        "MPI thresholds": ", ".join(f"{k} {v}" for k, v in sorted(
            (mpi.thresholds if mpi else {}).items())) or None,
        "BLAS": n.blas,
        "compiler": n.compiler,
        "ISA": n.isa,
        "allowed CPUs": n.allowed_cpus,
        # a job's or container's cgroup limit sizes the DRAM arrays, HPL's N and the proxies'
        "memory limit": format_bytes(n.memory_limit["bytes"]) if n.memory_limit else None,
        "hpcprobe": n.hpcprobe_version,
        "kernels": n.kernels,  # the sources' digest: a changed kernel, same version
    }
    out.update({f"env {k}": v for k, v in sorted((n.environment or {}).items())})
    return {k: "n/a" if v is None or v == "" else str(v) for k, v in out.items()}


def differences(runs: list[Run]) -> list[tuple[str, list[str]]]:
    """(label, value in each run) for every label whose values differ, in fingerprint order."""
    fps = [fingerprint(r) for r in runs]
    labels = list(dict.fromkeys(k for fp in fps for k in fp))
    out = []
    for label in labels:
        values = [fp.get(label, "n/a") for fp in fps]
        if len(set(values)) > 1:
            out.append((label, values))
    return out
