"""References: the headline figures a hardware configuration is expected to deliver, with a
tolerance from the spread of the runs they came from (never tighter than the figure's
practical floor), kept per hardware fingerprint in a TOML file (`hpcprobe reference make`) or
taken from a host's previous runs in the store."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from hpcprobe.analysis import health
from hpcprobe.analysis.verdict import (
    Expected,
    Headline,
    Picker,
    Reference,
    disturbed,
    headlines,
)
from hpcprobe.common import files
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.results.model import Run
from hpcprobe.results.store import Store

if TYPE_CHECKING:
    from hpcprobe.analysis.compare import NotJoined
    from hpcprobe.results.ceilings import Bound

FORMAT = "hpcprobe-reference"
VERSION = 1
#: The spread of the runs' medians times this is the tolerance (where above the floor)
SPREADS = 3.0
#: A figure's own CI half-width times this is the tolerance (where above both)
CIS = 2.0
#: How many of a host's previous runs (newest first) serve as its reference without a file
PREVIOUS = 5
#: Fewer runs than this behind a figure make no reference of its own: a host's previous runs
#: judge from this many on, and `reference make` says which figures rest on fewer
MIN_RUNS = 3
#: A tolerance from this on says that the runs spread too far to be a reference (a figure may
#: lose half and still pass): `reference make` leaves such a figure out and says so, and a
#: file that holds one is refused when read. One rule for both.
MAX_TOLERANCE = 0.5
#: Labels: the hardware a run measured, as a reference file keys it (GPU models from the
#: families' inventories, which the caller hands in)
Labels = Callable[[Mapping[str, Any]], list[str]]
#: A headline key -> the units its family declares (None: no family declares it; the caller
#: hands the registry's in)
Units = Callable[[str], "set[str] | None"]


@dataclass(frozen=True)
class Declared:
    """What the families declare that a verdict and a history read (the registry's, handed
    over): the headline pickers, the params that do not tell figures apart, the hardware
    labels; and the ceilings' sources."""

    pickers: Sequence[Picker]
    not_joined: NotJoined
    labels: Labels
    bounds: Sequence[Bound] = ()


def state_only(bounds: Sequence[Bound] = ()) -> Declared:
    """What a run that measured nothing is judged by: its state alone, no family's headline
    or hardware label (those are of what a family measured)."""
    from hpcprobe.analysis.compare import NotJoined

    return Declared((), NotJoined(), lambda _: [], bounds)


def hardware(run: Run, labels: Labels) -> dict[str, Any]:
    """The hardware fingerprint of a run: CPU model, sockets, cores, and what the families'
    inventories found (GPU models). DIMMs and links are not in it: a missing DIMM is what a
    reference must catch, not a reason to pick another one."""
    c = run.topology.get("counts", {})
    return {"cpu": str(run.node.cpu_model or "unknown CPU"),
            "sockets": int(c.get("packages", 0)), "cores": int(c.get("cores", 0)),
            "devices": sorted(labels(run.provenance))}


def describe(hw: Mapping[str, Any]) -> str:
    devices = f", {', '.join(hw['devices'])}" if hw.get("devices") else ""
    return f"{hw['cpu']}, {hw['sockets']} x {hw['cores'] // max(1, hw['sockets'])} cores" \
        + devices


def _round_up(x: float, step: float = 0.005) -> float:
    return round(math.ceil(x / step - 1e-9) * step, 4)


def mad(values: Sequence[float], median: float) -> float:
    """The median absolute deviation of values around their median, scaled to a normal
    distribution's standard deviation: SciPy's `median_abs_deviation(values, scale="normal")`,
    every bit (its scale is the normal quantile at 3/4, as `statistics` gives it), without its
    millisecond a call (a fleet's references: 9,000 figures) or its import."""
    import statistics

    return statistics.median([abs(v - median) for v in values]) / \
        statistics.NormalDist().inv_cdf(0.75)


class Given(NamedTuple):
    """One headline figure of one node run as a reference takes it: its key, label, unit and
    which way is better, its practical floor, its median and relative CI half-width (inf where
    it has none), and whether its family's figures were disturbed in that run (`disturbed`)."""

    key: str
    label: str
    unit: str
    better: str
    floor: float
    median: float
    rel_ci: float
    noisy: bool = False


