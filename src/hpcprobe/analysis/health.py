"""The health tier's judgement: a node's state read without measuring (CPUs, memory, DIMMs,
governor, THP, ports, PCIe links) against the state its reference recorded, and the outcome of
a check: pass, fail (each reason one line) or cannot judge (no reference, a figure that could
not be judged), the last of which must never drain a node. Pure: reads run documents only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpcprobe.analysis.verdict import Verdict
from hpcprobe.common.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNJUDGED
from hpcprobe.common.parts import Part
from hpcprobe.machine import facts
from hpcprobe.results.findings import Kind, kind
from hpcprobe.results.judgement import Judgement
from hpcprobe.results.model import Run

#: The outcomes of a check and their exit statuses (2 is a usage mistake, as for every command)
PASS, FAIL, UNJUDGED = "pass", "fail", "cannot judge"


@dataclass(frozen=True)
class CheckRecord:
    """What a check's run records of its outcome (its provenance part `check`): the status,
    each reason, and the error counters it read (their baseline is the last passed check's)."""

    status: str | None = None
    reasons: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)


CHECK = Part("check", CheckRecord)
EXIT = {PASS: EXIT_OK, FAIL: EXIT_FAILURE, UNJUDGED: EXIT_UNJUDGED}
#: Memory totals within this share of each other are the same memory (the kernel's own
#: reservations move MemTotal by a few MiB between boots and kernels)
MEMORY_TOLERANCE = 0.02

_SHOWN = "check's reasons and its Slurm drain reason"
#: What fails a check, each kind with its code and action (a device's fault: findings.HEALTH)
STATE = kind("state differs", "the node's state differs from its reference's (CPUs, memory, "
             "DIMMs, ports, links, governor, THP)", view=_SHOWN, code="HP311", action="drain")
COUNTER = kind("counter rose", "an error counter (InfiniBand port, EDAC, machine checks) rose "
               "since the last check", view=_SHOWN, code="HP312", action="drain")
SCRATCH = kind("scratch short", "the temporary directory has less free space than a job "
               "needs", view=_SHOWN, code="HP313", action="drain")
BELOW = kind("below reference", "a check figure below its reference's tolerance, confirmed "
             "by a re-measurement", view=_SHOWN, code="HP314", action="drain")
FAILED = kind("check failed", "a checking family could not measure", view=_SHOWN,
              code="HP315", action="drain")
#: A fault of a check: its kind and its line
Fault = tuple[Kind, str]


def _on_off(v: object) -> str | None:
    return None if v is None else ("on" if v else "off")


def state_of(run: Run) -> dict[str, str]:
    """The node's state a run recorded, as labelled values a healthy node of its kind keeps:
    what the run did not record (an older run, a VM without SMBIOS) is absent."""
    p, node, c = run.provenance, run.node, run.topology.get("counts", {})
    mem = node.mem_total_bytes
    out: dict[str, object] = {
        "CPUs online": c.get("pus"), "cores": c.get("cores"),
        "SMT": _on_off(node.smt_active),
        "memory": None if not mem else f"{mem / 2 ** 30:.1f} GiB",
        **facts.state(p),  # the DIMMs, memory channels, ports and PCIe links it recorded
        "governor": node.governor, "THP": node.thp,
        # the GPUs, as checks of versions before the GPU fact kept them (facts.state has them)
        **(p.get("devices") or {}),
    }
    return {k: str(v) for k, v in out.items() if v is not None and v != ""}


def common(states: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """What every one of these states shares (a reference keeps only what its runs agree on)."""
    if not states:
        return {}
    return {k: v for k, v in states[0].items() if all(s.get(k) == v for s in states[1:])}


def _same(label: str, now: str, ref: str) -> bool:
    """Equal; memory totals ("251.3 GiB") within MEMORY_TOLERANCE, or equal as text where one
    was edited by hand into something else."""
    if label != "memory":
        return now == ref
    try:
        a, b = float(now.split()[0]), float(ref.split()[0])
    except (ValueError, IndexError):
        return now == ref
    return abs(a - b) <= MEMORY_TOLERANCE * b


def differences(now: Mapping[str, str], reference: Mapping[str, str]) -> list[str]:
    """One line per value of the reference's state this node does not have now."""
    return [f"{label}: {now.get(label, 'absent')}, the reference has {ref}"
            for label, ref in reference.items()
            if label not in now or not _same(label, now[label], ref)]


@dataclass
class Outcome:
    """A check's answer: its status, the reasons of a fail (one line each), why it could not
    judge, and what it re-measured before it failed."""

    status: str
    reasons: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)
    retested: list[str] = field(default_factory=list)
    #: every judgement made: each fault a broken health rule, each headline's (its verdict)
    judgements: list[Judgement] = field(default_factory=list)
    #: the kind of each reason, in their order (its code and action)
    kinds: list[Kind] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]


def _below(j: Judgement) -> str:
    """A fail's reason for a figure below its reference."""
    assert j.value is not None and j.expected and j.tolerance is not None
    return (f"{j.named} {j.value:.4g} {j.unit}, {100 * (j.change or 0):+.1f}% "
            f"against {j.expected:.4g} (tolerance {100 * j.tolerance:.0f}%)")


def _unjudged(j: Judgement) -> str | None:
    """Why a figure left the node unjudged (too noisy, the node moved, no expected value,
    above its ceiling), or None where it was judged."""
    if j.basis == "ceiling":
        return f"{j.named}: above its ceiling ({j.why})" if j.mark == "above ceiling" else None
    above = j.basis == "reference" and j.why == "above its ceiling"  # said by its ceiling's
    return f"{j.named}: {j.why}" if j.mark == "not judged" and not above else None


def outcome(faults: Sequence[Fault], v: Verdict | None) -> Outcome:
    """Fail on any fault or figure below its reference; else cannot judge where the verdict
    had no reference (none, or one without this hardware) or a figure was not judged (too
    noisy, the node moved, no expected value); else pass. The figures' part is read from the
    verdict's judgement records."""
    figures = v.judgements() if v is not None else []
    unjudged = [line for j in figures if (line := _unjudged(j)) is not None]
    faults = [*faults, *((BELOW, _below(j)) for j in figures
                         if j.basis == "reference" and j.mark == "below")]
    reasons = [f"{k.code} {line}" for k, line in faults]
    judged = [*(Judgement(line.split(":", 1)[0], "health rule", "failed", why=line)
                for k, line in faults if k is not BELOW), *figures]
    if reasons:
        return Outcome(FAIL, reasons, unjudged, judgements=judged, kinds=[k for k, _ in faults])
    ref = v.reference if v is not None else None
    if ref is None:
        return Outcome(UNJUDGED, [], ["no reference: neither --against FILE nor this host's "
                                      "previous check runs in the store"], judgements=judged)
    if not ref.figures and not ref.state:
        return Outcome(UNJUDGED, [], [ref.source], judgements=judged)
    return Outcome(UNJUDGED if unjudged else PASS, [], unjudged, judgements=judged)
