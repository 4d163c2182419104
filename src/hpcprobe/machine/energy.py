"""The node's energy counters, read around each benchmark: RAPL through Linux's powercap
interface (`/sys/class/powercap/intel-rapl:N[:M]/`: `name`, `energy_uj`,
`max_energy_range_uj`), Intel's package, core, uncore and DRAM domains and AMD Zen's package
and core domains alike (the kernel's intel-rapl driver serves both). RAPL covers the package
(and Intel's DRAM), not the board, and is a model on some CPUs: the domains measured are named
beside every reading. A counter counts micro-joules and wraps at its range, so a helper thread
reads it often enough to see every wrap (a package at 500 W wraps a 262 kJ range every 9
minutes). Where no counter can be read the reason is said in one line, with the fix: a VM
exposes none; since Linux 5.10 `energy_uj` is readable by root only (a side channel was
closed)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe.common.kernelfiles import read_text
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not at start-up
    from matplotlib.figure import Figure

#: This node's powercap tree (a recorded /sys holds it at the same place below its root)
ROOT = "/sys/class/powercap"
#: The key a run's provenance keeps the energy fact and its readings under
KEY = "energy"
#: Where a run's meter reads (the tests point it at a tree of their own)
POWERCAP = Path(ROOT)
#: What the readings are, named beside them
SOURCE = "RAPL (Linux powercap)"
#: The helper thread reads every counter this often (s): far more often than the fastest
#: wrap (a 262 kJ range at 1 kW: 4 minutes), seldom enough to cost nothing
POLL_S = 10.0


@dataclass(frozen=True)
class Domain:
    """One energy counter: its name ("package-0", "package-0/core", "package-0/dram"), its
    `energy_uj` file and the range it wraps at (micro-joules)."""

    name: str
    path: Path
    range_uj: int


def _zones(root: Path) -> list[Path]:
    """The RAPL zones of a powercap tree, parents before their subzones (`intel-rapl:0`,
    `intel-rapl:0:0`); the MMIO interface's duplicates of a package (`intel-rapl-mmio:0`)
    are left out, so that no energy is counted twice."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith("intel-rapl:") and
             (p / "energy_uj").exists()]
    return sorted(found, key=lambda p: [int(x) for x in p.name.split(":")[1:]])


def discover(root: Path = POWERCAP) -> tuple[list[Domain], str | None]:
    """The energy domains of a powercap tree, or why none can be read (with the fix)."""
    zones = _zones(root)
    if not zones:
        return [], (f"no RAPL counters under {root} (a VM exposes none; on bare metal load the "
                    "intel_rapl_msr driver)")
    if not all(os.access(z / "energy_uj", os.R_OK) for z in zones):
        return [], (f"{zones[0] / 'energy_uj'} is readable by root only (Linux 5.10 and later): "
                    "run as root, or grant read access (a udev rule, or chmod o+r on each "
                    "energy_uj)")
    names: dict[str, str] = {}
    out = []
    for z in zones:
        own = read_text(z / "name") or z.name
        parent = z.name.rsplit(":", 1)[0] if z.name.count(":") > 1 else None
        names[z.name] = f"{names[parent]}/{own}" if parent in names else own
        rng = (read_text(z / "max_energy_range_uj") or "").strip()
        out.append(Domain(names[z.name], z / "energy_uj", int(rng) if rng.isdigit() else 0))
    return out, None


def _uj(d: Domain) -> int | None:
    text = (read_text(d.path) or "").strip()
    return int(text) if text.isdigit() else None


def advance(before: int, after: int, range_uj: int) -> int:
    """Micro-joules counted from `before` to `after`, one wrap at `range_uj` allowed for."""
    if after >= before or range_uj <= 0:
        return max(0, after - before)
    return after + range_uj - before


@dataclass(frozen=True)
class Window:
    """The energy of one stretch of a run: its seconds and joules per domain."""

    seconds: float
    joules: dict[str, float]

    @property
    def whole_joules(self) -> float:
        """The joules of the domains that count energy no other counts (packages, DRAM)."""
        return sum(j for d, j in self.joules.items() if whole(d))

    @property
    def watts(self) -> float | None:
        """The mean power of those domains (None for a stretch of no length)."""
        return self.whole_joules / self.seconds if self.seconds > 0 else None

    def domains(self) -> str:
        """The domains summed, as a figure's param names them ("package-0+package-0/dram")."""
        return "+".join(d for d in self.joules if whole(d))

    def stored(self) -> dict[str, Any]:
        """As a run keeps it: {seconds, joules: domain -> J}, to the millisecond and
        millijoule."""
        return {"seconds": round(self.seconds, 3),
                "joules": {d: round(j, 3) for d, j in self.joules.items()}}


#: Where the counters stood at one moment: the time and the micro-joules since the start
Mark = tuple[float, dict[str, int]]


def _between(a: Mark, b: Mark) -> Window:
    """The energy from mark `a` to mark `b`, per domain read both times."""
    (t0, before), (t1, after) = a, b
    return Window(t1 - t0, {d: (after[d] - before[d]) / 1e6 for d in after if d in before})


