"""What a check's outcome does to the node in Slurm: a failed node is drained (unless someone
else drained it: their reason stays), a drain of the check's own is released once the node
passes, cannot judge changes nothing; a node Slurm has running a job is not measured."""

from __future__ import annotations

from collections.abc import Callable

from hpcprobe.analysis import health
from hpcprobe.common.errors import HpcprobeError
from hpcprobe.schedulers.slurm import Slurm

#: The prefix of the drain reasons a check sets: the only drains it releases
DRAIN_PREFIX = "hpcprobe:"
#: Drain reasons are cut to this length (sinfo -R shows them on one line)
REASON_MAX = 200
#: Exit status where the outcome could not be acted on (Slurm refused the drain or release)
EXIT_SLURM = 4
#: Slurm's states of a node that runs jobs: a measuring check there cannot judge
IN_USE = ("ALLOC", "MIXED", "COMPLETING")


class SlurmRefused(HpcprobeError):
    """Slurm did not take the drain or the release."""

    exit_code = EXIT_SLURM


def drain_reason(reasons: list[str]) -> str:
    """The drain's reason: the prefix, the first reasons, cut to REASON_MAX characters."""
    text = f"{DRAIN_PREFIX} " + "; ".join(reasons)
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3].rstrip() + "..."


def in_use(node: str) -> str | None:
    """Why the measuring tier cannot judge the node (Slurm has it running a job), None where
    it can or Slurm cannot say (other processes on its CPUs are then seen as each benchmark
    runs)."""
    try:
        state = Slurm().state(node)
    except HpcprobeError:
        return None
    if not any(s in state for s in IN_USE):
        return None
    return (f"Slurm has {node} in use ({state}): its figures would be a shared node's, so "
            "only its state was read (HealthCheckNodeState=IDLE runs the measuring tier on "
            "idle nodes)")


def act(node: str, out: health.Outcome, say: Callable[[str], None],
        warn: Callable[[str], None]) -> int:
    """Drain or release the node for its outcome. Slurm is asked only what the outcome needs:
    where it cannot say whether a passing node carries this check's drain, the node is left as
    it is (exit 0; the next check that passes releases it). The status: 0 where the node's
    Slurm state now says the outcome (a prolog that fails makes Slurm drain the node itself,
    so only a fail exits 1); SlurmRefused where Slurm refused the drain or release."""
    if out.status == health.UNJUDGED:
        return 0
    sched = Slurm()
    try:
        was = sched.drained(node)
    except HpcprobeError as exc:  # a fail drains anyway; a pass leaves the node as it is
        warn(f"Slurm: {exc}; " + ("draining it all the same" if out.status == health.FAIL
                                  else "a drain of this check's, if any, stays until a check "
                                  "passes and Slurm answers"))
        if out.status == health.PASS:
            return 0
        was = None
    try:
        if out.status == health.FAIL:
            if was is not None and not was.startswith(DRAIN_PREFIX):
                say(f"Slurm: {node} is drained already by someone else (\"{was}\"): left as "
                    "it is")
            else:
                sched.drain(node, drain_reason(out.reasons))
                say(f"Slurm: drained {node}.")
            return health.EXIT[health.FAIL]
        if was is not None and was.startswith(DRAIN_PREFIX):
            sched.resume(node)
            say(f"Slurm: released {node} (the drain this check set: \"{was}\").")
    except HpcprobeError as exc:
        raise SlurmRefused(f"<slurm>: {exc.args[0]}") from None
    return 0