@dataclass(frozen=True)
class Entry:
    """What one node run gives a reference (`entry`): its id, host and profile, whether it was
    interrupted, its hardware fingerprint and node state, and its headline figures. Kept
    beside a stored run (judge/kept.py), so that a fleet's nodes' references from their
    previous runs read none of those runs."""

    run_id: str
    host: str
    profile: str
    interrupted: bool
    hardware: dict[str, Any]
    state: dict[str, str]
    figures: tuple[Given, ...]

    def to_json(self) -> list[Any]:
        return [self.run_id, self.host, self.profile, self.interrupted, self.hardware,
                self.state, [list(f) for f in self.figures]]

    @classmethod
    def from_json(cls, doc: Sequence[Any]) -> Entry:
        """`to_json`'s entry; TypeError or ValueError where the document is not one."""
        run_id, host, profile, interrupted, hw, state, figures = doc
        if not isinstance(hw, dict) or not isinstance(state, dict):
            raise TypeError("hardware and state are objects")
        return cls(str(run_id), str(host), str(profile), bool(interrupted), hw, state,
                   tuple(Given(str(k), str(label), str(unit), str(better), float(floor),
                               float(median), float(rel), bool(noisy))
                         for k, label, unit, better, floor, median, rel, noisy in figures))


def entry(run: Run, heads: Sequence[Headline], labels: Labels) -> Entry:
    """What a node run gives a reference, its headlines `heads` (as its families pick them)."""
    noisy = disturbed(run)
    return Entry(run.run_id, run.host, run.profile, run.conditions.interrupted is not None,
                 hardware(run, labels), health.state_of(run),
                 tuple(Given(h.key, h.label, m.unit, m.better, h.floor, s.median,
                             s.rel_ci_halfwidth, m.benchmark in noisy)
                       for h in heads for m in (h.metric,) for s in (m.summary,)))


def expected(heads: Sequence[Given]) -> Expected:
    """One figure's reference from its headline in several runs: the median of their medians;
    the tolerance the largest of its floor, SPREADS x the runs' spread (a robust standard
    deviation from 3 runs on, half the range of 2) and CIS x the median CI half-width."""
    import statistics  # where used: a state-only check makes no reference

    first = heads[0]
    meds = [h.median for h in heads]
    value = statistics.median(meds)
    spread: float | None = None
    if len(meds) >= 3 and value:
        spread = mad(meds, value) / abs(value)
    elif len(meds) == 2 and value:
        spread = abs(meds[0] - meds[1]) / 2 / abs(value)
    cis = [h.rel_ci for h in heads if math.isfinite(h.rel_ci)]
    ci = statistics.median(cis) if cis else 0.0
    tolerance = max(first.floor, SPREADS * (spread or 0.0), CIS * ci)
    return Expected(first.key, first.label, first.unit, first.better, round(value, 6),
                    _round_up(tolerance), len(meds), None if spread is None else round(spread, 4))


@dataclass
class Group:
    """The reference of one hardware fingerprint and profile (whose sizes and samples its
    figures share): its runs and hosts, its expected figures."""

    hardware: dict[str, Any]
    profile: str
    runs: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    figures: dict[str, Expected] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)  # what all its runs' states share
    #: figures left out by `make`: their tolerance reached MAX_TOLERANCE (key -> it)
    too_noisy: dict[str, float] = field(default_factory=dict)
    #: runs among them that were interrupted (their figures are those measured before it)
    interrupted: list[str] = field(default_factory=list)

    def few_runs(self) -> list[str]:
        """The figures that rest on fewer than MIN_RUNS runs."""
        return [k for k, e in self.figures.items() if e.runs < MIN_RUNS]


def _undisturbed(heads: Sequence[Given]) -> list[Given]:
    """A figure's headlines of the runs the hypervisor's steal or the node sentinel did not
    mark as disturbed (their wide CIs would loosen the tolerance), all of them where every run
    was."""
    return [h for h in heads if not h.noisy] or list(heads)


def make(runs: Sequence[Run], pickers: Sequence[Picker], labels: Labels) -> list[Group]:
    """The references of these node runs, one per hardware fingerprint and profile: each
    figure its runs measured (undisturbed where any was), and the state they shared."""
    return grouped([entry(r, headlines(r, pickers), labels) for r in runs if r.kind == "node"])


