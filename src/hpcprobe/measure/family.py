"""A benchmark family: what it declares (options with their flags, per-profile settings, the
metrics' join rules, views, figures) and what it gets to work with (the run context)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.profiles import Profile
from hpcprobe.measure.sampling import Ledger, Sampled
from hpcprobe.native import Team
from hpcprobe.results.model import Metric
from hpcprobe.views.figure import Figures
from hpcprobe.views.table import View


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
    isa_asked: bool = False  # the user chose the ISA: families that cover every ISA take it alone
    standalone: bool = False  # started by the family's own command (`hpcprobe mpi`)
    # Ctrl-C or SIGTERM came, and a family kept what it had (a program's repetitions so far):
    # the run ends after this family
    interrupted: bool = False

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
class Flag:
    """How an option field is given on the command line. Families that declare the same flag
    share one command-line option (its `parse` and `choices` must then agree)."""

    flag: str  # "--size"
    help: str
    parse: Callable[[str], Any] | None = None  # argparse type: text -> value, or a usage error
    choices: tuple[str, ...] | None = None
    switch: bool = False  # present or absent (the field gets True or its default)
    many: bool = False  # given again for each value (the field gets them all)
    metavar: str | None = None
    #: the command-line value -> the field's value (e.g. "both" -> None, "nt" -> ("nt",))
    convert: Callable[[Any], Any] | None = None


def option(flag: Flag, default: Any = None) -> Any:
    """A field of a family's options dataclass that the command line sets through `flag`."""
    return field(default=default, metadata={"flag": flag})


def flags(options: type) -> list[tuple[str, Flag]]:
    """(field name, flag) of every option field of an options dataclass that has a flag."""
    return [(f.name, f.metadata["flag"]) for f in dataclasses.fields(options)
            if "flag" in f.metadata]


@dataclass(frozen=True)
class MetricSpec:
    """A metric a family emits: its name, unit and which direction is better. The runner refuses
    a figure whose family did not declare it so (a misnamed metric, a wrong unit)."""

    name: str
    unit: str
    better: str = "higher"  # or "lower"


def specs(unit: str, better: str, *names: str) -> tuple[MetricSpec, ...]:
    """Several metrics of one unit and direction."""
    return tuple(MetricSpec(n, unit, better) for n in names)


@dataclass(frozen=True)
class Positional:
    """A value its command takes by position (`hpcprobe app NAME -- COMMAND...`) into the field
    `dest` of the family's options; `many` takes all that remain, after `--`."""

    dest: str
    metavar: str
    help: str
    parse: Callable[[str], Any] | None = None
    many: bool = False


@dataclass(frozen=True)
class Command:
    """A family's own command (`hpcprobe mpi`): the family alone with its options, plus named
    actions that are not measurements (`hpcprobe mpi info`), or values by position instead."""

    help: str
    description: str
    actions: Mapping[str, tuple[str, Callable[[Any], int]]] = field(default_factory=dict)
    positionals: tuple[Positional, ...] = ()


@dataclass(frozen=True)
class Scaling:
    """What cluster mode reports when it runs the family across 1, 2, 4, ... nodes (its
    `--hosts`; the family keeps the work per node: weak scaling): these metrics per node count,
    joined across counts without the params that `vary` with the count; those that `grow` with
    the nodes also get the parallel efficiency against one node."""

    metrics: tuple[str, ...]
    grow: tuple[str, ...] = ()
    vary: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sized:
    """A family with a problem size, which `hpcprobe scale` runs at a ladder of rank counts:
    `at(ctx, options, ranks, mode, first)` gives its options on that many ranks, in weak mode
    (the size a rank as on the first count) or strong mode (the total as on the first count);
    `rate(metrics)` the samples of its total rate (in `unit`, higher is better) from one
    count's metrics (none: not measured), the figure `what` names."""

    at: Callable[[RunContext, Any, int, str, int], Any]
    rate: Callable[[list[Metric]], list[float]]
    what: str
    unit: str = "GFLOP/s"
    modes: tuple[str, ...] = ("weak", "strong")  # the modes that make sense for it
    least: int = 1  # the fewest ranks it runs on


@dataclass(frozen=True)
class Family:
    """A registered benchmark family. Central code (CLI, runner, views, compare) iterates over
    the registry of these and names no family."""

    name: str
    description: str
    options: type  # a frozen dataclass; its fields made with option() are on the command line
    run: Callable[[RunContext, Any], None] | None  # None: derived from the others' metrics
    #: what run(ctx, options) will measure, one line each, without measuring (its pure plan)
    plan: Callable[[RunContext, Any], list[str]] | None = None
    #: per profile name, the family's own budget and knobs (checked: one for every profile)
    settings: Mapping[str, Any] = field(default_factory=dict)
    metrics: tuple[MetricSpec, ...] = ()  # every metric it emits
    #: metrics derived from all measured ones, after every family ran (the roofline)
    derive: Callable[[list[Metric]], list[Metric]] | None = None
    #: params that say where or how a figure was taken, not what it is: compare ignores them
    #: when it joins metrics across runs
    not_joined: frozenset[str] = frozenset()
    views: tuple[View, ...] = ()  # tables and text of one run (terminal and HTML)
    figures: tuple[Figures, ...] = ()  # plots of one or more runs (HTML report)
    command: Command | None = None
    scaling: Scaling | None = None  # runs across nodes (cluster run --scale)
    sized: Sized | None = None  # runs at a ladder of rank counts, weak and strong (hpcprobe scale)
    #: metrics the user names (an application's `app:NAME`, its unit and direction): every
    #: metric whose name starts with this is declared
    open_metrics: str | None = None
    default: bool = True  # runs when no benchmark is named (`hpcprobe run`)
    #: its figures depend on this node's CPUs and DRAM, which the node sentinel reads around
    #: each benchmark: a move of that reading is a finding on them. False for a family that
    #: measures another device (a GPU's memory and tensor cores, its PCIe link)
    host_bound: bool = True
    #: measures between this node and another one, named by this flag (`--iperf-peer`): cluster
    #: mode runs it over the link schedule's pairs (`cluster run --pairs`), figures as links
    peer: str | None = None

    def declares(self, m: Metric) -> bool:
        """Whether it declared this metric with its unit and direction."""
        if self.open_metrics is not None and m.name.startswith(self.open_metrics):
            return True
        return MetricSpec(m.name, m.unit, m.better) in self.metrics


def bound_cpus(ctx: RunContext, team: Team, benchmark: str) -> str:
    """The CPUs the selected threads really run on (a cpulist, as stored with each figure); a
    placement other than the one asked for is a warning."""
    got = team.binding()
    if got.cpus != team.active or any(c != 1 for c in got.mask_counts):
        ctx.warnings.append(f"{benchmark}: asked for CPUs {list(team.active)}, threads run on "
                            f"{list(got.cpus)} (affinity masks of {list(got.mask_counts)} CPUs)")
    return format_cpulist(got.cpus)
