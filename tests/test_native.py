"""The native core: every kernel of every supported ISA validated at small sizes, the team."""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest

from conftest import two_cpus
from hpcprobe import native
from hpcprobe.common.errors import NativeError, UserError
from hpcprobe.native.kernels import KERNELS

ISAS = native.supported_isas()
S = native.stream_scalar()


def aligned(n: int, fill: np.ndarray | float) -> np.ndarray:
    """A 64-byte aligned float64 array of n elements (one spare element, so even n = 0 has an
    aligned address)."""
    raw = np.empty(n + 9, dtype=np.float64)
    off = (-raw.ctypes.data % 64) // 8
    arr = raw[off:off + n + 1][:n] if n else raw[off:off + 1][:0]
    arr[:] = fill
    return arr


def addr(arr: np.ndarray) -> int:
    a = arr.base.ctypes.data + (arr.__array_interface__["data"][0] - arr.base.ctypes.data)
    return a if arr.size else arr.base.ctypes.data + (-arr.base.ctypes.data % 64)


def reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
    return {"copy": lambda: x, "scale": lambda: S * x, "add": lambda: x + y,
            "triad": lambda: x + S * y, "store": lambda: np.full_like(x, S),
            "load": lambda: 0.0, "sum": lambda: float(np.sum(x))}[name]()


def test_c_table_matches_registry():
    assert native.kernel_names() == list(KERNELS)


def test_scalar_always_supported_and_best_is_last():
    assert ISAS[0] == "scalar"
    assert native.best_isa() == ISAS[-1]


# On x86 every kernel that stores has a non-temporal variant; read-only ones only "regular".
X86 = platform.machine() in ("x86_64", "AMD64")
VARIANTS = [(isa, name, st) for isa in ISAS for name, k in KERNELS.items()
            for st in (("regular", "nt") if k.stores and X86 else ("regular",))]


def test_nt_variants_exist_exactly_for_storing_kernels():
    for isa in ISAS:
        for name, k in KERNELS.items():
            assert native.kernel_has_nt(k.kernel_id, isa) == (bool(k.stores) and X86), (isa, name)


@pytest.mark.parametrize("isa,name,stores", VARIANTS)
@pytest.mark.parametrize("n", [0, 1, 7, 64, 1000, 4099])
def test_kernel_against_numpy(isa, name, stores, n):
    kid = KERNELS[name].kernel_id
    rng = np.random.default_rng(n)
    x = aligned(n, rng.standard_normal(n))
    y = aligned(n, rng.standard_normal(n))
    dst = aligned(n, np.nan)
    got = native.kernel_apply(kid, isa, stores, addr(dst), addr(x), addr(y), n, S)
    want = reference(name, x, y)
    if name in ("load", "sum"):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
        assert np.isnan(dst).all()  # read-only: nothing written
    else:
        # fused multiply-add rounds once, numpy twice: allow a few ulps of the operands
        tol = 4 * np.finfo(np.float64).eps * (np.abs(x) + S * np.abs(y) + S)
        assert np.all(np.abs(dst - want) <= tol)


def test_kernel_apply_rejects_misaligned():
    x = aligned(65, 1.0)
    with pytest.raises(NativeError, match="EINVAL"):
        native.kernel_apply(0, "scalar", "regular", x.ctypes.data + 8, x.ctypes.data,
                             x.ctypes.data, 8, S)


def test_read_only_kernels_have_no_nt_variant():
    for name in ("load", "sum"):
        assert not any(native.kernel_has_nt(KERNELS[name].kernel_id, isa) for isa in ISAS)


def test_team_pins_and_reads_back():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    with native.Team(cpus) as team:
        b = team.binding()
        assert b.cpus == tuple(cpus)
        assert b.mask_counts == (1,) * len(cpus)


def test_team_rejects_cpu_outside_cpuset():
    bad = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(UserError, match="cannot pin"):
        native.Team([bad])


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_stream_measure_validates(isa, name):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    kid = KERNELS[name].kernel_id
    stores = ["regular"] + (["nt"] if native.kernel_has_nt(kid, isa) else [])
    with native.Team(cpus) as team:
        team.stream_prepare(4096)
        for st in stores:
            for n in (64, 4096, 1024):
                team.stream_begin(kid, n)
                times, migrated = team.stream_measure(kid, isa, st, n, 3, 2)
                assert len(times) == 2 and all(len(t) == len(cpus) for t in times)
                assert all(t > 0 for row in times for t in row)
                assert migrated == 0
                assert team.stream_check(kid, n) == 0.0


def test_stream_check_catches_a_missing_store():
    """Validation must fail when the kernel did not run after the arrays were reset."""
    kid = KERNELS["copy"].kernel_id
    with native.Team([sorted(os.sched_getaffinity(0))[0]]) as team:
        team.stream_prepare(1024)
        team.stream_begin(kid, 1024)
        assert team.stream_check(kid, 1024) > 0.1
        team.stream_measure(kid, "scalar", "regular", 1024, 1, 1)
        assert team.stream_check(kid, 1024) == 0.0


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_select_subsets_keep_buffers_and_order():
    a, b = sorted(os.sched_getaffinity(0))[:2]
    kid = KERNELS["triad"].kernel_id
    with native.Team([a, b]) as team:
        team.stream_prepare(2048)
        for sel in ([b], [a, b], [b, a], [a]):
            team.select(sel)
            assert team.binding().cpus == tuple(sel)
            team.stream_begin(kid, 2048)
            times, _ = team.stream_measure(kid, "scalar", "regular", 2048, 1, 3)
            assert all(len(t) == len(sel) for t in times)
            assert team.stream_check(kid, 2048) == 0.0


@pytest.mark.skipif(not two_cpus(), reason="needs two CPUs")
def test_threads_buffers_start_at_different_cache_sets():
    """Hyperthreads sharing a cache must not find their arrays at the same set indices: each
    thread's buffer starts at its own line within a 4 KiB page, still 64-byte aligned."""
    a, b = sorted(os.sched_getaffinity(0))[:2]
    kid = KERNELS["triad"].kernel_id
    with native.Team([a, b]) as team:
        team.stream_prepare(1024)
        team.stream_begin(kid, 1024)
        starts = [team.stream_buffer(c)[0] for c in (a, b)]
        team.stream_measure(kid, "scalar", "regular", 1024, 1, 1)
        assert team.stream_check(kid, 1024) == 0.0
    assert all(s % 64 == 0 for s in starts)
    assert starts[0] % 4096 != starts[1] % 4096


def test_stream_rejects_bad_sizes():
    with native.Team([sorted(os.sched_getaffinity(0))[0]]) as team:
        with pytest.raises(NativeError):
            team.stream_prepare(100)  # not a multiple of 64
        team.stream_prepare(128)
        with pytest.raises(NativeError):
            team.stream_begin(0, 256)  # larger than prepared