def grouped(entries: Sequence[Entry]) -> list[Group]:
    """The references of what these node runs give (`entry`), one per hardware fingerprint
    and profile."""
    groups: dict[str, tuple[Group, dict[str, list[Given]]]] = {}
    states: dict[str, list[dict[str, str]]] = {}
    for e in entries:
        g, heads = groups.setdefault(key := f"{describe(e.hardware)}, {e.profile}",
                                     (Group(dict(e.hardware), e.profile), {}))
        states.setdefault(key, []).append(e.state)
        g.runs.append(e.run_id)
        if e.interrupted:
            g.interrupted.append(e.run_id)
        if e.host not in g.hosts:
            g.hosts.append(e.host)
        for f in e.figures:
            heads.setdefault(f.key, []).append(f)
    out = []
    for key, (g, heads) in groups.items():
        made = {k: expected(_undisturbed(hs)) for k, hs in heads.items()}
        g.figures = {k: e for k, e in made.items() if e.tolerance < MAX_TOLERANCE}
        g.too_noisy = {k: e.tolerance for k, e in made.items() if k not in g.figures}
        g.state = health.common(states[key])
        if g.figures or g.state:
            out.append(g)
    return out


def _entry(e: Expected) -> dict[str, Any]:
    return {"label": e.label, "unit": e.unit, "better": e.better, "expected": e.value,
            "tolerance": e.tolerance, "runs": e.runs,
            **({} if e.spread is None else {"spread": e.spread})}


def to_toml(groups: Sequence[Group], source: str) -> str:
    """The reference file: a header saying how to read it, then one [[hardware]] table per
    fingerprint with its figures."""
    import tomli_w

    doc = {"format": FORMAT, "version": VERSION,
           "created": datetime.now(UTC).isoformat(timespec="seconds"), "source": source,
           "hardware": [{**g.hardware, "profile": g.profile, "runs": g.runs, "hosts": g.hosts,
                         "figures": {k: _entry(e) for k, e in g.figures.items()},
                         **({"state": g.state} if g.state else {})}
                        for g in groups]}
    head = ("# hpcprobe reference: per hardware fingerprint (cpu, sockets, cores, devices) and\n"
            "# profile (quick, default, thorough: their sizes differ), each\n"
            "# headline figure's expected value (the median of its runs' medians, in `unit`)\n"
            "# and its tolerance (relative: 0.05 = 5 %; `better` says which side fails).\n"
            "# Judge a run with `hpcprobe run --against FILE` or `hpcprobe show RUN --against\n"
            "# FILE`; edit a value or a tolerance by hand if you know better. `state` is\n"
            "# what the runs' nodes shared (CPUs, memory, DIMMs, governor, THP, ports, PCIe\n"
            "# links): `hpcprobe check --against FILE` fails a node that differs from it.\n")
    return head + str(tomli_w.dumps(doc))


def write(groups: Sequence[Group], source: str, path: str) -> None:
    files.atomic_write(path, to_toml(groups, source).encode(), "-o")


def _number(d: Mapping[str, Any], name: str, kind: type = float) -> Any:
    """A number of a reference's table: a TOML number (not text, not a boolean), finite."""
    v = d[name]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
            (kind is int and not isinstance(v, int)) or not math.isfinite(v):
        raise ValueError(f"{name} = {v!r} is not a finite {kind.__name__}")
    return kind(v)


def _figure(key: str, d: Any, where: str, units: Units) -> Expected:
    try:
        e = Expected(key, str(d["label"]), str(d["unit"]), str(d["better"]),
                     _number(d, "expected"), _number(d, "tolerance"),
                     _number(d, "runs", int) if "runs" in d else 1,
                     None if d.get("spread") is None else _number(d, "spread"))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{where}: figure {key!r} needs label, unit, better, expected and "
                        f"tolerance, numbers where they are ({exc})") from None
    if e.better not in ("higher", "lower") or not 0 <= e.tolerance < MAX_TOLERANCE or \
            e.value <= 0 or e.runs < 1:
        raise UserError(f"{where}: figure {key!r}: better is higher or lower, tolerance a "
                        f"fraction from 0 to {MAX_TOLERANCE} (0.05 = 5 %; from "
                        f"{MAX_TOLERANCE} on, its runs spread too far to be a reference), "
                        "expected above 0, runs 1 or more")
    declared = units(key)
    if declared is not None and e.unit not in declared:
        raise UserError(f"{where}: figure {key!r}: unit {e.unit!r} is not its figure's "
                        f"({', '.join(sorted(declared))})")
    return e


def _hardware(g: Mapping[str, Any], where: str) -> dict[str, Any]:
    devices = g.get("devices", [])
    try:
        hw = {"cpu": str(g["cpu"]), "sockets": _number(g, "sockets", int),
              "cores": _number(g, "cores", int)}
    except (KeyError, ValueError) as exc:
        raise UserError(f"{where}: cpu (text), sockets and cores (numbers) ({exc})") from None
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        raise UserError(f"{where}: devices = {devices!r} is not a list of device names")
    return {**hw, "devices": sorted(devices)}


