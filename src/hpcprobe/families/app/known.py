"""Applications hpcprobe knows by their output, so that `hpcprobe app NAME -- CMD` needs no
--fom for them: their figures of merit, what they say about how they ran (processes and
threads), the checks that make a repetition count, and the input some need written for the
node. One entry a program in KNOWN.

LAMMPS (https://docs.lammps.org/Run_output.html) ends each `run` with

    Loop time of 0.316 on 2 procs for 100 steps with 8000 atoms
    Performance: 136668.851 tau/day, 316.363 timesteps/s[, 2.531 Matom-step/s]
    90.2% CPU use with 2 MPI tasks x 1 OpenMP threads

(`ns/day, hours/ns` in physical units; the atom-step rate only in releases later than
Debian 12's, 29 Sep 2021). The last run of the input counts.

HPCG (the reference `xhpcg` 3.1 or a vendor's build of it) reads `hpcg.dat` in its working
directory (the local grid a rank, the run time) and writes `HPCG-Benchmark_3.1_<date>.txt`
there, one `Section::Key=value` a line (src/OutputFile.cpp): the final rating and whether the
run is VALID, each kernel's GFLOP/s (DDOT, WAXPBY, SpMV, MG), the memory bandwidth its model
gives, the optimisation phase's time, and the V&V tests' results."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    notes: list[str] = field(default_factory=list)  # said as warnings: the figures count


@dataclass(frozen=True)
class Setup:
    """What an application's input is sized from: the ranks on a node, the memory this
    process may use on the node, the run time, and a local grid asked for (None: derived)."""

    ranks_per_node: int
    memory_bytes: int | None
    seconds: float
    grid: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Known:
    name: str
    what: str  # for the plan: what its figure of merit is
    programs: re.Pattern[str]  # its executables' names
    #: (its output, its working directory, when the repetition started) -> its report
    read: Callable[[str, Path | None, float], Report]
    #: the figure that grows with the work done (what `hpcprobe scale` takes as the rate)
    rate: str
    #: the input file it reads in its working directory, and how hpcprobe writes it for the
    #: node (where the user's working directory has none): (directory, setup) -> what it says
    input: str | None = None
    prepare: Callable[[Path, Setup], dict[str, object]] | None = None

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


def _lammps(output: str, workdir: Path | None = None, since: float = 0.0) -> Report:
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
    # `on P procs` counts the OpenMP threads too (tasks x threads); the MPI tasks are these
    tasks = int(layout[-1][0]) if layout else int(procs)
    return Report([figures[k] for k in order], tasks, int(layout[-1][1]) if layout else None)


#: HPCG's rules: an official rating runs at least this long
HPCG_OFFICIAL_S = 1800.0
#: The bytes an equation of the reference HPCG takes (its "Bytes per equation", 715 on a 16^3
#: grid: the matrix, vectors and the coarse grids), rounded up: the grid's size from memory
HPCG_BYTES_PER_EQUATION = 720
_HPCG_KERNELS = ("DDOT", "WAXPBY", "SpMV", "MG")


def hpcg_grid(setup: Setup) -> tuple[int, int, int]:
    """The local grid a rank: asked for, or a cube, a multiple of 8 (its three coarse levels)
    and at least 16, whose ranks on the node take a quarter of its memory (HPCG's rule: at
    least a quarter of the main memory)."""
    if setup.grid is not None:
        return setup.grid
    if not setup.memory_bytes:
        return (16, 16, 16)
    per_rank = setup.memory_bytes / 4 / max(1, setup.ranks_per_node)
    side = int(math.floor((per_rank / HPCG_BYTES_PER_EQUATION) ** (1 / 3) / 8)) * 8
    return max(16, side), max(16, side), max(16, side)


def _hpcg_prepare(workdir: Path, setup: Setup) -> dict[str, object]:
    nx, ny, nz = hpcg_grid(setup)
    (workdir / "hpcg.dat").write_text(
        "HPCG benchmark input file\nwritten by hpcprobe for this node\n"
        f"{nx} {ny} {nz}\n{setup.seconds:g}\n")
    return {"grid": f"{nx}x{ny}x{nz}", "seconds": setup.seconds,
            "memory_a_rank_bytes": nx * ny * nz * HPCG_BYTES_PER_EQUATION}


def _hpcg_file(workdir: Path | None, since: float) -> dict[str, str]:
    """The newest results file xhpcg wrote in its working directory during the repetition,
    as its keys and values."""
    if workdir is None:
        raise MeasurementError("HPCG's results file is written in its working directory, which "
                               "hpcprobe did not choose (the app's working directory option)")
    files = sorted((p for p in workdir.glob("HPCG-Benchmark*.txt")
                    if p.stat().st_mtime >= since - 1), key=lambda p: p.stat().st_mtime)
    if not files:
        raise MeasurementError(f"xhpcg wrote no HPCG-Benchmark*.txt in {workdir}: it stopped "
                               "before its report")
    out: dict[str, str] = {}
    for line in files[-1].read_text(errors="replace").splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out.setdefault(key.strip(), value.strip())
    return out


def _hpcg(output: str, workdir: Path | None = None, since: float = 0.0) -> Report:
    got = _hpcg_file(workdir, since)
    final = "Final Summary::HPCG result is VALID with a GFLOP/s rating of"
    if final not in got:
        failed = [k.split("::")[0] for k, v in got.items() if k.endswith("::Result")
                  and v != "PASSED"]
        raise MeasurementError("HPCG says its result is INVALID"
                               + (f" ({', '.join(failed)} failed)" if failed else "")
                               + ": no rating counts")

    def number(key: str) -> float | None:
        try:
            return float(got[key])
        except (KeyError, ValueError):
            return None

    figures = [Figure("rating", float(got[final]), "GFLOP/s")]
    for kernel in _HPCG_KERNELS:
        if (x := number(f"GFLOP/s Summary::Raw {kernel}")) is not None:
            figures.append(Figure(kernel, x, "GFLOP/s"))
    if (x := number("GB/s Summary::Raw Total B/W")) is not None:
        figures.append(Figure("bandwidth", x, "GB/s"))
    if (x := number("User Optimization Overheads::Optimization phase time (sec)")) is not None:
        figures.append(Figure("optimization_time", x, "s", "lower"))
    notes = []
    ran = number("Final Summary::Results are valid but execution time (sec) is")
    if ran is not None and ran < HPCG_OFFICIAL_S:
        notes.append(f"HPCG ran its CG sets for {ran:g} s, under the {HPCG_OFFICIAL_S:g} s its "
                     "rules ask of an official rating: a quick look")
    if any(k.startswith("Final Summary::Reference version of") for k in got):
        notes.append("HPCG ran the reference kernels (no vendor optimisation): its rating is "
                     "the reference code's")
    procs = number("Machine Summary::Distributed Processes")
    threads = number("Machine Summary::Threads per processes")
    return Report(figures, None if procs is None else int(procs),
                  None if threads is None else int(threads), notes)


KNOWN = (Known("lammps", "LAMMPS's Performance line (tau/day or ns/day, timesteps/s, "
               "atom-step/s) and loop time", re.compile(r"lmp(_[A-Za-z0-9]+)?|lammps"),
               _lammps, "atom-step/s"),
         Known("hpcg", "HPCG's results file (the rating if VALID, DDOT, WAXPBY, SpMV and MG "
               "GFLOP/s, bandwidth, optimisation time)", re.compile(r"xhpcg.*"), _hpcg,
               "rating", "hpcg.dat", _hpcg_prepare))


def of(name: str | None, argv: Sequence[str]) -> Known | None:
    """The known application run by `argv` (or named `name`), if any."""
    return next((k for k in KNOWN if k.runs(argv) or k.name == name), None)
