"""External tools by name: the programs of the field hpcprobe runs or reads (hwloc's lstopo now;
likwid-bench and hpcc beside it in benchmarks/; fio, iperf3, pgbench and the user's own
applications come with the tuning issue). A tool is one entry here: how to find it and which
Debian package has it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from hpcprobe.common.errors import UserError


@dataclass(frozen=True)
class Tool:
    name: str
    executables: tuple[str, ...]  # tried in order
    package: str  # the Debian package that installs it
    description: str

    def find(self) -> str | None:
        """The first of its executables on PATH, or None."""
        return next((p for p in map(shutil.which, self.executables) if p), None)


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("lstopo", ("lstopo-no-graphics", "lstopo"), "hwloc",
         "hwloc's topology of the machine (hpcprobe reads its XML)"),
    Tool("likwid-bench", ("likwid-bench",), "likwid",
         "likwid's streaming and compute micro-benchmarks (benchmarks/ compares against it)"),
    Tool("hpcc", ("hpcc",), "hpcc",
         "the HPC Challenge suite: HPL, PingPong and more (benchmarks/ compares against it)"),
)}


def get(name: str) -> Tool:
    try:
        return TOOLS[name]
    except KeyError:
        raise UserError(f"tool {name!r} is unknown; tools: {', '.join(TOOLS)}") from None
