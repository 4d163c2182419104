"""Started by the launcher in each rank in front of a user's application
(`python -m hpcprobe.tools.inrank COMMAND ARGS...`): it says on standard output which rank it
is (from the launcher's environment), on which host and CPUs the launcher placed it, and then
becomes the application (exec: same process, same CPUs, same environment). It imports nothing
of hpcprobe's but this module, so a rank starts in a few tens of milliseconds."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

#: The line's prefix; `read` takes these lines out of the application's output.
MARK = "hpcprobe-rank: "
#: Where launchers put a process's rank in its environment (Open MPI, Slurm, Hydra, PMIx).
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK")


def rank() -> int | None:
    for var in RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def read(output: str) -> tuple[list[dict[str, Any]], str]:
    """The ranks' placements and the application's output without their lines."""
    said, rest = [], []
    for line in output.splitlines(keepends=True):
        if line.startswith(MARK):
            try:
                said.append(json.loads(line[len(MARK):]))
                continue
            except json.JSONDecodeError:
                pass
        rest.append(line)
    return said, "".join(rest)


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m hpcprobe.tools.inrank COMMAND ARGS...\n")
        return 2
    line = {"rank": rank(), "host": socket.gethostname(),
            "cpus": sorted(os.sched_getaffinity(0))}
    sys.stdout.write(MARK + json.dumps(line) + "\n")
    sys.stdout.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"hpcprobe: cannot run {argv[0]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
