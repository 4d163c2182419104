"""The composition root: what the registries hold, gathered for the commands. The CLI, the
benchmarks and the tests reach families through here; nothing below names one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hpcprobe.analysis.compare import NotJoined
from hpcprobe.common.errors import UserError
from hpcprobe.families import FAMILIES
from hpcprobe.machine.topology import Topology
from hpcprobe.measure import runner
from hpcprobe.measure.family import Family, NoProgress, Progress, Scaling, flags
from hpcprobe.measure.profiles import Profile
from hpcprobe.results.model import Run
from hpcprobe.views.figure import Figures
from hpcprobe.views.table import View


def measuring() -> list[Family]:
    """The families that measure (the benchmarks a user names), in run order."""
    return [f for f in FAMILIES.values() if f.run is not None]


def resolve(names: Sequence[str] | None) -> list[Family]:
    """The named families (all that measure by default when none is named: not the external
    tools nor the user's applications), in the order given."""
    if not names:
        return [f for f in measuring() if f.default]
    known = {f.name: f for f in measuring()}
    for n in names:
        if n not in known:
            raise UserError(f"benchmark {n!r} is unknown; benchmarks: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


def execute(topo: Topology, profile: Profile, names: Sequence[str] | None, isa: str,
            options: Mapping[str, Any], progress: Progress | None = None,
            oversubscribe: bool = False, tag: str | None = None, isa_asked: bool = False,
            standalone: bool = False) -> Run:
    """Run the named families, then every deriving one."""
    chosen = resolve(names) + [f for f in FAMILIES.values() if f.derive is not None]
    return runner.execute(topo, profile, chosen, isa, options, progress or NoProgress(),
                          oversubscribe, tag, isa_asked, standalone)


def plan(topo: Topology, profile: Profile, names: Sequence[str] | None, isa: str,
         options: Mapping[str, Any], oversubscribe: bool = False, isa_asked: bool = False,
         standalone: bool = False) -> list[tuple[str, list[str]]]:
    """What the named families would measure."""
    return runner.plan(topo, profile, resolve(names), isa, options, oversubscribe, isa_asked,
                       standalone)


def scaling() -> dict[str, Scaling]:
    """Family name -> its Scaling, for those that run across nodes."""
    return {f.name: f.scaling for f in FAMILIES.values() if f.scaling is not None}


def pairwise() -> dict[str, str]:
    """Family name -> the flag naming its peer node, for those that measure between nodes."""
    return {f.name: f.peer for f in FAMILIES.values() if f.peer is not None}


def sized() -> dict[str, Family]:
    """The families that declare a problem size (`hpcprobe scale`)."""
    return {f.name: f for f in FAMILIES.values() if f.sized is not None}


def families() -> dict[str, Family]:
    """Every registered family by name (a sweep file names them)."""
    return dict(FAMILIES)


def views() -> list[View]:
    return [v for f in FAMILIES.values() for v in f.views]


def figures() -> list[Figures]:
    return [g for f in FAMILIES.values() for g in f.figures]


def not_joined() -> NotJoined:
    """Per family, the params it does not join its metrics on across runs."""
    return NotJoined({f.name: f.not_joined for f in FAMILIES.values()})


def option_names() -> dict[str, str]:
    """Field name -> its flag, for every family option (how errors name options)."""
    out = {"oversubscribe": "--oversubscribe"}
    for f in FAMILIES.values():
        out.update({name: flag.flag for name, flag in flags(f.options)})
    return out
