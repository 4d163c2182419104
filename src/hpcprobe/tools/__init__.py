"""External tools by name: the programs of the field hpcprobe runs or reads (hwloc's lstopo;
fio, iperf3 and pgbench, each the tool of a family; likwid-bench and hpcc beside them in
benchmarks/). A tool is one entry here: how to find it, how it says its version, and which
Debian package has it."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from functools import cache

from hpcprobe.common.errors import UserError
from hpcprobe.common.parts import Part

#: The run's part: the version of each tool a family ran (and of the server it ran against:
#: pgbench's PostgreSQL), by name
VERSIONS = Part("tools", str, keyed=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a server a tool starts there
    (PostgreSQL, iperf3)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Tool:
    name: str
    executables: tuple[str, ...]  # tried in order
    package: str  # the Debian package that installs it
    description: str

    version_args: tuple[str, ...] = ("--version",)

    def find(self) -> str | None:
        """The first of its executables on PATH, or None."""
        return next((p for p in map(shutil.which, self.executables) if p), None)

    def require(self, who: str) -> str:
        """Its path, or a user error that says which package installs it."""
        path = self.find()
        if path is None:
            raise UserError(f"{who} needs {self.name}, which is not installed (Debian package "
                            f"{self.package})")
        return path

    def version(self) -> str:
        """Its version as it says it ("3.33"), or "unknown"."""
        return _version(self.require(self.name), self.version_args)


@cache
def _version(path: str, args: tuple[str, ...]) -> str:
    try:
        said = subprocess.run([path, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", said.stdout + said.stderr)
    return m.group(1) if m else "unknown"


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("lstopo", ("lstopo-no-graphics", "lstopo"), "hwloc",
         "hwloc's topology of the machine (hpcprobe reads its XML)"),
    Tool("likwid-bench", ("likwid-bench",), "likwid",
         "likwid's streaming and compute micro-benchmarks (benchmarks/ compares against it)"),
    Tool("hpcc", ("hpcc",), "hpcc",
         "the HPC Challenge suite: HPL, PingPong and more (benchmarks/ compares against it)"),
    Tool("fio", ("fio",), "fio", "flexible I/O tester (the fio family reads its JSON)"),
    Tool("iperf3", ("iperf3",), "iperf3", "TCP/UDP throughput (the iperf3 family reads its JSON)"),
    Tool("pgbench", ("pgbench",), "postgresql",
         "PostgreSQL's TPC-B-like benchmark (the pgbench family, against a throwaway server)"),
)}


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise UserError(f"tool {name!r} is unknown; tools: {', '.join(TOOLS)}") from None
