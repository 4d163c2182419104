"""The node's facts beyond its topology, each declared once: the key it is kept under in a
run's provenance, how it is read from a /sys tree (this node's, or a recorded copy that
`check --sysfs` replays), the lines it adds to a run's header, the labelled values a healthy
node of its kind keeps (what `check` compares with its reference's state), the ceilings it sets
for figures, the error counters of its hardware a check watches rise and the faults it finds
that a check drains for (the GPUs'). Provenance, the terminal header, the node's state, the
verdict's ceilings, the check's counters and faults, the recorded-/sys replay and the result
schema (each fact declares its part) walk `FACTS`; none names a fact. A new fact is a module
that reads it and one entry here (docs/design.md walks through one)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe.machine import dimms, edac, energy, gpuhealth, links
from hpcprobe.results.ceilings import Bound, Ceiling
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.figure import named
from hpcprobe.viewkit.table import Block

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not at start-up
    from matplotlib.figure import Figure

#: The node's own /sys
SYSFS = Path("/sys")


def _no_lines(stored: Any) -> list[str]:
    return []


def _no_state(stored: Any) -> dict[str, str]:
    return {}


def _no_counters(sysfs: Path) -> dict[str, int]:
    return {}


def _no_details(stored: Any) -> list[Block]:
    return []


def _no_faults(stored: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class Fact:
    """One node fact and what each reader needs of it."""

    key: str  # under which a run's provenance keeps it
    #: (the CPU model, a /sys root) -> the fact as stored (JSON types)
    read: Callable[[str, Path], Any]
    #: the fact as stored (None: an older run's lacks it) -> the run header's lines
    lines: Callable[[Any], list[str]] = _no_lines
    #: the fact as stored -> labelled values a healthy node of its kind keeps
    state: Callable[[Any], dict[str, str]] = _no_state
    #: the ceilings it sets for figures (the DIMMs: the DRAM bandwidth)
    bounds: tuple[Bound, ...] = ()
    #: a /sys root -> the error counters of its hardware a check watches rise, by name
    counters: Callable[[Path], dict[str, int]] = _no_counters
    #: its part of the result schema: the JSON schema of the fact as stored
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    #: the fact as stored -> its tables for `--details` and the report (none: its lines say it)
    details: Callable[[Any], list[Block]] = _no_details
    #: (a run's label, the fact as it stored it) of each run -> the report's figure of them
    timeline: Callable[[list[tuple[str, Any]]], Figure | None] | None = None
    #: the fact as stored -> the faults it found, one line each with the fix (a check drains)
    faults: Callable[[Any], list[str]] = _no_faults


def _under(sysfs: Path, path: str) -> str:
    """A path of this node's /sys (`/sys/...`) in the /sys tree at `sysfs`."""
    return str(sysfs / Path(path).relative_to(SYSFS))


def _edac_counters(sysfs: Path) -> dict[str, int]:
    """The memory controllers' corrected and uncorrected error totals (EDAC)."""
    mc = edac.read(_under(sysfs, edac.ROOT))
    return {} if mc is None else {"EDAC corrected": mc.ce, "EDAC uncorrected": mc.ue}


def _dram(cpu_model: str, sysfs: Path) -> dict[str, Any]:
    return dimms.dram_ceiling(cpu_model, _under(sysfs, dimms.ROOT),
                              _under(sysfs, edac.ROOT)).to_dict()


#: The key the DIMMs' ceiling is kept under
DRAM = "dram_ceiling"


def dram_ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """The DIMMs' ceiling for a DRAM bandwidth figure on the most threads the run streamed
    from DRAM with (the memory channels, not the cores, bound it there), or why it has none;
    None for other figures and runs that kept no DIMMs."""
    stored = run.provenance.get(DRAM)
    if not isinstance(stored, dict) or metric.params.get("level") != "DRAM":
        return None
    most = max(m.params["threads"] for m in run.select(metric.benchmark, metric.name)
               if m.params.get("level") == "DRAM")
    if metric.params.get("threads") != most:
        return None
    gbs = stored.get("gbs")
    return Ceiling(gbs if isinstance(gbs, float) else None, str(stored.get("source")))


FACTS: tuple[Fact, ...] = (
    Fact(DRAM, _dram, dimms.line, dimms.state,
         (Bound("memory", "bandwidth", dram_ceiling),), _edac_counters, dimms.SCHEMA),
    Fact("links", lambda _, sysfs: links.read(sysfs), links.line, links.state,
         counters=links.counters, schema=links.SCHEMA),
    Fact(energy.KEY, lambda _, sysfs: energy.fact(Path(_under(sysfs, energy.ROOT))),
         energy.line, schema=energy.SCHEMA, details=energy.table, timeline=energy.timeline),
    Fact(gpuhealth.KEY, lambda _, sysfs: gpuhealth.fact(sysfs), gpuhealth.line,
         gpuhealth.state, schema=gpuhealth.SCHEMA, details=gpuhealth.details,
         faults=gpuhealth.faults),
)


#: The ceilings the node's facts set
BOUNDS: tuple[Bound, ...] = tuple(b for f in FACTS for b in f.bounds)


def details(run: Run) -> list[Block]:
    """Every fact's tables of a run (a view, beside the families')."""
    return [b for f in FACTS for b in f.details(run.provenance.get(f.key))]


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    """The report's figures of the facts that draw one (the power over each run's time)."""
    return named(*[(f"{f.key}-timeline", f"{f.key.capitalize()} over the run",
                    f.timeline([(r.tag or r.run_id, r.provenance.get(f.key)) for r in runs]))
                   for f in FACTS if f.timeline is not None])


def schema() -> dict[str, Any]:
    """The facts' part of the result schema: each one's, under its key."""
    return {f.key: dict(f.schema) for f in FACTS}


def faults(provenance: Mapping[str, Any]) -> list[str]:
    """Every fault the facts a run recorded found (a GPU due for a reset), one line each."""
    return [x for f in FACTS for x in f.faults(provenance.get(f.key))]


def counters(sysfs: Path = SYSFS) -> dict[str, int]:
    """Every fact's watched error counters of the node whose /sys is `sysfs`, by name."""
    return {name: v for f in FACTS for name, v in f.counters(sysfs).items()}


def read(cpu_model: str, sysfs: Path = SYSFS) -> dict[str, Any]:
    """Every fact of the node whose /sys is `sysfs`, by its key."""
    return {f.key: f.read(cpu_model, sysfs) for f in FACTS}


def lines(provenance: Mapping[str, Any]) -> list[str]:
    """The run header's lines of every fact a run recorded."""
    return [x for f in FACTS for x in f.lines(provenance.get(f.key))]


def state(provenance: Mapping[str, Any]) -> dict[str, str]:
    """The labelled values of every fact a run recorded (absent where it recorded none)."""
    out: dict[str, str] = {}
    for f in FACTS:
        if (stored := provenance.get(f.key)) is not None:
            out.update(f.state(stored))
    return out
