"""`hpcprobe check`: the health tier, in seconds, for the scheduler's hooks (Slurm's
HealthCheckProgram, a prolog or an epilog). It reads the node's state without measuring (CPUs,
memory, DIMMs, governor, THP, ports, PCIe links against its reference; error counters rising
since the last check; the GPUs' health; free space in the temporary directory), measures each
checking family's headline point (the DRAM triad, the FMA peak and the clock on every core),
measures again once what was below its reference or disturbed (a suspect is re-tested before
it fails), and answers pass, fail (each reason one line) or cannot judge. With `--slurm` it
drains a failed node and releases a drain it set itself once the node passes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcprobe import registry
from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import Reference, Verdict
from hpcprobe.commands.base import (
    Bar,
    Spec,
    add_db,
    add_prometheus,
    console,
    label,
    open_store,
    say,
)
from hpcprobe.commands.output import Against
from hpcprobe.common import files
from hpcprobe.common.errors import HpcprobeError, UserError
from hpcprobe.common.units import format_bytes, parse_size
from hpcprobe.machine import counters, dimms, links, provenance, topology
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.profiles import CHECK
from hpcprobe.measure.runner import resolve_isa
from hpcprobe.results.model import Run
from hpcprobe.results.store import Store

#: The prefix of the drain reasons a check sets: the only drains it releases
DRAIN_PREFIX = "hpcprobe:"
#: Drain reasons are cut to this length (sinfo -R shows them on one line)
REASON_MAX = 200
#: Exit status where the outcome could not be acted on (Slurm refused the drain or release)
EXIT_SLURM = 4
#: Free space the temporary directory needs by default
TMP_FREE = "1GiB"


#: Where root keeps the check's state (the counters file); a user keeps it in
#: $XDG_STATE_HOME/hpcprobe
ROOT_STATE = Path("/var/lib/hpcprobe")


def _counters_default() -> str:
    base = ROOT_STATE if os.geteuid() == 0 else \
        Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "hpcprobe"
    return str(base / "check-counters.json")


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--against", metavar="REF.toml",
                   help="judge against this reference file (`hpcprobe reference make` of check "
                        "runs; its state of this hardware from runs of any profile); default: "
                        "this host's previous check runs in the store")
    add_db(p)
    p.add_argument("--no-store", action="store_true",
                   help="store nothing (a check stores one run per node, its figures)")
    p.add_argument("--tag", type=label, help="label the stored run (`reference make --tag` "
                                             "of healthy check runs makes a reference)")
    p.add_argument("--state-only", action="store_true",
                   help="read the node's state and measure nothing (under a second)")
    p.add_argument("--slurm", action="store_true",
                   help="act as Slurm's HealthCheckProgram, prolog or epilog: drain the node on "
                        "a fail, release a drain this check set once it passes, never another's")
    p.add_argument("--node", help="the node's Slurm name (default: $SLURMD_NODENAME, else the "
                                  "short host name)")
    add_prometheus(p)
    p.add_argument("--json", metavar="FILE", help="also write the outcome and the run as JSON "
                                                  "(`-`: on standard output)")
    p.add_argument("--tmp", metavar="DIR", default=os.environ.get("TMPDIR") or "/tmp",
                   help="the temporary directory whose free space is checked (default: "
                        "$TMPDIR, else /tmp)")
    p.add_argument("--tmp-free", metavar="SIZE", default=TMP_FREE,
                   help=f"the least free space it needs (default: {TMP_FREE})")
    p.add_argument("--counters", metavar="FILE", default=_counters_default(),
                   help="where the error counters of the last passed check are kept (default: "
                        f"{_counters_default()})")
    p.add_argument("--accept-counters", action="store_true",
                   help="take the error counters as they are now as the new baseline (after "
                        "the fault behind a rise was dealt with)")
    p.add_argument("--sysfs", metavar="DIR",
                   help="read ports, PCIe links, DIMMs and counters from this copy of /sys (a "
                        "recorded node; /proc's machine-check counts are then not read)")
    p.add_argument("--details", action="store_true",
                   help="also the state compared, value by value, and every warning")


@dataclass
class Checked:
    """The check's inputs, read and checked before anything is measured."""

    against: Against
    store: Store | None
    tmp_free: int
    sysfs: Path
    node: str
    counters: dict[str, Any]  # the counters file's document, read before measuring


