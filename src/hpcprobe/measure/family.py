"""A benchmark family: what every family declares (options with their flags, per-profile
settings, its plan, its metrics and their join rules, views, figures), the capabilities a family
may declare for its modes (its own command, a problem size, scaling across nodes, a peer node,
another device, an inventory, the default run), and what it gets to work with (the run
context)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hpcprobe.analysis.verdict import Picker
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.parts import Part
from hpcprobe.machine import energy
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.profiles import Profile
from hpcprobe.measure.sampling import Ledger, Sampled
from hpcprobe.native import Team
from hpcprobe.results.ceilings import Bound
from hpcprobe.results.findings import Finding
from hpcprobe.results.model import Metric
from hpcprobe.viewkit.figure import Figures
from hpcprobe.viewkit.table import View


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
class Metered:
    """The energy of a stretch a family brackets with `ctx.metered()` (None: not read)."""

    window: energy.Window | None = None


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
    #: the node's energy counters, read around each family (the runner's; None: not read)
    meter: energy.Meter | None = None

    @contextmanager
    def metered(self) -> Iterator[Metered]:
        """The energy of what runs inside: `.window` after it (None where no counter is
        read), for a figure of work per joule."""
        got = Metered()
        at = None if self.meter is None else self.meter.mark()
        try:
            yield got
        finally:
            got.window = None if self.meter is None else self.meter.since(at)

    def find(self, found: Finding) -> None:
        """Keep a finding with the run, and the warning it gives."""
        self.findings.append(found.to_dict())
        if (line := found.warning_line()) is not None:
            self.warnings.append(line)

    def record(self, benchmark: str, label: str, sampled: Sampled) -> list[float]:
        """Note how a figure's samples were got (warm-up settled, CI target met); its samples."""
        self.ledgers.setdefault(benchmark, Ledger(benchmark)).add(label, sampled)
        return sampled.samples

    def close_ledgers(self) -> None:
        """Say, once per benchmark, which figures did not settle or missed the CI target."""
        for ledger in self.ledgers.values():
            self.warnings.extend(ledger.warnings())  # one line a benchmark, over its notes
            for found in ledger.findings():
                self.find(found)
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


def option(flag: Flag, default: Any = None, note: str | None = None) -> Any:
    """A field of a family's options dataclass that the command line sets through `flag`;
    `note`: what a shared flag means for this family (its help says it after the family's
    name), so that the shared flag's own help names no family."""
    return field(default=default, metadata={"flag": flag, "note": note})


def notes(options: type) -> dict[str, str]:
    """Flag -> what it means for the family, for the option fields that say so."""
    return {f.metadata["flag"].flag: f.metadata["note"] for f in dataclasses.fields(options)
            if f.metadata.get("note")}


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
    derived: bool = False  # computed from the family's measured figures (a share of a model)


def specs(unit: str, better: str, *names: str, derived: bool = False
          ) -> tuple[MetricSpec, ...]:
    """Several metrics of one unit and direction."""
    return tuple(MetricSpec(n, unit, better, derived) for n in names)


#: The names of the power a family's figure drew while it was sampled and of the joules a
#: repetition took, and the suffix of a figure per watt
POWER, ENERGY, PER_WATT = "power", "energy", "_per_watt"


def energy_figure(name: str) -> bool:
    """Whether a figure's name is a power, an energy or a figure per watt."""
    return name in (POWER, ENERGY) or name.endswith(PER_WATT)


def per_watt_specs(*figures: tuple[str, str]) -> tuple[MetricSpec, ...]:
    """The figures `per_watt` adds beside figures (name, unit): the power each one's sampling
    drew (W) and each figure per watt (its unit/W, work per joule: GFLOP/s/W = GFLOP/J)."""
    return (MetricSpec(POWER, "W", "lower"),
            *(MetricSpec(f"{name}{PER_WATT}", f"{unit}/W", derived=True)
              for name, unit in figures))


def per_watt(figure: Metric, window: energy.Window | None) -> list[Metric]:
    """The power the node's packages and DRAM drew while `figure` was sampled (`window`, from
    `ctx.metered()`: its warm-up and samples, one kernel throughout), and each of its samples
    per watt of that mean; none where no counter was read. The per-watt figure's spread is
    the figure's: the power is one mean over its sampling."""
    return [] if window is None else per_watt_at(figure, window.watts, window.domains())


