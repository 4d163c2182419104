"""Run benchmarks on this machine and assemble the run: provenance, metrics (the roofline
derived from them), findings."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from hpcprobe import native
from hpcprobe.bench import BENCHMARKS
from hpcprobe.common.errors import MeasurementError, UserError
from hpcprobe.families.roofline import derive as roofline
from hpcprobe.machine import provenance
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.family import Progress, RunContext
from hpcprobe.measure.profiles import Profile
from hpcprobe.results.model import Run


def resolve_isa(requested: str | None) -> str:
    """The ISA variant to run: the one asked for if this CPU has it, else the best one."""
    have = native.supported_isas()
    if requested is None:
        return native.best_isa()
    if requested not in native.isa_names():
        raise UserError(f"--isa {requested!r} is unknown; variants: "
                        f"{', '.join(native.isa_names())} (this CPU runs {', '.join(have)})")
    if requested not in have:
        raise UserError(f"--isa {requested}: this CPU lacks it; it supports {', '.join(have)}")
    return requested


def resolve_benchmarks(names: list[str] | None) -> list[str]:
    if not names:
        return list(BENCHMARKS)
    for n in names:
        if n not in BENCHMARKS:
            raise UserError(f"benchmark {n!r} is unknown; benchmarks: {', '.join(BENCHMARKS)}")
    return list(dict.fromkeys(names))


def execute(topo: Topology, profile: Profile, benchmarks: list[str], isa: str,
            options: dict[str, Any], progress: Progress, oversubscribe: bool = False,
            tag: str | None = None) -> Run:
    """Run the benchmarks in order; a benchmark's failure is recorded and the others go on."""
    t0 = time.perf_counter()
    ctx = RunContext(topo, profile, isa, oversubscribe, progress)
    run = Run(run_id=uuid.uuid4().hex[:12],
              created=datetime.now(UTC).isoformat(timespec="seconds"),
              host=socket.gethostname(), profile=profile.name, benchmarks=benchmarks,
              provenance=provenance.collect(topo, isa), topology=topo.to_dict(), tag=tag)
    for name in benchmarks:
        try:
            BENCHMARKS[name].run(ctx, options.get(name))
        except MeasurementError as exc:
            ctx.errors.append(f"{name}: {exc}")
        ctx.close_ledgers()
    ctx.metrics.extend(roofline.derive(ctx.metrics))
    run.provenance.update(ctx.provenance)
    run.metrics = ctx.metrics
    run.findings = ctx.findings
    run.warnings = ctx.warnings
    run.errors = ctx.errors
    run.duration_s = round(time.perf_counter() - t0, 3)
    return run