def no_units(key: str) -> set[str] | None:
    return None


def load(path: str, units: Units = no_units,
         named: str | None = None) -> list[Group]:
    """A reference file's groups, checked: one clear line for what is wrong, naming the file
    as `named` (default: the `against` option and the path; `units`: the units a figure's key
    may have, None where it is not known)."""
    named = named or f"<against> {path}"
    try:
        doc = tomllib.loads(files.read_input(Path(path), named))
    except tomllib.TOMLDecodeError as exc:
        raise OptionError(f"{named}: not TOML ({exc})") from None
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise OptionError(f"{named}: not an hpcprobe reference (format = \"{FORMAT}\", "
                          f"version = {VERSION}); `hpcprobe reference make` writes one")
    groups: list[Group] = []
    tables = doc.get("hardware", [])
    for i, g in enumerate(tables if isinstance(tables, list) else [tables]):
        where = f"{named}: hardware {i + 1}"
        if not isinstance(g, dict) or not isinstance(g.get("figures"), dict):
            raise UserError(f"{where}: a table with cpu, sockets, cores, profile and figures")
        hw = _hardware(g, where)
        state = g.get("state", {})
        if not isinstance(state, dict):
            raise UserError(f"{where}: state is a table of labelled values")
        group = Group(hw, str(g.get("profile", "default")), list(g.get("runs", [])),
                      list(g.get("hosts", [])),
                      {k: _figure(k, d, where, units) for k, d in g["figures"].items()},
                      {str(k): str(v) for k, v in state.items()})
        twin = next((j for j, o in enumerate(groups)
                     if (o.hardware, o.profile) == (hw, group.profile)), None)
        if twin is not None:
            raise UserError(f"{where}: the same hardware and profile as hardware {twin + 1} "
                            f"({describe(hw)}, {group.profile}); keep one of them")
        groups.append(group)
    return groups


def for_run(groups: Sequence[Group], run: Run, labels: Labels, path: str) -> Reference:
    """The reference of the run's hardware and profile in a file (none there: a reference
    with no figures, which says so)."""
    hw = hardware(run, labels)
    same = [g for g in groups if g.hardware == hw]
    for g in same:
        if g.profile == run.profile:
            return Reference(f"{path} ({len(g.runs)} {g.profile} run(s) of {len(g.hosts)} "
                             "host(s))", g.figures, path, g.state)
    if same:  # the state is the hardware's, whatever profile measured it
        return Reference(f"{path} has figures for this hardware from profile(s) "
                         f"{', '.join(sorted({g.profile for g in same}))} only, not "
                         f"{run.profile}", name=path,
                         state=next((g.state for g in same if g.state), {}))
    return Reference(f"{path} has no figures for this hardware ({describe(hw)})", name=path)


#: the runs whose previous runs `previous_all` lists at once
AT_ONCE = 200
#: What stored runs give a reference, by run id, for these run ids (node runs only)
Entries = Callable[[Sequence[str]], Mapping[str, Entry]]


def previous_all(store: Store, runs: Sequence[Run], entries: Entries, labels: Labels,
                 limit: int = PREVIOUS) -> dict[str, Reference | None]:
    """Each run's reference by its id: its host's previous node runs of the same hardware and
    profile (up to `limit`, newest first, made before it); None where there are none. The runs
    they rest on are listed a few hundred nodes at once, and what each gives a reference taken
    from `entries` (kept beside them: a campaign's thousand nodes' previous runs are not
    read)."""
    out: dict[str, Reference | None] = {}
    for i in range(0, len(runs), AT_ONCE):
        part = runs[i:i + AT_ONCE]
        listed = store.before([(r.host, r.created, r.profile) for r in part], 4 * limit)
        given = entries(sorted({run_id for ids in listed for run_id in ids}))
        for run, ids in zip(part, listed, strict=True):
            hw = hardware(run, labels)
            before = [e for e in (given.get(run_id) for run_id in ids)
                      if e is not None and not e.interrupted and e.hardware == hw][:limit]
            groups = grouped(before) if before else []
            out[run.run_id] = None if not groups else Reference(
                f"this host's {len(before)} previous {run.profile} run(s) in the store (same "
                "hardware; --against FILE judges against a reference file)", groups[0].figures,
                "their own previous runs", groups[0].state, min_runs=MIN_RUNS)
    return out