def per_watt_at(figure: Metric, watts: float | None, domains: str) -> list[Metric]:
    """`per_watt` with the mean power read by other means (a GPU's board power, sampled by
    NVML while the figure was measured), the source named by `domains`."""
    if watts is None or watts <= 0:
        return []
    params, watts = dict(figure.params, domains=domains), round(watts, 3)
    return [Metric(figure.benchmark, POWER, "W", params, [watts], "lower"),
            Metric(figure.benchmark, f"{figure.name}{PER_WATT}", f"{figure.unit}/W",
                   dict(params), [s / watts for s in figure.samples])]


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
    """A capability: the family's own command (`hpcprobe mpi`), the family alone with its
    options, plus named actions that are not measurements (`hpcprobe mpi info`), or values by
    position instead."""

    help: str
    description: str
    actions: Mapping[str, tuple[str, Callable[[Any], int]]] = field(default_factory=dict)
    positionals: tuple[Positional, ...] = ()


# -- capabilities: the modes a family may declare; central code asks for one by its type


@dataclass(frozen=True)
class Default:
    """Runs when no benchmark is named (`hpcprobe run`); `probe`: also in the node probe a
    cluster campaign runs on every node when `--probe` names none (seconds per node, quick)."""

    probe: bool = False


@dataclass(frozen=True)
class Derives:
    """Measures nothing: derives metrics from every measured one, after every family ran (the
    roofline)."""

    derive: Callable[[list[Metric]], list[Metric]]


@dataclass(frozen=True)
class Check:
    """Takes part in the health tier (`hpcprobe check`): `options(ctx)` narrows it to its
    headline point on every core (seconds, its settings' "check" budget), so the check's
    figures are its headlines, judged against a reference of check runs."""

    options: Callable[[RunContext], Any]


@dataclass(frozen=True)
class Predicts:
    """Its headline figure is a proxy of another benchmark's figure (the CG proxy of HPCG's
    rating): where a run holds both, they are set side by side with how far apart they are.
    `benchmark`, `name` and `params` (as text) name that figure; `what` says what it is."""

    benchmark: str
    name: str
    params: Mapping[str, str]
    what: str


@dataclass(frozen=True)
class Scaling:
    """What cluster mode reports when it runs the family across 1, 2, 4, ... nodes (its
    `--hosts`; the family keeps the work per node: weak scaling): these metrics per node count,
    joined across counts without the params that `vary` with the count; those that `grow` with
    the nodes also get the parallel efficiency against one node. A family whose figures are
    not known by name (a user's application) names their `prefix` instead, and its total work
    `rate` (samples and unit from one count's metrics), which gets the parallel efficiency."""

    metrics: tuple[str, ...]
    grow: tuple[str, ...] = ()
    vary: tuple[str, ...] = ()
    prefix: str = ""
    rate: Callable[[list[Metric]], tuple[list[float], str] | None] | None = None


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
    #: the rate's unit from one count's metrics, where it depends on them (a user's figure)
    unit_of: Callable[[list[Metric]], str] | None = None
    #: the modes `--mode both` means with these options, where they decide (an application
    #: whose command has nothing to grow the problem with scales strong only)
    modes_for: Callable[[Any], tuple[str, ...]] | None = None


@dataclass(frozen=True)
class Peer:
    """Measures between this node and another one, named by `flag` (`--iperf-peer`): cluster
    mode runs it over the link schedule's pairs (`cluster run --pairs`), figures as links."""

    flag: str


@dataclass(frozen=True)
class Keeps:
    """The parts of a run's provenance it writes (`common.parts.Part`: a key and a typed
    record: HPL's program, the GPUs measured, an application's command); the result schema
    has each one's part, made from its record."""

    parts: tuple[Part[Any], ...]


@dataclass(frozen=True)
class OtherDevice:
    """Its figures are another device's (a GPU's memory and tensor cores, its PCIe link), which
    the host's CPUs and DRAM do not bound: the node sentinel read around it judges none of
    them."""

    what: str


@dataclass(frozen=True)
class Inventory:
    """What the family finds on this node without measuring (GPUs and what is near them), for
    `hpcprobe topology`: `discover()` gives an object or None (nothing found), `render(found)`
    its text, `document(found)` its JSON under the key `key`; `hardware(provenance)` the labels
    peers must share in a campaign (GPU models), from a run's stored provenance."""

    key: str
    discover: Callable[[], Any]
    render: Callable[[Any], str]
    document: Callable[[Any], dict[str, Any]]
    hardware: Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Headlines:
    """The figures of a run its verdict opens with (`hpcprobe run`, `show`, the cluster
    report): `pick(run)` gives the family's headline figures, each with its ceiling where the
    hardware sets one, and none where the run did not measure them."""

    pick: Picker


