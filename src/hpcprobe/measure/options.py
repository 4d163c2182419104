"""Option values as the command line (and later sweep files) give them: parsers that turn text
into a value or one clear reason, and the flags that several families share (one
command-line option serves all of them)."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from hpcprobe.common.units import parse_size
from hpcprobe.machine.placement import PLACEMENT_HELP
from hpcprobe.measure.family import Flag
from hpcprobe.mpi import find, launchers

T = TypeVar("T")


def size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def once(text: str, vals: tuple[T, ...]) -> tuple[T, ...]:
    """The values of a list option, refused where one is given twice (a count run twice, a
    host taken for two nodes)."""
    twice = [v for v, n in Counter(vals).items() if n > 1]
    if twice:
        raise argparse.ArgumentTypeError(f"{text}: {', '.join(map(str, twice))} given twice; "
                                         "give each once")
    return vals


def counts(what: str, example: str) -> Callable[[str], tuple[int, ...]]:
    """One whole number or a comma-separated list of them, each at least 1 and given once."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            vals = tuple(int(v) for v in text.split(","))
        except ValueError:
            vals = ()
        if not vals or min(vals) < 1:
            raise argparse.ArgumentTypeError(f"{text}: give {what} of at least 1 or a "
                                             f"comma-separated list, e.g. {example}")
        return once(text, vals)

    return parse


def at_least(least: int, what: str) -> Callable[[str], int]:
    """A whole number >= least."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{text}: give {what} (a whole number >= {least})")
        return value

    parse.__name__ = f"at_least_{least}"
    return parse


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: give a positive number of seconds")
    return value


def cpu_pair(text: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give two CPUs, e.g. 0,1") from None
    return a, b


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names; none at all is a mistake (`--hosts $UNSET` must not
    become a one-node run), and so is an empty one between commas (`triad,`)."""
    out = tuple(v.strip() for v in text.split(","))
    if not any(out):
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more names, comma-separated")
    if not all(out):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty name between commas; give names "
                                         "such as a,b")
    return once(text, out)


def nonempty(what: str) -> Callable[[str], str]:
    """A text option that must say something (`--placement ''` from an unset variable is a
    mistake, not the default)."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r}: give {what}")
        return text
    return parse


def host_port(text: str) -> str:
    """HOST or HOST:PORT, the port from 1 to 65535."""
    host, colon, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host.strip() or (colon and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise argparse.ArgumentTypeError(f"{text!r}: give HOST or HOST:PORT, the port from 1 "
                                         "to 65535")
    return text


def launcher(text: str) -> str:
    """An MPI launcher's name."""
    if (why := launchers.unknown(text)) is not None:
        raise argparse.ArgumentTypeError(why)
    return text


def mpi_prefix(text: str) -> str:
    """An MPI installation's prefix (checked here: a wrong one is said before any measurement,
    not when the MPI benchmark's turn comes)."""
    try:
        find.prefix_mpicc(text, text)
    except find.MpiNotFound as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def all_or_one(value: str | None) -> tuple[str, ...] | None:
    """"both" (or nothing) -> None (every one); a single choice -> a tuple of it."""
    return None if value in (None, "both") else (value,)


def both_is_none(value: str | None) -> str | None:
    return None if value == "both" else value


#: Flags shared by the families that run a team of threads on chosen cores.
THREADS = Flag("--threads", "thread count(s), e.g. 2 or 1,2,4",
               parse=counts("a thread count", "1,2,4"))
PLACEMENT = Flag("--placement", PLACEMENT_HELP, parse=nonempty("a placement, e.g. compact"))
SIZE = Flag("--size", "a size in bytes, e.g. 2GiB", parse=size)
#: Flags shared by the families that launch MPI ranks.
LAUNCHER = Flag("--launcher", "mpirun (Open MPI), mpiexec (MPICH, Intel MPI), srun (default: the "
                "one that goes with the MPI; srun inside a Slurm allocation)", parse=launcher)
HOSTS = Flag("--hosts", "hosts for multi-node runs, e.g. n1,n2", parse=names)
MPI_PREFIX = Flag("--mpi", "the MPI installation to use (its prefix; default: $HPCPROBE_MPI, "
                  "then PATH)", parse=mpi_prefix, metavar="PREFIX")
TIMEOUT = Flag("--timeout", "give up after S seconds", parse=seconds, metavar="S")
#: What --timeout means for a family that repeats a program
ONE_REPETITION = "on one repetition (default 3600)"
#: Flags shared by the families that repeat a program (user applications, external tools).
REPEAT = Flag("--repeat", "repetitions of the program, each one sample (default: the profile's "
              "fewest samples: quick 3, default 5, thorough 10)",
              parse=at_least(1, "a repetition count"), metavar="N")
LAYOUT = Flag("--layout", "MPI ranks: one per core (single-threaded), or one per NUMA domain or "
              "socket with a thread per core inside it, each rank bound to its CPUs",
              choices=("core", "numa", "socket"))
RANKS = Flag("--ranks", "MPI ranks: the first N of the layout's (default: all of them; on "
             "several hosts, N split evenly over them)", parse=at_least(1, "a rank count"),
             metavar="N")
