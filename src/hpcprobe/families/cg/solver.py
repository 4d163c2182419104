"""The HPCG-shaped CG of the native core (native/src/cg.c) from Python, with the counts its
figures use and a reference CG written as the algorithm (numpy) that the native one is checked
against.

The problem: the 27-point stencil of an nx x ny x nz grid, 26 on the diagonal and -1 to each
neighbour inside the grid (HPCG's matrix), b = A 1 (so the solution is the vector of ones),
unpreconditioned CG from x = 0. This is HPCG's problem shape and its CG, without its multigrid
preconditioner and without a halo exchange between ranks (one rank)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from hpcprobe import native
from hpcprobe.common import lazy
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.native import Team

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

#: Bytes a row moves per iteration in the traffic model: the ELL row (27 x (8 B value + 4 B
#: column)), x read once and y written (8 + 8) in the SpMV; two dot products (3 vectors read);
#: x += a p and r -= a Ap (4 read, 2 written); p = r + b p (2 read, 1 written).
BYTES_PER_ROW = 27 * 12 + 16 + 3 * 8 + 6 * 8 + 3 * 8
#: Flops a row costs per iteration besides the SpMV's 2 per non-zero: two dot products (2 each)
#: and three vector updates (2 each).
VECTOR_FLOPS_PER_ROW = 2 * 2 + 3 * 2

#: Bytes a row of a rank's box holds: its ELL row (27 x (8 B value + 4 B column)) and its entry
#: of five vectors (x, b, r, p, Ap).
MEMORY_PER_ROW = 27 * 12 + 5 * 8

_D = ctypes.POINTER(ctypes.c_double)


def memory_bytes(dims: tuple[int, int, int]) -> int:
    """What a solve on a box allocates: its rows, and p's ghost entries (at most the layer of
    sites around the box)."""
    nx, ny, nz = dims
    n = nx * ny * nz
    return n * MEMORY_PER_ROW + ((nx + 2) * (ny + 2) * (nz + 2) - n) * 8


@cache
def _lib() -> ctypes.CDLL:
    return native.declare({
        "hpb_cg_create": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                                            ctypes.c_void_p]),
        "hpb_cg_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                      ctypes.c_double, _D, _D, _D]),
        "hpb_cg_free": (None, [ctypes.c_void_p])})


def nonzeros(dims: tuple[int, int, int]) -> int:
    """Non-zeros of the matrix: per dimension 3d - 2 pairs within one of each other."""
    out = 1
    for d in dims:
        out *= 3 * d - 2
    return out


@dataclass(frozen=True)
class Solve:
    """One native solve: its solution, residual norms, iterations and phase times (s)."""

    dims: tuple[int, int, int]
    x: np.ndarray
    history: np.ndarray  # ||r_k||, k = 0 .. iterations
    iterations: int
    spmv_s: float
    dot_s: float
    update_s: float
    total_s: float

    @property
    def rows(self) -> int:
        return int(np.prod(self.dims))

    def flops(self) -> float:
        """Of the iterations done: 2 per non-zero in the SpMV, the vector operations' counts."""
        return float(self.iterations) * (2 * nonzeros(self.dims) +
                                          VECTOR_FLOPS_PER_ROW * self.rows)

    def bytes(self) -> float:
        return float(self.iterations) * BYTES_PER_ROW * self.rows


class Problem:
    """One grid's matrix and b = A 1, built once on a team's threads (each first touching the
    rows it owns), solved from x = 0 as often as wanted on the same team: a sample's time is
    its iterations', and the build (page faults of a matrix of 27 entries a row) is paid
    once."""

    def __init__(self, team: Team, dims: tuple[int, int, int]) -> None:
        nx, ny, nz = dims
        if min(dims) < 2:
            raise OptionError(f"<grid> {nx}x{ny}x{nz}: every extent must be at least 2")
        self.team, self.dims = team, dims
        self.handle = _lib().hpb_cg_create(team.handle, (ctypes.c_int * 3)(*dims), None)
        if not self.handle:
            raise MeasurementError(f"cg: the native solver cannot build the {nx}x{ny}x{nz} "
                                   "matrix (out of memory?)")

    def solve(self, max_iters: int, tol: float) -> Solve:
        """CG from x = 0 until ||r|| <= tol ||b|| or max_iters."""
        x = np.empty(int(np.prod(self.dims)))
        history = np.zeros(max_iters + 1)
        out = np.zeros(6)
        rc = _lib().hpb_cg_run(self.team.handle, self.handle, max_iters, tol,
                               x.ctypes.data_as(_D), history.ctypes.data_as(_D),
                               out.ctypes.data_as(_D))
        if rc != 0:
            raise MeasurementError(f"cg: the native solver failed ({rc})")
        k = int(out[0])
        return Solve(self.dims, x, history[:k + 1], k, *map(float, out[1:5]))

    def close(self) -> None:
        if self.handle:
            _lib().hpb_cg_free(self.handle)
            self.handle = None

    def __enter__(self) -> Problem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def solve(team: Team, dims: tuple[int, int, int], max_iters: int, tol: float) -> Solve:
    """CG from x = 0 until ||r|| <= tol ||b|| or max_iters, on the team's threads, on a matrix
    built for this one solve."""
    with Problem(team, dims) as p:
        return p.solve(max_iters, tol)


def apply(x: np.ndarray) -> np.ndarray:
    """A x on a grid shaped (nz, ny, nx): 27 x minus the sum over the 3x3x3 box (zero
    outside)."""
    p = np.pad(x, 1)
    nz, ny, nx = x.shape
    box = sum(p[dz:dz + nz, dy:dy + ny, dx:dx + nx]
              for dz in range(3) for dy in range(3) for dx in range(3))
    out: np.ndarray = 27 * x - box
    return out


def reference(dims: tuple[int, int, int], max_iters: int, tol: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """The same CG in double precision, written as the algorithm: solution, residual norms."""
    nx, ny, nz = dims
    b = apply(np.ones((nz, ny, nx)))
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = float(np.vdot(r, r))
    stop = tol * tol * rr
    hist = [np.sqrt(rr)]
    while len(hist) <= max_iters and rr > stop:
        ap = apply(p)
        alpha = rr / float(np.vdot(p, ap))
        x += alpha * p
        r -= alpha * ap
        rr_new = float(np.vdot(r, r))
        p = r + rr_new / rr * p
        rr = rr_new
        hist.append(np.sqrt(rr))
    return x.ravel(), np.array(hist)
