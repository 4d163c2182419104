"""The composition root: what the registries hold, gathered for the commands. The commands, the
benchmarks and the tests reach families through here, and ask for a family's mode by its
capability's type; nothing below names a family."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hpcprobe.analysis.compare import NotJoined
from hpcprobe.analysis.reference import Declared
from hpcprobe.analysis.verdict import Picker, Reference, Verdict
from hpcprobe.common.errors import UserError
from hpcprobe.families import FAMILIES
from hpcprobe.judge import run as judge_run
from hpcprobe.machine import facts
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import runner, scaling
from hpcprobe.measure.family import (
    Ceilings,
    Check,
    Default,
    Derives,
    Family,
    Headlines,
    Inventory,
    NoProgress,
    Predicts,
    Progress,
    RunContext,
    flags,
)
from hpcprobe.measure.profiles import CHECK, Profile
from hpcprobe.measure.summary import Summary
from hpcprobe.results.ceilings import Bound
from hpcprobe.results.model import Run
from hpcprobe.tuning import views as sweep_views
from hpcprobe.viewkit.figure import Figures
from hpcprobe.viewkit.table import View
from hpcprobe.views import proxy

if TYPE_CHECKING:
    from hpcprobe.judge.against import Against

C = TypeVar("C")

#: The runs that drivers make from families' runs (a scaling series, a sweep), with their
#: views: a stored summary shows, compares and reports as a family's run does.
SUMMARIES: tuple[Summary, ...] = (scaling.SUMMARY, sweep_views.SUMMARY)


def measuring() -> list[Family]:
    """The families that measure (the benchmarks a user names), in run order."""
    return [f for f in FAMILIES.values() if f.run is not None]


def having(kind: type[C]) -> dict[str, tuple[Family, C]]:
    """Family name -> (the family, its capability) for the families that declare one of this
    kind, in registry order."""
    out = {}
    for f in FAMILIES.values():
        if (c := f.capability(kind)) is not None:
            out[f.name] = (f, c)
    return out


def capable(kind: type[C]) -> dict[str, C]:
    """Family name -> its capability of this kind, for the families that declare one."""
    return {name: c for name, (_, c) in having(kind).items()}


def resolve(names: Sequence[str] | None) -> list[Family]:
    """The named families (all that run by default when none is named: not the external
    tools nor the user's applications), in the order given."""
    if not names:
        return [f for f in measuring() if f.capability(Default) is not None]
    known = {f.name: f for f in measuring()}
    for n in names:
        if n not in known:
            raise UserError(f"benchmark {n!r} is unknown; benchmarks: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


def node_probe() -> tuple[str, ...]:
    """The families of a campaign's node probe when `--probe` names none."""
    return tuple(name for name, d in capable(Default).items() if d.probe)


def execute(topo: Topology, profile: Profile, names: Sequence[str] | None, isa: str,
            options: Mapping[str, Any], progress: Progress | None = None,
            oversubscribe: bool = False, tag: str | None = None, isa_asked: bool = False,
            standalone: bool = False) -> Run:
    """Run the named families, then every deriving one."""
    chosen = resolve(names) + [f for f, _ in having(Derives).values()]
    return runner.execute(topo, profile, chosen, isa, options, progress or NoProgress(),
                          oversubscribe, tag, isa_asked, standalone)


def check_run(topo: Topology, isa: str, progress: Progress | None = None,
              names: Sequence[str] | None = None) -> Run:
    """The health tier's measurements: every family that declares `Check` (or those named of
    them), each at its headline point, then every deriving one."""
    ctx = RunContext(topo, CHECK, isa, isa_asked=True)
    chosen = [(f, c) for f, c in having(Check).values() if names is None or f.name in names]
    return execute(topo, CHECK, [f.name for f, _ in chosen], isa,
                   {f.name: c.options(ctx) for f, c in chosen}, progress, isa_asked=True)


def plan(topo: Topology, profile: Profile, names: Sequence[str] | None, isa: str,
         options: Mapping[str, Any], oversubscribe: bool = False, isa_asked: bool = False,
         standalone: bool = False) -> list[tuple[str, list[str]]]:
    """What the named families would measure."""
    return runner.plan(topo, profile, resolve(names), isa, options, oversubscribe, isa_asked,
                       standalone)


def families() -> dict[str, Family]:
    """Every registered family by name (a sweep file names them)."""
    return dict(FAMILIES)


def views() -> list[View]:
    """Every family's and summary's views, the proxies beside what they stand for, and the
    node facts' tables (the energy by benchmark)."""
    proxies = [(f.name, h.pick, p) for f, p in having(Predicts).values()
               if (h := f.capability(Headlines)) is not None]
    return [v for f in FAMILIES.values() for v in f.views] + \
        [v for s in SUMMARIES for v in s.views] + [partial(proxy.tables, proxies),
                                                   facts.details]


def figures() -> list[Figures]:
    return [g for f in FAMILIES.values() for g in f.figures] + \
        [g for s in SUMMARIES for g in s.figures] + [facts.figures]


def not_joined() -> NotJoined:
    """Per family (and summary), the params it does not join its metrics on across runs."""
    derived = {f"{f.name}.{s.name}" for f in FAMILIES.values() for s in f.metrics.specs
               if s.derived or f.capability(Derives) is not None}
    return NotJoined({**{f.name: f.metrics.not_joined for f in FAMILIES.values()},
                      **{s.benchmark: s.not_joined for s in SUMMARIES}}, derived=frozenset(derived))


def generated(root: Path) -> dict[Path, str]:
    """What is generated from the declarations (the result schema the package ships, the docs'
    tables of figures and of findings' codes, the list of modules from their docstrings), by
    the path it is kept at under a checkout's `root`."""
    # the modules that declare kinds of findings outside the families: the check's, the
    # campaign's
    from hpcprobe.analysis import health  # noqa: F401
    from hpcprobe.cluster import verdict  # noqa: F401
    from hpcprobe.common import moduledocs
    from hpcprobe.measure import schema  # the generator: for scripts/generate.py and the tests
    from hpcprobe.results import findings

    every = list(FAMILIES.values())
    package = root / "src" / "hpcprobe"
    return {package / "results" / schema.SCHEMA_FILE: schema.schema_text(every),
            root / schema.FIGURES_FILE: schema.figures_text(every),
            root / findings.KINDS_FILE: findings.kinds_text(),
            root / moduledocs.MODULES_FILE: moduledocs.text(package)}


def hardware_labels(provenance: Mapping[str, Any]) -> list[str]:
    """What families found on a node that its peers must share (GPU models), from a run's
    provenance."""
    return [x for inv in capable(Inventory).values() for x in inv.hardware(provenance)]


def figure_units(key: str) -> set[str] | None:
    """The units a headline's key may have (its family's declared units; `memory.…` ->
    {GB/s, …}), None where no family declares it (an application's own figures)."""
    family = FAMILIES.get(key.split(".", 1)[0])
    if family is None or family.metrics.open_prefix is not None:
        return None
    return {s.unit for s in family.metrics.specs} or None


def declared() -> Declared:
    """What the families declare that a verdict and a history read (the judge's and the
    history wing's input)."""
    return Declared(pickers(), not_joined(), hardware_labels, bounds())


def against(path: str | None) -> Against:
    """What a run is judged against: the reference file at `path` (read and checked now), or
    the host's previous runs (the judge wing's, with what the families declare)."""
    from hpcprobe.judge.against import Against

    return Against.of(path, declared(), figure_units)


def bounds() -> list[Bound]:
    """Every ceiling source's bounds: the node's facts' (the DIMMs) and the families'."""
    return [*facts.BOUNDS, *(b for c in capable(Ceilings).values() for b in c.bounds)]


def pickers() -> list[Picker]:
    """Every family's headline picker, in registry order, its headlines with their ceilings
    (`bounds`)."""
    return [partial(judge_run.bounded, h.pick, bounds()) for h in capable(Headlines).values()]


def judge(run: Run, reference: Reference | None) -> Verdict:
    """The run's verdict: its headline figures against their ceilings and the reference, and
    any other figure above its ceiling."""
    return judge_run.verdict(run, pickers(), reference, bounds())


def option_names() -> dict[str, str]:
    """Field name -> its flag, for every family option (how errors name options), and the
    flag's own name (argparse's dest: `fio_dir` -> --fio-dir) where no field has it."""
    fields: dict[str, str] = {"oversubscribe": "--oversubscribe"}
    dests: dict[str, str] = {}
    for f in FAMILIES.values():
        for name, flag in flags(f.options):
            fields[name] = flag.flag
            dests[flag.flag.lstrip("-").replace("-", "_")] = flag.flag
    return {**dests, **fields}
