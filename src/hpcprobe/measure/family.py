"""What every benchmark gets to work with, and what it must provide."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.profiles import Profile
from hpcprobe.measure.sampling import Ledger, Sampled
from hpcprobe.native import Team
from hpcprobe.results.model import Metric


class Progress(Protocol):
    """Where a benchmark reports its progress (a progress bar, or nothing)."""

    def start(self, label: str, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


class NoProgress:
    def start(self, label: str, total: int) -> None:
        pass

    def advance(self, label: str) -> None:
        pass


@dataclass
class RunContext:
    """The machine, the rules, and where results go."""

    topo: Topology
    profile: Profile
    isa: str
    oversubscribe: bool = False
    progress: Progress = field(default_factory=NoProgress)
    metrics: list[Metric] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)  # merged into the run's
    ledgers: dict[str, Ledger] = field(default_factory=dict)

    def record(self, benchmark: str, label: str, sampled: Sampled) -> list[float]:
        """Note how a figure's samples were got (warm-up settled, CI target met); its samples."""
        self.ledgers.setdefault(benchmark, Ledger(benchmark)).add(label, sampled)
        return sampled.samples

    def close_ledgers(self) -> None:
        """Say, once per benchmark, which figures did not settle or missed the CI target."""
        for ledger in self.ledgers.values():
            self.warnings.extend(ledger.warnings())
            self.findings.extend(ledger.findings())
        self.ledgers.clear()


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: its name, a one-line description, how to run it."""

    name: str
    description: str
    run: Callable[[RunContext, Any], None]


def bound_cpus(ctx: RunContext, team: Team, benchmark: str) -> str:
    """The CPUs the selected threads really run on (a cpulist, as stored with each figure); a
    placement other than the one asked for is a warning."""
    got = team.binding()
    if got.cpus != team.active or any(c != 1 for c in got.mask_counts):
        ctx.warnings.append(f"{benchmark}: asked for CPUs {list(team.active)}, threads run on "
                            f"{list(got.cpus)} (affinity masks of {list(got.mask_counts)} CPUs)")
    return format_cpulist(got.cpus)