def _inputs(a: argparse.Namespace) -> Checked:
    try:
        need = parse_size(a.tmp_free)
    except ValueError:
        raise UserError(f"--tmp-free {a.tmp_free!r}: a size, e.g. 1GiB") from None
    if not Path(a.tmp).is_dir():
        raise UserError(f"--tmp {a.tmp}: no such directory")
    sysfs = Path(a.sysfs or links.SYSFS)
    if not sysfs.is_dir():
        raise UserError(f"--sysfs {a.sysfs}: no such directory")
    if a.sysfs is not None and not any(sysfs.iterdir()):
        raise UserError(f"--sysfs {a.sysfs}: an empty directory; give a copy of a node's /sys")
    files.check_outputs((a.json, "--json"), (a.prometheus, "--prometheus"))
    if a.counters == _counters_default():
        files.default_directory(a.counters, "--counters")
    files.check_writable(a.counters, "--counters")
    saved = _counters_doc(a.counters)
    if a.slurm and shutil.which("scontrol") is None:
        raise UserError("--slurm: scontrol is not on PATH (Slurm's client commands)")
    node = a.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    against = Against.of(a.against)
    return Checked(against, open_store(a.db, a.no_store), need, sysfs, node, saved)


def _state_run(topo: Topology, isa: str) -> Run:
    """A run that measured nothing: the node's provenance alone (`--state-only`)."""
    return Run(run_id=uuid.uuid4().hex[:12], created=datetime.now(UTC).isoformat(
        timespec="seconds"), host=socket.gethostname(), profile=CHECK.name, benchmarks=[],
        provenance=provenance.collect(topo, isa), topology=topo.to_dict())


def recorded_sysfs(run: Run, sysfs: Path) -> None:
    """The links and DIMMs of another /sys tree than this node's (`--sysfs`)."""
    run.provenance["links"] = links.read(sysfs)
    run.provenance["dram_ceiling"] = dimms.dram_ceiling(
        run.provenance.get("cpu_model") or "", str(sysfs / "firmware" / "dmi" / "entries"),
        str(sysfs / "devices" / "system" / "edac" / "mc")).to_dict()


def _retest(run: Run, v: Verdict, topo: Topology, isa: str) -> tuple[Run, list[str]]:
    """Measure again, once, the families whose headline was below its reference or could not
    be judged for a disturbance or noise: their figures replace the first ones (the derived
    ones are derived again). The labels re-tested, [] where none was."""
    suspect = [r for r in v.rows if r.mark == "below"
               or (r.mark == "not judged" and r.expected is not None)]
    if not suspect:
        return run, []
    names = sorted({r.headline.metric.benchmark for r in suspect})
    again = registry.check_run(topo, isa, names=names)
    redone = set(names) | {m.benchmark for m in again.metrics}
    merged = replace(run, metrics=[m for m in run.metrics if m.benchmark not in redone]
                     + again.metrics,
                     findings=[f for f in run.findings if f.get("benchmark") not in redone]
                     + again.findings,
                     warnings=run.warnings + again.warnings, errors=run.errors + again.errors)
    merged.provenance = {**run.provenance, "sentinel": again.provenance.get("sentinel"),
                         "retested": names}
    return merged, [f"{r.headline.label} ({r.mark}{': ' + r.why if r.why else ''})"
                    for r in suspect]


#: What a counters file holds: node -> {"counters": {name: count}, "when": ISO time}
COUNTERS_DOC = "node -> {counters, when}"


def _counters_doc(path: str) -> dict[str, Any]:
    """The counters file's document ({} where there is none yet); anything else there (another
    file named by mistake, a damaged one) is refused, never overwritten: resetting a damaged
    baseline would forget a rise it kept."""
    p = Path(path)
    if not p.exists():
        return {}
    text = files.read_input(p, f"--counters {path}")
    try:
        doc = json.loads(text)
        ok = isinstance(doc, dict) and all(
            isinstance(v, dict) and isinstance(v.get("counters"), dict)
            and all(isinstance(n, int) and not isinstance(n, bool)
                    for n in v["counters"].values()) for v in doc.values())
    except ValueError:
        ok = False
    if not ok:
        raise UserError(f"--counters {path}: not a check's counters file ({COUNTERS_DOC}), or "
                        "a damaged one: left as it is; name another file, or move it away once "
                        "you know what it is (its baseline is then taken anew)")
    return dict(doc)


