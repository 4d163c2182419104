"""External tools by name: the programs of the field hpcprobe runs or reads (hwloc's lstopo now;
likwid-bench and hpcc beside it in benchmarks/; fio, iperf3, pgbench and the user's own
applications come with the tuning issue). A tool is one entry here: how to find it, which
Debian package has it, and how it states its version."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from hpcprobe.common.errors import UserError


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

    def require(self) -> str:
        """Its path, or one line saying how to install it."""
        path = self.find()
        if path is None:
            raise UserError(f"{self.name} not found: install Debian's {self.package} "
                            "(make setup does, as root)")
        return path

    def version(self) -> str | None:
        """The first line it prints for its version, or None where it cannot say."""
        path = self.find()
        if path is None:
            return None
        try:
            p = subprocess.run([path, *self.version_args], capture_output=True, text=True,
                               timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = (p.stdout or p.stderr).strip().splitlines()
        return lines[0] if lines else None


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("lstopo", ("lstopo-no-graphics", "lstopo"), "hwloc",
         "hwloc's topology of the machine (hpcprobe reads its XML)"),
    Tool("likwid-bench", ("likwid-bench",), "likwid",
         "likwid's streaming and compute micro-benchmarks (benchmarks/ compares against it)",
         ("-h",)),
    Tool("hpcc", ("hpcc",), "hpcc",
         "the HPC Challenge suite: HPL, PingPong and more (benchmarks/ compares against it)",
         ("-h",)),
)}


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise UserError(f"tool {name!r} is unknown; tools: {', '.join(TOOLS)}") from None
