"""Applications hpcprobe knows by their output, so that `hpcprobe app NAME -- CMD` needs no
--fom for them: their figures of merit, what they say about how they ran (processes and
threads), and the checks that make a repetition count. One entry a program in KNOWN.

LAMMPS (https://docs.lammps.org/Run_output.html) ends each `run` with

    Loop time of 0.316 on 2 procs for 100 steps with 8000 atoms
    Performance: 136668.851 tau/day, 316.363 timesteps/s[, 2.531 Matom-step/s]
    90.2% CPU use with 2 MPI tasks x 1 OpenMP threads

(`ns/day, hours/ns` in physical units; the atom-step rate only in releases later than
Debian 12's, 29 Sep 2021). The last run of the input counts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpcprobe.common.errors import MeasurementError


@dataclass(frozen=True)
class Figure:
    name: str  # "timesteps/s": the metric's `figure` param and, mostly, its unit
    value: float
    unit: str
    better: str = "higher"


@dataclass(frozen=True)
class Report:
    """One repetition as the application reported it: its figures (the first is its figure
    of merit), and the processes and threads it says it ran on."""

    figures: list[Figure]
    procs: int | None
    threads: int | None


@dataclass(frozen=True)
class Known:
    name: str
    what: str  # for the plan: what its figure of merit is
    programs: re.Pattern[str]  # its executables' names
    read: Callable[[str], Report]
    #: the figure that grows with the work done (what `hpcprobe scale` takes as the rate)
    rate: str

    def runs(self, argv: Sequence[str]) -> bool:
        return bool(argv) and bool(self.programs.fullmatch(os.path.basename(argv[0])))


_NUMBER = r"([-+0-9.eE]+)"
_LOOP = re.compile(rf"^Loop time of {_NUMBER} on (\d+) procs for (\d+) steps with (\d+) atoms",
                   re.M)
_PERFORMANCE = re.compile(r"^Performance: (.*)$", re.M)
_LAYOUT = re.compile(r"(\d+) MPI tasks x (\d+) OpenMP threads")
#: LAMMPS's performance units hpcprobe keeps (hours/ns is ns/day upside down)
_RATES = ("tau/day", "ns/day", "timesteps/s")
_ATOM_STEPS = {"atom-step/s": 1.0, "katom-step/s": 1e3, "Matom-step/s": 1e6,
               "Gatom-step/s": 1e9}


def _lammps(output: str) -> Report:
    loops, perf = _LOOP.findall(output), _PERFORMANCE.findall(output)
    if not loops or not perf:
        raise MeasurementError("LAMMPS printed no `Loop time` and `Performance` lines (did "
                               "the input `run` any steps?)")
    seconds, procs, steps, atoms = loops[-1]
    figures: dict[str, Figure] = {}
    for part in perf[-1].split(","):
        value, _, unit = part.strip().partition(" ")
        try:
            number = float(value)
        except ValueError:
            continue
        if unit in _RATES:
            figures[unit] = Figure(unit, number, unit)
        elif unit in _ATOM_STEPS:
            figures["atom-step/s"] = Figure("atom-step/s", number * _ATOM_STEPS[unit],
                                            "atom-step/s")
    loop = float(seconds)
    if not loop > 0 or "timesteps/s" not in figures:
        raise MeasurementError(f"LAMMPS's last run took {seconds} s for {steps} steps: no rate")
    # the work rate scaling needs, where this release does not print it: from the same line
    figures.setdefault("atom-step/s", Figure("atom-step/s", int(atoms) * int(steps) / loop,
                                             "atom-step/s"))
    figures["loop_time"] = Figure("loop_time", loop, "s", "lower")
    layout = _LAYOUT.findall(output)
    first = "tau/day" if "tau/day" in figures else "ns/day" if "ns/day" in figures else \
        "timesteps/s"
    order = [first, *(k for k in figures if k != first)]
    return Report([figures[k] for k in order], int(procs),
                  int(layout[-1][1]) if layout else None)


KNOWN = (Known("lammps", "LAMMPS's Performance line (tau/day or ns/day, timesteps/s, "
               "atom-step/s) and loop time", re.compile(r"lmp(_[A-Za-z0-9]+)?|lammps"),
               _lammps, "atom-step/s"),)


def of(name: str | None, argv: Sequence[str]) -> Known | None:
    """The known application run by `argv` (or named `name`), if any."""
    return next((k for k in KNOWN if k.runs(argv) or k.name == name), None)