@dataclass(frozen=True)
class Ceilings:
    """The ceilings a family's own figures set for figures (its FLOP model for the peak, a
    GPU's memory peak for its triad): one `Bound` per figure bounded."""

    bounds: tuple[Bound, ...]


#: Every capability a family may declare (its modes); docs/design.md's table lists each
CAPABILITIES: tuple[type, ...] = (Default, Derives, Command, Scaling, Sized, Peer, OtherDevice,
                                  Inventory, Check, Headlines, Predicts, Ceilings, Keeps)


@dataclass(frozen=True)
class Params:
    """Params a family's figures carry: each figure named in `names` (every figure of the
    family when empty) has the `required` ones; `values` says what a param's value may be (a
    JSON Schema). The result schema's part for the family is generated from these."""

    required: tuple[str, ...]
    names: tuple[str, ...] = ()
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


#: Values of params, as JSON Schemas, that several families share
COUNT = {"type": "integer", "minimum": 1}
TEXT = {"type": "string"}


@dataclass(frozen=True)
class Metrics:
    """What a family emits: its metrics (name, unit, direction), the params that say where or
    how a figure was taken rather than what it is (compare ignores them when it joins metrics
    across runs), for a family whose metrics the user names (an application's `app:NAME`),
    the prefix every such metric starts with, and the params its figures carry."""

    specs: tuple[MetricSpec, ...] = ()
    not_joined: frozenset[str] = frozenset()
    open_prefix: str | None = None
    params: tuple[Params, ...] = ()

    def declares(self, m: Metric) -> bool:
        """Whether it declared this metric with its unit and direction."""
        if self.open_prefix is not None and m.name.startswith(self.open_prefix):
            return True
        return any((s.name, s.unit, s.better) == (m.name, m.unit, m.better) for s in self.specs)

    def names(self) -> list[str]:
        return list(dict.fromkeys(s.name for s in self.specs))


C = TypeVar("C")


@dataclass(frozen=True)
class Family:
    """A registered benchmark family: what every family has, and the modes it declares as
    capabilities. Central code (commands, runner, views, compare) iterates over the registry
    of these, asks for a capability by its type, and names no family."""

    name: str
    description: str
    options: type  # a frozen dataclass; its fields made with option() are on the command line
    run: Callable[[RunContext, Any], None] | None  # None: it measures nothing (Derives)
    #: what run(ctx, options) will measure, one line each, without measuring (its pure plan)
    plan: Callable[[RunContext, Any], list[str]] | None = None
    #: per profile name, the family's own budget and knobs (checked: one for every profile)
    settings: Mapping[str, Any] = field(default_factory=dict)
    metrics: Metrics = Metrics()
    views: tuple[View, ...] = ()  # tables and text of one run (terminal and HTML)
    figures: tuple[Figures, ...] = ()  # plots of one or more runs (HTML report)
    #: the modes it has: instances of CAPABILITIES
    capabilities: tuple[Any, ...] = ()

    def capability(self, kind: type[C]) -> C | None:
        """Its capability of this kind, or None."""
        return next((c for c in self.capabilities if isinstance(c, kind)), None)

    def declares(self, m: Metric) -> bool:
        return self.metrics.declares(m)

    def command_line(self) -> list[str]:
        """How a command line runs it alone: its own command where it takes values by
        position (`app NAME ... -- CMD`, what follows put last), else `run NAME`."""
        own = self.capability(Command)
        return [self.name] if own is not None and own.positionals else ["run", self.name]


def runs_commands(families: Mapping[str, Family]) -> str:
    """The family that runs a user's command (its own command takes one after `--`): what a
    sweep's workload with a `command` runs under."""
    for name, f in families.items():
        own = f.capability(Command)
        if own is not None and any(p.many for p in own.positionals):
            return name
    raise AssertionError("no family runs a user's command")


def bound_cpus(ctx: RunContext, team: Team, benchmark: str) -> str:
    """The CPUs the selected threads really run on (a cpulist, as stored with each figure); a
    placement other than the one asked for is a warning."""
    got = team.binding()
    if got.cpus != team.active or any(c != 1 for c in got.mask_counts):
        ctx.warnings.append(f"{benchmark}: asked for CPUs {list(team.active)}, threads run on "
                            f"{list(got.cpus)} (affinity masks of {list(got.mask_counts)} CPUs)")
    return format_cpulist(got.cpus)