def _saved_counters(doc: dict[str, Any], node: str) -> dict[str, int] | None:
    kept = doc.get(node)
    return None if kept is None else {str(k): int(v) for k, v in kept["counters"].items()}


def _save_counters(path: str, doc: dict[str, Any], node: str, now: dict[str, int]) -> None:
    doc = {**doc, node: {"counters": now,
                         "when": datetime.now(UTC).isoformat(timespec="seconds")}}
    files.atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(),
                       "--counters")


def _faults(run: Run, ref: Reference | None, c: Checked, a: argparse.Namespace,
            rose: list[str], devices: list[str]) -> list[str]:
    """Every fault read without a figure: the state against the reference's, counters that
    rose, the devices' health, the temporary directory's space, the families' errors."""
    out = health.differences(health.state_of(run), ref.state) if ref is not None else []
    out += rose
    out += devices
    free = shutil.disk_usage(a.tmp).free
    if free < c.tmp_free:
        out.append(f"{a.tmp}: {format_bytes(free)} free, less than the "
                   f"{format_bytes(c.tmp_free)} a job needs (--tmp-free)")
    return out + run.errors


#: Slurm's states of a node that runs jobs: a measuring check there cannot judge
IN_USE = ("ALLOC", "MIXED", "COMPLETING")


def _in_use(a: argparse.Namespace, c: Checked) -> str | None:
    """Why the measuring tier cannot judge this node under --slurm (Slurm has it running a
    job), None where it can or Slurm cannot say (other processes on its CPUs are then seen as
    each benchmark runs)."""
    if not a.slurm or a.state_only:
        return None
    from hpcprobe.schedulers.slurm import Slurm

    try:
        state = Slurm().state(c.node)
    except HpcprobeError:
        return None
    if not any(s in state for s in IN_USE):
        return None
    return (f"Slurm has {c.node} in use ({state}): its figures would be a shared node's, "
            "so only its state was read (HealthCheckNodeState=IDLE runs the measuring tier on "
            "idle nodes)")


def _measure(a: argparse.Namespace, c: Checked, state_only: bool
             ) -> tuple[Run, Verdict, list[str], list[str]]:
    """The run (state alone, or the checking families' figures; the devices' state in its
    provenance), judged, a suspect figure re-tested once: the run, its verdict, what was
    re-tested and the devices' faults."""
    topo = topology.discover()
    isa = resolve_isa(None)
    if state_only:
        run = _state_run(topo, isa)
    else:
        with Bar() as bar:
            run = registry.check_run(topo, isa, bar)
    if a.sysfs:
        recorded_sysfs(run, c.sysfs)
    run.tag = a.tag
    devices, run.provenance["devices"] = registry.device_health()
    v = c.against.verdict(run, c.store, recent=False)
    retested: list[str] = []
    if v.marked("below") or any(r.mark == "not judged" and r.expected for r in v.rows):
        run, retested = _retest(run, v, topo, isa)
        v = c.against.verdict(run, c.store, recent=False)
    return run, v, retested, devices


