"""HPL's report, as xhpl prints it and hpcc writes it into hpccoutf.txt: one result line per
(N, NB, grid) run and its residual check; xhpl built with HPL_PROGRESS_REPORT also prints the
share of columns done."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: "WR11C2R4   4000   192   1   2   0.48   8.834e+01" (T/V, N, NB, P, Q, Time, Gflops)
RESULT = re.compile(r"^(W[RC]\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.eE+-]+)\s+"
                    r"([0-9.eE+-]+)\s*$")
#: "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   0.0026458 ...... PASSED"
RESIDUAL = re.compile(r"^\|\|Ax-b\|\|.*=\s*([0-9.eE+-]+|nan|inf)\s*\.+\s*(PASSED|FAILED)",
                      re.IGNORECASE)
#: HPL_PROGRESS_REPORT: "Column=000001152 Fraction=0.020 Gflops=8.2e+01"
PROGRESS = re.compile(r"Column=\s*\d+\s+Fraction=\s*([0-9.]+)")
#: hpcc: which of its tests runs ("Begin of MPIRandomAccess section.")
SECTION = re.compile(r"^Begin of (\w+) section\.")


@dataclass(frozen=True)
class Result:
    """One HPL run as its report gives it."""

    variant: str
    n: int
    nb: int
    p: int
    q: int
    seconds: float
    gflops: float
    residual: float | None = None  # the scaled residual of the check
    passed: bool | None = None  # None: no check printed

    @property
    def valid(self) -> bool:
        return self.passed is True


def parse(text: str) -> list[Result]:
    """Every result of the report, each with the residual check printed after it."""
    out: list[Result] = []
    pending: Result | None = None
    for line in text.splitlines():
        line = line.strip()
        m = RESULT.match(line)
        if m:
            if pending is not None:
                out.append(pending)
            pending = Result(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                             int(m.group(5)), float(m.group(6)), float(m.group(7)))
            continue
        r = RESIDUAL.match(line)
        if r and pending is not None:
            try:
                value: float | None = float(r.group(1))
            except ValueError:
                value = None
            out.append(Result(**{**pending.__dict__, "residual": value,
                                 "passed": r.group(2).upper() == "PASSED"}))
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def printed(text: str) -> int:
    """How many result lines the report holds so far."""
    return sum(1 for line in text.splitlines() if RESULT.match(line.strip()))


def fraction(text: str) -> float | None:
    """The share of columns done of the latest progress line, if any."""
    found = PROGRESS.findall(text)
    return float(found[-1]) if found else None


def section(text: str) -> str | None:
    """The hpcc test running now (the last section begun)."""
    found = [m.group(1) for line in text.splitlines() if (m := SECTION.match(line.strip()))]
    return found[-1] if found else None