def joined(windows: list[Window]) -> Window | None:
    """Several stretches as one: their seconds and each domain's joules summed (the domains
    every one of them read); None for none."""
    if not windows:
        return None
    common = set.intersection(*(set(w.joules) for w in windows))
    return Window(sum(w.seconds for w in windows),
                  {d: sum(w.joules[d] for w in windows) for d in windows[0].joules
                   if d in common})


@dataclass
class Meter:
    """Joules per domain since the start, every wrap counted (a helper thread reads the
    counters every `poll_s` and adds what each advanced); a `take` keeps those since the
    last, a `mark` and `since` those of any stretch."""

    domains: list[Domain]
    poll_s: float = POLL_S
    why: str | None = None  # why nothing is measured
    readings: dict[str, dict[str, Any]] = field(default_factory=dict)
    idle: Window | None = None  # the node at rest before the first benchmark
    _last: dict[str, int] = field(default_factory=dict)
    _all: dict[str, int] = field(default_factory=dict)  # micro-joules since the start
    _taken: Mark | None = None  # where the last take (or the start) left the counters
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @classmethod
    def of(cls, root: Path | None = None, poll_s: float | None = None) -> Meter:
        """A meter of the domains under `root` (this node's powercap tree by default)."""
        domains, why = discover(POWERCAP if root is None else root)
        return cls(domains, POLL_S if poll_s is None else poll_s, why)

    def _poll(self) -> None:
        with self._lock:
            self._read()

    def _read(self) -> None:
        """Every domain's counter added to its count (the caller holds the lock)."""
        for d in self.domains:
            now = _uj(d)
            if now is None:
                continue
            self._all[d.name] = self._all.get(d.name, 0) + (
                advance(self._last[d.name], now, d.range_uj) if d.name in self._last else 0)
            self._last[d.name] = now

    def mark(self) -> Mark | None:
        """Where the counters stand now (a time and the micro-joules since the start), for
        `since`; None where nothing is measured. Its time is the middle of the readings (a
        process put off the CPU just before or after them moves it by half that, at most)."""
        if not self.domains or self._thread is None:
            return None
        with self._lock:
            before = time.perf_counter()
            self._read()
            return (before + time.perf_counter()) / 2, dict(self._all)

    def since(self, mark: Mark | None) -> Window | None:
        """The energy from `mark` to now, per domain read both times (None without a mark)."""
        now = self.mark()
        return None if mark is None or now is None else _between(mark, now)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._poll()

    def start(self) -> None:
        """The first reading, and the helper thread that sees every wrap."""
        if not self.domains:
            return
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        self._taken = self.mark()

    def rest(self, seconds: float) -> None:
        """Read the node's idle power: `seconds` of doing nothing (nothing where nothing is
        measured, or `seconds` is 0: the profile's `idle_s`)."""
        if seconds > 0 and (at := self.mark()) is not None:
            time.sleep(seconds)
            self.idle = self.since(at)

    def take(self, label: str | None) -> None:
        """Keep the joules per domain since the last take (or the start) under `label` (None:
        start afresh, keeping nothing: what ran between benchmarks)."""
        if (now := self.mark()) is None:
            return
        if label is not None and self._taken is not None:
            self.readings[label] = _between(self._taken, now).stored()
        self._taken = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def provenance(self) -> dict[str, Any]:
        """What the run keeps: the source, its domains and each benchmark's reading, or why
        nothing was measured."""
        if not self.domains:
            return {"measured": False, "why": self.why}
        idle = {} if self.idle is None else {"idle": self.idle.stored()}
        return {"measured": True, "source": SOURCE, "domains": [d.name for d in self.domains],
                "readings": self.readings, **idle}


#: The energy fact as a run keeps it (`Meter.provenance`): its part of the result schema
_READING = {"type": "object", "required": ["seconds", "joules"],
            "properties": {"seconds": {"type": "number", "minimum": 0},
                           "joules": {"type": "object",
                                      "additionalProperties": {"type": "number", "minimum": 0}}}}
SCHEMA = {"type": "object", "required": ["measured"], "properties": {
    "measured": {"type": "boolean"},
    "why": {"type": ["string", "null"]},
    "source": {"type": "string"},
    "domains": {"type": "array", "items": {"type": "string"}},
    "readings": {"type": "object", "additionalProperties": _READING},
    "idle": _READING},
    "if": {"properties": {"measured": {"const": True}}},
    "then": {"required": ["source", "domains", "readings"]},
    "else": {"required": ["why"]}}


def whole(name: str) -> bool:
    """Whether a domain counts energy no other domain counts: a package (its core and uncore
    are parts of it) or DRAM (outside the package, though powercap lists it under one)."""
    last = name.rsplit("/", 1)[-1]
    return last.startswith("package") or last == "dram"


def fact(root: Path = POWERCAP) -> dict[str, Any]:
    """The node's energy domains as a run keeps them before any reading (or why none)."""
    domains, why = discover(root)
    return Meter(domains, why=why).provenance()