def handle(a: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    c = _inputs(a)
    in_use = _in_use(a, c)
    run, v, retested, devices = _measure(a, c, a.state_only or in_use is not None)
    now = counters.read(c.sysfs, None if a.sysfs else counters.INTERRUPTS)
    before = None if a.accept_counters else _saved_counters(c.counters, c.node)
    rose = counters.rising(before or {}, now)
    out = health.outcome(_faults(run, v.reference, c, a, rose, devices), v)
    if in_use is not None and out.status == health.PASS:  # its state passed; not its figures
        out = health.Outcome(health.UNJUDGED, [], [in_use])
    out.retested = retested
    if out.status != health.FAIL or before is None:
        # a rise stays a fault until dealt with
        _save_counters(a.counters, c.counters, c.node, now)
    seconds = time.perf_counter() - t0
    run.duration_s = round(seconds, 3)
    run.provenance["check"] = {"status": out.status, "reasons": out.reasons,
                               "counters": now}
    shown = console(any(files.is_stdout(p) for p in (a.json, a.prometheus) if p))
    _show(shown, run, v, out, c, seconds, a.details)
    _keep(a, c, run, v, out, shown, seconds)
    return _slurm(a, c, out, shown) if a.slurm else out.exit_code


def _show(shown: Any, run: Run, v: Verdict, out: health.Outcome, c: Checked, seconds: float,
          details: bool) -> None:
    """The answer first: the outcome and its reasons, then the figures and what was
    compared."""
    from hpcprobe.views import health as view

    for line in view.lines(run, v, out, c.node, seconds, details):
        say(shown, line)


def _keep(a: argparse.Namespace, c: Checked, run: Run, v: Verdict, out: health.Outcome,
          shown: Any, seconds: float) -> None:
    """Its one write to the store (a run with figures), its JSON and monitoring files."""
    if c.store is not None and run.metrics:
        with c.store:
            c.store.save(run)
        say(shown, f"Stored as run {run.run_id} in {c.store.path}.")
    elif c.store is not None:
        c.store.close()
    if a.json:
        doc = {"node": c.node, "status": out.status, "exit_code": out.exit_code,
               "reasons": out.reasons, "unjudged": out.unjudged, "retested": out.retested,
               "seconds": round(seconds, 2), "run": run.to_dict()}
        files.atomic_write(a.json, (json.dumps(doc, indent=1) + "\n").encode(), "--json",
                           private=True)
    if a.prometheus:
        from hpcprobe.views import prometheus

        reg = prometheus.registry([(run, v)])
        prometheus.add_check(reg, c.node, out.status, len(out.reasons), time.time(), seconds)
        prometheus.write(a.prometheus, reg)


def drain_reason(reasons: list[str]) -> str:
    """The drain's reason: the prefix, the first reasons, cut to REASON_MAX characters."""
    text = f"{DRAIN_PREFIX} " + "; ".join(reasons)
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3].rstrip() + "..."


def _slurm(a: argparse.Namespace, c: Checked, out: health.Outcome, shown: Any) -> int:
    """Drain a failed node (unless someone else drained it: their reason stays), release a
    drain of this check's once the node passes; cannot judge changes nothing and asks Slurm
    nothing. Slurm is asked only what the outcome needs: where it cannot say whether a passing
    node carries this check's drain, the node is left as it is (exit 0; the next check that
    passes releases it). The status: 0 where the node's Slurm state now says the outcome (a
    prolog that fails makes Slurm drain the node itself, so only a fail exits 1), EXIT_SLURM
    where Slurm refused the drain or release."""
    from hpcprobe.schedulers.slurm import Slurm

    if out.status == health.UNJUDGED:
        return 0
    sched = Slurm()
    try:
        was = sched.drained(c.node)
    except HpcprobeError as exc:  # a fail drains anyway; a pass leaves the node as it is
        say(console(stderr=True), f"Slurm: {exc}; "
            + ("draining it all the same" if out.status == health.FAIL else
               "a drain of this check's, if any, stays until a check passes and Slurm answers"))
        if out.status == health.PASS:
            return 0
        was = None
    try:
        if out.status == health.FAIL:
            if was is not None and not was.startswith(DRAIN_PREFIX):
                say(shown, f"Slurm: {c.node} is drained already by someone else (\"{was}\"): "
                           "left as it is")
            else:
                sched.drain(c.node, drain_reason(out.reasons))
                say(shown, f"Slurm: drained {c.node}.")
            return health.EXIT[health.FAIL]
        if was is not None and was.startswith(DRAIN_PREFIX):
            sched.resume(c.node)
            say(shown, f"Slurm: released {c.node} (the drain this check set: \"{was}\").")
    except (HpcprobeError, UserError) as exc:
        raise SlurmRefused(f"--slurm: {exc}") from None
    return 0


class SlurmRefused(HpcprobeError):
    """Slurm did not take the drain or the release."""

    exit_code = EXIT_SLURM


COMMAND = Spec("check", "the health tier: this node's state and short probes against its "
                        "reference in seconds; pass, fail or cannot judge (Slurm drains)",
               setup, handle,
               description="Check this node in seconds for a scheduler's health hook: its "
                           "state against its reference, error counters rising, the GPUs' "
                           "health, then the DRAM triad, the FMA peak and the clock on every "
                           "core against the reference (a suspect measured again once). Exit "
                           "0 pass, 1 fail, 3 cannot judge (no reference, a figure not "
                           "judged), 2 a usage mistake, 4 Slurm refused the drain or release; "
                           "with --slurm, cannot judge exits 0 (Slurm drains a node whose "
                           "prolog fails).")
