"""HPL's input, derived from the machine: the rank layout, the process grid, the block size and
the problem size; and the input files (HPL.dat for xhpl, hpccinf.txt for hpcc). Pure: no
measurement, no I/O but the file writers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hpcprobe.common.errors import OptionError, UserError

#: Block size per kernel ISA of the BLAS (the widest its DGEMM kernels use): the sizes HPL
#: users start from on these kernels (multiples of the micro-kernel's tile; larger tiles on
#: wider vectors), which `--tune` refines. Reference BLAS and unknown kernels: 64.
NB_TABLE = {"avx512": 384, "avx2": 192, "avx": 128, "sse": 64, "scalar": 64}
#: `--tune` tries these block sizes (and the table's), each on one short HPL problem.
NB_CANDIDATES = (128, 192, 256, 384)
#: N at least this many blocks per process column: smaller problems measure start-up.
MIN_BLOCKS = 4
#: HPL's own limit on the entries of each parameter line (HPL_MAX_PARAM).
MAX_PARAM = 20


def flops(n: int) -> float:
    """HPL's operation count for order n: 2/3 n^3 + 3/2 n^2 (its Gflops column divides this by
    the wall time)."""
    return 2.0 / 3.0 * n ** 3 + 1.5 * n ** 2


def grid(n_ranks: int) -> tuple[int, int]:
    """P x Q = n_ranks, as square as it divides, P <= Q (HPL's advice: flat grids for
    Ethernet-class networks, near square otherwise)."""
    p = max(d for d in range(1, math.isqrt(n_ranks) + 1) if n_ranks % d == 0)
    return p, n_ranks // p


def parse_grid(text: str, n_ranks: int) -> tuple[int, int]:
    """"PxQ" from the command line, checked against the ranks."""
    try:
        p, q = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise OptionError(f"<pq> {text!r}: give the process grid as PxQ, e.g. 2x4") from None
    if p < 1 or q < 1:
        raise OptionError(f"<pq> {text}: P and Q are at least 1")
    if p * q != n_ranks:
        raise OptionError(f"<pq> {text}: {p}x{q} = {p * q} processes, but the layout has "
                          f"{n_ranks} rank(s); give P x Q = {n_ranks} (e.g. "
                          f"{'x'.join(map(str, grid(n_ranks)))})")
    return p, q


def round_n(n: float, nb: int, q: int) -> int:
    """N rounded down to a multiple of NB, at least MIN_BLOCKS blocks per process column."""
    return max(MIN_BLOCKS * nb * q, int(n) // nb * nb)


def n_for_memory(mem_bytes: float, share: float, nb: int, q: int) -> int:
    """The order whose matrix (8-byte entries) fills `share` of the memory."""
    return round_n(math.sqrt(share * mem_bytes / 8), nb, q)


def n_for_time(seconds: float, gflops: float, nb: int, q: int) -> int:
    """The order that takes about `seconds` at `gflops`."""
    return round_n((1.5 * seconds * gflops * 1e9) ** (1 / 3), nb, q)


def check_blocks(n: int, nb: int | None) -> None:
    """N below one block (of NB, or of the table's smallest) times start-up, and below a few
    entries hpcc crashes or hangs: the user's to fix, before anything runs."""
    least = nb or min(NB_TABLE.values())
    if n < least:
        raise OptionError(f"<n> {n}: the problem must hold at least one block (NB {least}); "
                          f"give N >= {least}")


def check_memory(n: int, mem_bytes: float, nodes: int, usable: float) -> None:
    """A matrix that cannot fit is the user's to fix, before anything runs."""
    need = 8.0 * n * n
    if need > usable * mem_bytes:
        most = int(math.sqrt(usable * mem_bytes / 8))
        raise OptionError(f"<n> {n}: the matrix needs {need / 2 ** 30:.1f} GiB, more than "
                          f"{usable:.0%} of the {mem_bytes / 2 ** 30:.1f} GiB of the {nodes} "
                          f"node(s); give N <= {most}")


@dataclass(frozen=True)
class Problem:
    """One HPL launch's parameters."""

    ns: tuple[int, ...]  # problem sizes, in order (the same N repeated for repetitions)
    nbs: tuple[int, ...]
    p: int
    q: int


def hpl_dat(pr: Problem, out_file: str = "HPL.out", device: int = 6) -> str:
    """HPL.dat: every (N, NB) pair on one P x Q grid, with the settings HPL's own tuning notes
    start from (right-looking panel factorisation, Crout recursion, increasing-ring-modified
    broadcast, look-ahead 1, mixed swapping)."""
    if len(pr.ns) > MAX_PARAM or len(pr.nbs) > MAX_PARAM:
        raise UserError(f"HPL takes at most {MAX_PARAM} problem sizes and block sizes per run")
    rows = [
        ("HPLinpack benchmark input file", None),
        ("written by hpcprobe", None),
        (out_file, "output file name (if any)"),
        (str(device), "device out (6=stdout,7=stderr,file)"),
        (str(len(pr.ns)), "# of problems sizes (N)"),
        (" ".join(map(str, pr.ns)), "Ns"),
        (str(len(pr.nbs)), "# of NBs"),
        (" ".join(map(str, pr.nbs)), "NBs"),
        ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
        ("1", "# of process grids (P x Q)"),
        (str(pr.p), "Ps"),
        (str(pr.q), "Qs"),
        ("16.0", "threshold"),
        ("1", "# of panel fact"),
        ("2", "PFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of recursive stopping criterium"),
        ("4", "NBMINs (>= 1)"),
        ("1", "# of panels in recursion"),
        ("2", "NDIVs"),
        ("1", "# of recursive panel fact."),
        ("1", "RFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of broadcast"),
        ("1", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        ("1", "# of lookahead depth"),
        ("1", "DEPTHs (>=0)"),
        ("2", "SWAP (0=bin-exch,1=long,2=mix)"),
        ("64", "swapping threshold"),
        ("0", "L1 in (0=transposed,1=no-transposed) form"),
        ("0", "U  in (0=transposed,1=no-transposed) form"),
        ("1", "Equilibration (0=no,1=yes)"),
        ("8", "memory alignment in double (> 0)"),
    ]
    return "".join(f"{v:<14s}{c}\n" if c else f"{v}\n" for v, c in rows)


def hpccinf(pr: Problem) -> str:
    """hpccinf.txt: HPL.dat (hpcc writes HPL's report into hpccoutf.txt) and hpcc's PTRANS
    lines (no sizes beyond HPL's)."""
    return (hpl_dat(pr, "HPL.out", 8)
            + "##### This line (no. 32) is ignored (it serves as a separator). ######\n"
              "0             Number of additional problem sizes for PTRANS\n"
              "1200          values of N\n"
              "0             number of additional blocking sizes for PTRANS\n"
              "40            values of NB\n")


def write(workdir: Path, program: str, pr: Problem) -> Path:
    """The input file the program reads, in its working directory."""
    path = workdir / ("hpccinf.txt" if program == "hpcc" else "HPL.dat")
    path.write_text(hpccinf(pr) if program == "hpcc" else hpl_dat(pr))
    return path