def _window(r: Any) -> Window | None:
    """A stored reading ({seconds, joules}) as a window (None: not one)."""
    if not isinstance(r, dict) or not isinstance(r.get("joules"), dict):
        return None
    return Window(float(r.get("seconds", 0.0)), dict(r["joules"]))


def table(stored: dict[str, Any] | None) -> list[Block]:
    """`--details` and the report: each benchmark's seconds, joules and mean watts (packages
    and DRAM summed) and each package's and DRAM's joules (their cores' are parts of them),
    the node at rest first; nothing where nothing was read."""
    if not stored or not stored.get("measured"):
        return []
    rows = [(name, w) for name, r in [("(idle)", stored.get("idle")),
                                      *(stored.get("readings") or {}).items()]
            if (w := _window(r)) is not None]
    if not rows:
        return []
    domains = [d for d in stored.get("domains") or [] if whole(d)]
    t = Table(f"Energy by benchmark ({stored.get('source')})",
              caption="J and W: the packages and DRAM summed, then each one's joules; "
              "(idle): the node at rest before the first benchmark")
    for col, just in (("benchmark", "left"), ("s", "right"), ("J", "right"), ("W", "right"),
                      *((f"{d} J", "right") for d in domains)):
        t.add_column(col, just)
    for name, w in rows:
        t.add_row(name, f"{w.seconds:.1f}", f"{w.whole_joules:.0f}",
                  "-" if w.watts is None else f"{w.watts:.1f}",
                  *(f"{w.joules[d]:.1f}" if d in w.joules else "-" for d in domains))
    return [t]


def timeline(runs: list[tuple[str, Any]]) -> Figure | None:
    """The report's power over each run's time line: each benchmark's mean watts (packages and
    DRAM) as a step over its seconds, the idle reading before zero, one colour a run (label,
    the run's stored energy); None where no run read any."""
    read = [(name, stored) for name, stored in runs
            if isinstance(stored, dict) and stored.get("measured") and stored.get("readings")]
    if not read:
        return None
    fig, ax = figure.new("Power over the run (packages and DRAM)", "seconds since the first "
                         "benchmark", "W")
    for name, stored in read:
        xs: list[float] = []
        ys: list[float] = []
        if (idle := _window(stored.get("idle"))) is not None and idle.watts is not None:
            xs += [-idle.seconds, 0.0]
            ys += [idle.watts, idle.watts]
        t = 0.0
        for bench, r in stored["readings"].items():
            if (w := _window(r)) is None or w.watts is None:
                continue
            xs += [t, t + w.seconds]
            ys += [w.watts, w.watts]
            if len(read) == 1:
                ax.annotate(bench, (t + w.seconds / 2, w.watts), ha="center", va="bottom",
                            fontsize=8)
            t += w.seconds
        ax.plot(xs, ys, label=name if len(read) > 1 else None)
    if len(read) > 1:
        ax.legend(fontsize=8)
    return fig


def line(stored: dict[str, Any] | None) -> list[str]:
    """The run header's line: the domains and the run's joules (packages and DRAM), or why
    nothing is measured (never a zero for what was not read)."""
    if not stored:
        return []
    if not stored.get("measured"):
        return [f"Energy: not measured: {stored.get('why')}"]
    head = f"Energy ({stored.get('source')}: {', '.join(stored.get('domains') or [])})"
    idle = None if (kept := _window(stored.get("idle"))) is None else kept.watts
    at_rest = "" if idle is None else f"; {idle:.0f} W idle before the first benchmark"
    readings = stored.get("readings") or {}
    if not readings:
        return [f"{head}: read around each benchmark{at_rest}"]
    run = Window(sum(r.get("seconds", 0.0) for r in readings.values()),
                 {d: sum(r.get("joules", {}).get(d, 0.0) for r in readings.values())
                  for d in stored.get("domains") or []})
    watts = "" if run.watts is None else f", {run.watts:.0f} W on average"
    return [f"{head}: {run.whole_joules:.0f} J (packages and DRAM) over {run.seconds:.0f} s"
            f"{watts}{at_rest}"]


class Trail:
    """The meter marked at each poll of a program that runs a long while and reports a phase's
    length only when it ends (HPL's timed solve): the energy of the part of that phase the
    marks bracket, cut out afterwards."""

    def __init__(self, meter: Meter | None) -> None:
        self.meter = meter
        self.marks: list[Mark] = []

    def mark(self) -> float:
        """Mark the counters (where a meter reads any); the time of the mark, on the clock
        the marks keep (`time.perf_counter`)."""
        got = None if self.meter is None else self.meter.mark()
        if got is None:
            return time.perf_counter()
        self.marks.append(got)
        return got[0]

    def within(self, start: float, end: float) -> Window | None:
        """The energy from the first mark at or after `start` to the last at or before `end`
        (None: fewer than two marks between them)."""
        inside = [m for m in self.marks if start <= m[0] <= end]
        return _between(inside[0], inside[-1]) if len(inside) > 1 else None
