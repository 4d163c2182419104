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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe.analysis import health, reference
from hpcprobe.commands.base import (
    Bar,
    Lines,
    Spec,
    add_against,
    add_db,
    add_details,
    add_json,
    add_no_store,
    add_prometheus,
    add_tag,
    open_store,
    say,
)
from hpcprobe.common import files
from hpcprobe.common.errors import UserError
from hpcprobe.common.units import parse_size
from hpcprobe.health import baseline, faults, retest
from hpcprobe.judge.against import Against
from hpcprobe.machine import counters, facts, topology
from hpcprobe.measure import profiles
from hpcprobe.measure.profiles import CHECK

if TYPE_CHECKING:
    from hpcprobe.analysis.verdict import Verdict
    from hpcprobe.results.model import Run
    from hpcprobe.results.store import Store

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
    add_against(p, "the check", "made of check runs, it also holds this hardware's state "
                "from runs of any profile; default: this host's previous check runs in the store")
    add_db(p)
    add_no_store(p, "anything", " (a check stores one run per node, its figures)")
    add_tag(p, "the stored run (`reference make --tag` of healthy check runs makes a "
            "reference)")
    p.add_argument("--state-only", action="store_true",
                   help="read the node's state and measure nothing (under a second)")
    p.add_argument("--slurm", action="store_true",
                   help="act as Slurm's HealthCheckProgram, prolog or epilog: drain the node on "
                        "a fail, release a drain this check set once it passes, never another's")
    p.add_argument("--node", help="the node's Slurm name (default: $SLURMD_NODENAME, else the "
                                  "short host name)")
    add_prometheus(p)
    add_json(p, "the outcome and the run", also=True)
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
    add_details(p, "also the state compared, value by value, and every warning")


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
    sysfs = Path(a.sysfs or facts.SYSFS)
    if not sysfs.is_dir():
        raise UserError(f"--sysfs {a.sysfs}: no such directory")
    if a.sysfs is not None and not any(sysfs.iterdir()):
        raise UserError(f"--sysfs {a.sysfs}: an empty directory; give a copy of a node's /sys")
    files.check_outputs((a.json, "--json"), (a.prometheus, "--prometheus"))
    if a.counters == _counters_default():
        files.default_directory(a.counters, "--counters")
    files.check_writable(a.counters, "--counters")
    saved = baseline.load(a.counters)
    if a.slurm and shutil.which("scontrol") is None:
        raise UserError("--slurm: scontrol is not on PATH (Slurm's client commands)")
    node = a.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return Checked(_against(a), open_store(a.db, a.no_store), need, sysfs, node, saved)


def _against(a: argparse.Namespace) -> Against:
    """What the check judges against. The state-only tier judges no figure: the node's state
    against the reference's, without the families' headlines, ceilings or units (nor their
    imports: it runs in every job's prolog). Their hardware labels are what they measured
    (GPU models), which a check run holds none of."""
    if a.state_only:
        return Against.of(a.against, reference.state_only(facts.BOUNDS))
    from hpcprobe import registry

    return registry.against(a.against)


def _state_run(isa: str) -> Run:
    """A run that measured nothing: the node's provenance alone (`--state-only`, in every job's
    prolog). Its topology is read from sysfs, where hwloc reads it on Linux, without starting
    lstopo; no MPI is looked for (its compiler wrapper runs the C preprocessor), as nothing is
    launched. Both took 64 of the 316 files the check opened."""
    from hpcprobe.machine import provenance
    from hpcprobe.results.model import Run

    topo = topology.discover(use_hwloc=False)
    return Run(run_id=uuid.uuid4().hex[:12], created=datetime.now(UTC).isoformat(
        timespec="seconds"), host=socket.gethostname(), profile=CHECK.name, benchmarks=[],
        provenance=provenance.collect(topo, isa), topology=topo.to_dict())


def recorded_sysfs(run: Run, sysfs: Path) -> None:
    """The node's facts (links, DIMMs) as another /sys tree than this node's has them
    (`--sysfs`)."""
    run.provenance.update(facts.read(run.node.cpu_model or "", sysfs))


def _measure(a: argparse.Namespace, c: Checked, state_only: bool
             ) -> tuple[Run, Verdict, list[str]]:
    """The run (state alone, or the checking families' figures; the node's facts, the GPUs'
    health among them, in its provenance), judged, a suspect figure re-tested once: the run,
    its verdict and what was re-tested."""
    from hpcprobe.native import best_isa

    isa = best_isa()
    if state_only:
        run = _state_run(isa)
        return run, _judged(a, c, run), []
    from hpcprobe import registry

    topo = topology.discover()
    with Bar() as bar:
        run = registry.check_run(topo, isa, bar)
    v = _judged(a, c, run)
    retested: list[str] = []
    if retest.suspects(v):
        run, retested = retest.retest(
            run, v, lambda names: registry.check_run(topo, isa, names=names))
        v = c.against.verdict(run, c.store, recent=False)
    return run, v, retested


def _judged(a: argparse.Namespace, c: Checked, run: Run) -> Verdict:
    """The run, with the recorded tree's facts (`--sysfs`) and its tag, judged."""
    if a.sysfs:
        recorded_sysfs(run, c.sysfs)
    run.tag = a.tag
    return c.against.verdict(run, c.store, recent=False)


def handle(a: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    c = _inputs(a)
    in_use = _in_use(a, c)
    run, v, retested = _measure(a, c, a.state_only or in_use is not None)
    now = counters.read(c.sysfs, None if a.sysfs else counters.INTERRUPTS)
    before = None if a.accept_counters else baseline.saved(c.counters, c.node)
    rose = counters.rising(before or {}, now)
    out = health.outcome(faults.faults(faults.Seen(run, v.reference, rose, a.tmp,
                                                   (c.tmp_free, "--tmp-free"))), v)
    if in_use is not None and out.status == health.PASS:  # its state passed; not its figures
        out = health.Outcome(health.UNJUDGED, [], [in_use], judgements=out.judgements)
    out.retested = retested
    if out.status != health.FAIL or before is None:
        # a rise stays a fault until dealt with
        baseline.save(a.counters, c.counters, c.node, now)
    seconds = time.perf_counter() - t0
    run.duration_s = round(seconds, 3)
    health.CHECK.put(run.provenance, health.CheckRecord(out.status, out.reasons, now))
    shown = Lines(any(files.is_stdout(p) for p in (a.json, a.prometheus) if p))
    _show(shown, run, v, out, c, seconds, a.details)
    _keep(a, c, run, v, out, shown, seconds)
    if not a.slurm:
        return out.exit_code
    from hpcprobe.health import drain  # Slurm's client, where a check acts in Slurm

    return drain.act(c.node, out, lambda line: say(shown, line),
                     lambda line: say(Lines(stderr=True), line))


def _in_use(a: argparse.Namespace, c: Checked) -> str | None:
    """Why the measuring tier cannot judge this node under --slurm (health.drain.in_use)."""
    if not a.slurm or a.state_only:
        return None
    from hpcprobe.health import drain

    return drain.in_use(c.node)


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
               "judgements": [j.to_dict() for j in out.judgements],
               "valid_until": profiles.valid_until(run.created, run.profile).isoformat(),
               "seconds": round(seconds, 2), "run": run.to_dict()}
        files.atomic_write(a.json, (json.dumps(doc, indent=1) + "\n").encode(), "--json",
                           private=True)
    if a.prometheus:
        from hpcprobe.views import prometheus

        reg = prometheus.registry([(run, v)])
        prometheus.add_check(reg, c.node, out.status, out.kinds, time.time(), seconds)
        prometheus.write(a.prometheus, reg)


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
