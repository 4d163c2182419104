"""The Wilson / domain-wall hopping term (native/src/dslash*.c) from Python: the lattice's
checkerboard geometry, fields in the kernel's layout, one application or timed samples on a
team, and a straightforward reference that every variant's result is checked against.

Conventions (Grid's): gamma matrices in the chiral basis below; the hopping term
    D psi(x) = sum_mu (1 - g_mu) U_mu(x) psi(x + mu) + (1 + g_mu) U_mu(x - mu)^+ psi(x - mu)
maps one parity of sites to the other; domain-wall fields have Ls slices that share the links.
Flops: Grid's Benchmark_ITT count, 1344 per site and slice (Benchmark_dwf counts 1320)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from hpcprobe import native
from hpcprobe.common import lazy
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.native import Team

if TYPE_CHECKING:
    import numpy as np
else:  # imported where first used, not at start-up
    np = lazy.module("numpy")

#: Nominal flops per site and slice of one application (Grid's Benchmark_ITT count).
FLOPS_PER_SITE = 1344
#: Most slices a domain-wall field may have (HPB_DSLASH_MAX_LS).
MAX_LS = 32

_I = 1j
#: Grid's chiral gamma matrices: x, y, z, t (as an array: `gamma()`, made on first use, as
#: NumPy is imported then).
_GAMMA = (
    [[0, 0, 0, _I], [0, 0, _I, 0], [0, -_I, 0, 0], [-_I, 0, 0, 0]],
    [[0, 0, 0, -1], [0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0]],
    [[0, 0, _I, 0], [0, 0, 0, -_I], [-_I, 0, 0, 0], [0, _I, 0, 0]],
    [[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]],
)


@cache
def gamma() -> np.ndarray:
    return np.array(_GAMMA, dtype=complex)

#: The array axis of each direction in a field shaped (t, z, y, x, ...).
AXIS = (3, 2, 1, 0)

_F32 = ctypes.POINTER(ctypes.c_float)


@cache
def _lib() -> ctypes.CDLL:
    return native.declare({
        "hpb_dslash_measure": (ctypes.c_int, [
            ctypes.c_void_p, ctypes.c_int, _F32, _F32, _F32, _F32,
            ctypes.POINTER(ctypes.c_int32), ctypes.c_uint64, ctypes.c_int, ctypes.c_int,
            ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)]),
        "hpb_dslash_place": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                            ctypes.c_uint64])})


def placed(team: Team, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array of per-site rows whose pages the team's threads touch first, each its share of
    the sites (the kernel's split): on a NUMA node each share lies near its thread. Fill it in
    place."""
    out = np.empty(shape, dtype=dtype)
    rc = _lib().hpb_dslash_place(team.handle, out.ctypes.data, shape[0], out.nbytes // shape[0])
    if rc != 0:
        raise MeasurementError(f"dslash: placing a field failed ({rc})")
    return out


@dataclass(frozen=True)
class Lattice:
    """A periodic 4-D lattice (x, y, z, t extents, each even) and its checkerboard: the sites of
    each parity in order of their full index, a site's index within its parity being its full
    index halved."""

    dims: tuple[int, int, int, int]

    def __post_init__(self) -> None:
        if any(d < 2 or d % 2 for d in self.dims):
            raise OptionError(f"<lattice> {'x'.join(map(str, self.dims))}: every extent must "
                              "be even and at least 2 (checkerboarding)")

    @property
    def volume(self) -> int:
        return int(np.prod(self.dims))

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """Array shape: (t, z, y, x)."""
        x, y, z, t = self.dims
        return t, z, y, x

    def parity_sites(self, parity: int) -> np.ndarray:
        """Full indices of the sites of one parity, in order."""
        t, z, y, x = np.indices(self.shape)
        return np.flatnonzero(((x + y + z + t) % 2).ravel() == parity)

    def neighbours(self, parity: int) -> np.ndarray:
        """[site][8] of the sites of `parity`: the other parity's index of x + mu (0..3) and of
        x - mu (4..7)."""
        idx = np.arange(self.volume).reshape(self.shape)
        sites = self.parity_sites(parity)
        out = np.empty((len(sites), 8), dtype=np.int32)
        for mu, ax in enumerate(AXIS):
            out[:, mu] = np.roll(idx, -1, axis=ax).ravel()[sites] // 2
            out[:, 4 + mu] = np.roll(idx, 1, axis=ax).ravel()[sites] // 2
        return out


def random_su3(n: int, rng: np.random.Generator) -> np.ndarray:
    """n random SU(3) matrices (QR of complex Gaussian matrices, determinant phase removed)."""
    z = rng.normal(size=(n, 3, 3)) + 1j * rng.normal(size=(n, 3, 3))
    q, r = np.linalg.qr(z)
    d = np.diagonal(r, axis1=1, axis2=2)
    q = q * (d / np.abs(d))[:, None, :]
    out: np.ndarray = q / np.linalg.det(q)[:, None, None] ** (1 / 3)
    return out


def random_gauge(lat: Lattice, rng: np.random.Generator) -> np.ndarray:
    """Links U[t, z, y, x, mu] in SU(3)."""
    return random_su3(lat.volume * 4, rng).reshape(*lat.shape, 4, 3, 3)


def random_fermion(lat: Lattice, ls: int, rng: np.random.Generator) -> np.ndarray:
    """psi[t, z, y, x, s, spin, colour], Gaussian."""
    shape = (*lat.shape, ls, 4, 3)
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def reference(u: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """The hopping term on every site, in double precision, written as its definition."""
    out = np.zeros_like(psi)
    one = np.eye(4)
    for mu, ax in enumerate(AXIS):
        fwd = np.einsum("...ab,...sib->...sia", u[..., mu, :, :], np.roll(psi, -1, axis=ax))
        back_u = np.roll(u[..., mu, :, :], 1, axis=ax)
        back = np.einsum("...ba,...sib->...sia", back_u.conj(), np.roll(psi, 1, axis=ax))
        out += np.einsum("ij,...sjc->...sic", one - gamma()[mu], fwd)
        out += np.einsum("ij,...sjc->...sic", one + gamma()[mu], back)
    return out


def gauge_layout(lat: Lattice, u: np.ndarray, parity: int) -> np.ndarray:
    """The links at one parity's sites as the kernel reads them: [site][mu][row][col][re, im]."""
    sites = lat.parity_sites(parity)
    links = u.reshape(lat.volume, 4, 3, 3)[sites]
    return np.ascontiguousarray(np.stack([links.real, links.imag], axis=-1), dtype=np.float32)


def fermion_layout(lat: Lattice, psi: np.ndarray, parity: int) -> np.ndarray:
    """One parity of a field as the kernel reads it: [site][spin][colour][re, im][s]."""
    ls = psi.shape[4]
    f = psi.reshape(lat.volume, ls, 4, 3)[lat.parity_sites(parity)]
    packed = np.stack([f.real, f.imag], axis=-1)  # site, s, spin, colour, ri
    return np.ascontiguousarray(packed.transpose(0, 2, 3, 4, 1), dtype=np.float32)


def from_layout(packed: np.ndarray) -> np.ndarray:
    """[site][spin][colour][re, im][s] back to complex [site][s][spin][colour]."""
    z = packed[..., 0, :] + 1j * packed[..., 1, :]  # site, spin, colour, s
    return z.transpose(0, 3, 1, 2)


@dataclass
class Operator:
    """The fields of one application in the kernel's layout: links at both parities, the input
    at the parity opposite to the output's, the neighbour table."""

    lat: Lattice
    ls: int
    parity: int  # of the output sites
    gauge_fwd: np.ndarray
    gauge_bwd: np.ndarray
    source: np.ndarray
    nb: np.ndarray
    out: np.ndarray

    @classmethod
    def of(cls, lat: Lattice, u: np.ndarray, psi: np.ndarray, parity: int) -> Operator:
        ls = psi.shape[4]
        if not 1 <= ls <= MAX_LS:
            raise OptionError(f"<ls> {ls}: give 1 (Wilson) to {MAX_LS}")
        source = fermion_layout(lat, psi, 1 - parity)
        return cls(lat, ls, parity, gauge_layout(lat, u, parity), gauge_layout(lat, u, 1 - parity),
                   source, lat.neighbours(parity), np.zeros_like(source))

    @property
    def sites(self) -> int:
        return self.lat.volume // 2

    def flops(self) -> float:
        """Nominal flops of one application (FLOPS_PER_SITE per output site and slice)."""
        return float(FLOPS_PER_SITE) * self.sites * self.ls

    def measure(self, team: Team, isa: str, calls: int, reps: int
                ) -> tuple[list[list[float]], list[list[bool]]]:
        """Seconds of `calls` applications per sample: [sample][thread], and migrations."""
        n = len(team.active)
        times = (ctypes.c_double * (n * reps))()
        moved = (ctypes.c_int * (n * reps))()
        rc = _lib().hpb_dslash_measure(
            team.handle, native.isa_id(isa), _f32(self.gauge_fwd), _f32(self.gauge_bwd),
            _f32(self.source), _f32(self.out),
            self.nb.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            self.sites, self.ls, calls, reps, times, moved)
        if rc != 0:
            raise MeasurementError(f"dslash ({isa}): the native kernel failed ({rc})")
        return ([list(times[k * n:(k + 1) * n]) for k in range(reps)],
                [[bool(m) for m in moved[k * n:(k + 1) * n]] for k in range(reps)])

    def result(self) -> np.ndarray:
        """The output of the last application, complex [site][s][spin][colour]."""
        return from_layout(self.out)


def apply(team: Team, isa: str, lat: Lattice, u: np.ndarray, psi: np.ndarray, parity: int
          ) -> np.ndarray:
    """One application of the native kernel: the output at the sites of `parity`."""
    op = Operator.of(lat, u, psi, parity)
    op.measure(team, isa, 1, 1)
    return op.result()


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want)) / max(float(np.linalg.norm(want)), 1e-300)


def _f32(a: np.ndarray) -> Any:
    return a.ctypes.data_as(_F32)
