"""The one module that loads the native core (ctypes) and wraps its C API in typed Python."""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

import hpcprobe
from hpcprobe.common.errors import NativeError, OptionError, UserError

API_VERSION = 5
STORES = ("regular", "nt")
_LIB_NAME = "libhpcprobe_native.so"

_c_double_p = ctypes.POINTER(ctypes.c_double)
_c_int_p = ctypes.POINTER(ctypes.c_int)


class _KernelShape(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("formula", ctypes.c_char_p), ("loads", ctypes.c_int),
                ("stores", ctypes.c_int), ("flops", ctypes.c_int)]


class _PeakShape(ctypes.Structure):
    _fields_ = [("fma_chains", ctypes.c_int), ("mul_chains", ctypes.c_int),
                ("add_chains", ctypes.c_int), ("lanes", ctypes.c_int)]


#: C function name -> (restype, argtypes)
Signatures = dict[str, tuple[Any, list[Any]]]


def _declare(lib: ctypes.CDLL) -> None:
    sig: Signatures = {
        "hpb_api_version": (ctypes.c_int, []),
        "hpb_build_info": (None, [ctypes.c_char_p, ctypes.c_size_t]),
        "hpb_source_id": (ctypes.c_char_p, []),
        "hpb_isa_supported": (ctypes.c_int, [ctypes.c_int]),
        "hpb_isa_name": (ctypes.c_char_p, [ctypes.c_int]),
        "hpb_kernel_name": (ctypes.c_char_p, [ctypes.c_int]),
        "hpb_kernel_shape_of": (ctypes.POINTER(_KernelShape), [ctypes.c_int]),
        "hpb_kernel_has_nt": (ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
        "hpb_kernel_apply": (
            ctypes.c_int,
            [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_void_p, ctypes.c_size_t, ctypes.c_double, _c_double_p],
        ),
        "hpb_team_create": (
            ctypes.c_int, [_c_int_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
        "hpb_team_destroy": (None, [ctypes.c_void_p]),
        "hpb_team_select": (ctypes.c_int, [ctypes.c_void_p, _c_int_p, ctypes.c_int]),
        "hpb_team_placement": (ctypes.c_int, [ctypes.c_void_p, _c_int_p, _c_int_p]),
        "hpb_stream_prepare": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
        "hpb_stream_begin": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]),
        "hpb_stream_measure": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
             ctypes.c_size_t, ctypes.c_int, _c_double_p, _c_int_p],
        ),
        "hpb_stream_check": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, _c_double_p]),
        "hpb_stream_scalar": (ctypes.c_double, []),
        "hpb_chase_order": (
            ctypes.c_int, [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64,
                           ctypes.POINTER(ctypes.c_size_t)]),
        "hpb_chase_prepare": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                           ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64]),
        "hpb_memory_node": (ctypes.c_int, [ctypes.c_void_p, _c_int_p]),
        "hpb_chase_measure": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, _c_double_p]),
        "hpb_loaded_latency": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_size_t, _c_double_p, _c_double_p,
                           ctypes.POINTER(ctypes.c_uint64)]),
        "hpb_clock_chain": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int,
                           _c_double_p, _c_int_p]),
        "hpb_peak_op_name": (ctypes.c_char_p, [ctypes.c_int]),
        "hpb_precision_name": (ctypes.c_char_p, [ctypes.c_int]),
        "hpb_peak_shape": (
            ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_PeakShape)]),
        "hpb_peak_max_iters": (ctypes.c_uint64, [ctypes.c_int]),
        "hpb_peak_run": (
            ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, _c_double_p,
                           _c_int_p]),
        "hpb_peak_measure": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                           ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, _c_double_p,
                           _c_int_p]),
        "hpb_c2c_measure": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, _c_double_p]),
        "hpb_stream_buffer": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_size_t)]),
        "hpb_chase_check": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, _c_int_p]),
        "hpb_chase_buffer": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_size_t)]),
    }
    declare(sig, lib)


def declare(sig: Signatures, handle: ctypes.CDLL | None = None) -> ctypes.CDLL:
    """Give C functions of the core their ctypes signature: name -> (restype, argtypes). A
    family with C code of its own declares its functions here from its package, so binding a new
    module edits no shared file."""
    handle = handle or lib()
    for name, (res, args) in sig.items():
        fn = getattr(handle, name)
        fn.restype = res
        fn.argtypes = args
    return handle


def lib_path() -> Path:
    """Where the native core is: beside this module, or beside the archive hpcprobe runs from
    (a shared library is not loaded from a zip); HPCPROBE_NATIVE_LIB overrides it (for C-side
    debugging)."""
    if given := os.environ.get("HPCPROBE_NATIVE_LIB"):
        return Path(given)
    zipped = hpcprobe.archive()
    return Path(zipped).with_name(_LIB_NAME) if zipped else Path(__file__).with_name(_LIB_NAME)


@cache
def lib() -> ctypes.CDLL:
    """The loaded native core."""
    path = lib_path()
    try:
        handle = ctypes.CDLL(str(path))
    except OSError as exc:
        raise NativeError(
            f"cannot load the native core {path}: {exc}; reinstall hpcprobe (make setup)") from exc
    _declare(handle)
    got = handle.hpb_api_version()
    if got != API_VERSION:
        raise NativeError(f"native core {path} has API version {got}, expected {API_VERSION}; "
                          "reinstall hpcprobe (make setup)")
    return handle


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = errno.errorcode.get(-rc, str(rc))
        raise NativeError(f"{what} failed: {name} ({os.strerror(-rc)})")


def build_info() -> str:
    """Compiler and flags the native core was built with."""
    buf = ctypes.create_string_buffer(512)
    lib().hpb_build_info(buf, len(buf))
    return buf.value.decode()


def source_id() -> str:
    """A digest of the measurement sources the core was built from (its C files, the MPI and
    GPU programs shipped with it, the build file): runs that differ in it were measured with
    code built from other sources."""
    raw: bytes = lib().hpb_source_id()
    return raw.decode()


def version_line() -> str:
    """`hpcprobe --version`: the release, and the digest of the kernels it was built from (two
    installs of one release can measure with other kernels)."""
    from hpcprobe import __version__

    return f"hpcprobe {__version__} (kernels {source_id()})"


def _names(fn: Callable[[int], bytes | None]) -> list[str]:
    """Names of a C table by index, until the function returns NULL."""
    out: list[str] = []
    while (name := fn(len(out))) is not None:
        out.append(name.decode())
    return out


@cache
def isa_names() -> list[str]:
    """ISA variants in the C table's order, worst to best (their index is the C ISA id)."""
    return _names(lib().hpb_isa_name)


def isa_id(name: str) -> int:
    return isa_names().index(name)


def supported_isas() -> list[str]:
    """ISA variants compiled in and supported by this CPU, worst to best."""
    return [n for i, n in enumerate(isa_names()) if lib().hpb_isa_supported(i)]


def best_isa() -> str:
    return supported_isas()[-1]


@cache
def kernel_names() -> list[str]:
    """Kernel names in the C table's order (their index is the C kernel id)."""
    return _names(lib().hpb_kernel_name)


@cache
def kernel_shapes() -> list[tuple[str, str, int, int, int]]:
    """(name, formula, loads, stores, flops per element) of each streaming kernel, from the
    core's table, in its order."""
    out = []
    for i in range(len(kernel_names())):
        s = lib().hpb_kernel_shape_of(i).contents
        out.append((s.name.decode(), s.formula.decode(), s.loads, s.stores, s.flops))
    return out


@cache
def peak_op_names() -> list[str]:
    """Peak kernel names in the C table's order (their index is the C op id)."""
    return _names(lib().hpb_peak_op_name)


@cache
def precision_names() -> list[str]:
    """Precisions in the C table's order: dp, sp."""
    return _names(lib().hpb_precision_name)


@dataclass(frozen=True)
class PeakShape:
    """What one iteration of a peak kernel does: chains of each kind, vector lanes."""

    fma_chains: int
    mul_chains: int
    add_chains: int
    lanes: int


def peak_shape(isa: str, precision: str, op: str) -> PeakShape | None:
    """The shape of a peak kernel as built, None when this build has no such kernel."""
    out = _PeakShape()
    rc = lib().hpb_peak_shape(isa_id(isa), precision_names().index(precision),
                              peak_op_names().index(op), ctypes.byref(out))
    if rc == -errno.ENOTSUP:
        return None
    _check(rc, f"reading the shape of peak kernel {op} ({isa}, {precision})")
    return PeakShape(out.fma_chains, out.mul_chains, out.add_chains, out.lanes)


def peak_max_iters(precision: str) -> int:
    """Most iterations of one peak-kernel call (the chains count in floating point)."""
    return int(lib().hpb_peak_max_iters(precision_names().index(precision)))


def peak_run(isa: str, precision: str, op: str, iters: int) -> tuple[list[float], bool]:
    """One call of a peak kernel in this thread: every lane of every chain, and whether each
    holds its analytic value."""
    out = (ctypes.c_double * 512)()
    valid = ctypes.c_int(0)
    _check(lib().hpb_peak_run(isa_id(isa), precision_names().index(precision),
                              peak_op_names().index(op), iters, out, ctypes.byref(valid)),
           f"peak kernel {op} ({isa}, {precision})")
    shape = peak_shape(isa, precision, op)
    assert shape is not None
    n = (shape.fma_chains + shape.mul_chains + shape.add_chains) * shape.lanes
    return list(out[:n]), bool(valid.value)


def kernel_has_nt(kernel_id: int, isa: str) -> bool:
    return bool(lib().hpb_kernel_has_nt(kernel_id, isa_id(isa)))


def stream_scalar() -> float:
    return float(lib().hpb_stream_scalar())


#: The orders of a pointer-chase ring, in hpb.h's numbering: "ring" keeps a line's 128-byte
#: buddy half a ring away (hpcprobe's), "random" is the field's plain random order in each group
CHASE_ORDERS = ("ring", "random")


def chase_order(lines: int, group_lines: int, seed: int, order: str = "ring") -> list[int]:
    """The order in which a pointer-chase ring visits its lines (see hpb_chase_order)."""
    out = (ctypes.c_size_t * lines)()
    _check(lib().hpb_chase_order(lines, group_lines, CHASE_ORDERS.index(order), seed, out),
           "building a chase order")
    return list(out)


def memory_node(addr: int) -> int:
    """The NUMA node holding the touched page at `addr`."""
    node = ctypes.c_int(-1)
    _check(lib().hpb_memory_node(addr, ctypes.byref(node)), "reading a page's NUMA node")
    return node.value


def kernel_apply(kernel_id: int, isa: str, stores: str, dst: int | None, x: int | None,
                 y: int | None, n: int, s: float) -> float:
    """Run one kernel once on caller-owned, 64-byte aligned arrays given by address."""
    out = ctypes.c_double(0.0)
    rc = lib().hpb_kernel_apply(kernel_id, isa_id(isa), STORES.index(stores), dst, x, y, n, s,
                                ctypes.byref(out))
    _check(rc, f"kernel {kernel_id} ({isa}, {stores} stores)")
    return out.value


def _by_sample(flat: ctypes.Array[Any], n: int, reps: int,
               cast: Callable[[Any], Any] = float) -> list[list[Any]]:
    """A C array of reps x n per-thread values as [sample][thread]."""
    return [[cast(v) for v in flat[r * n:(r + 1) * n]] for r in range(reps)]


class BindingUnavailable(NativeError):
    """mbind is not allowed or not there (a seccomp filter, an old kernel)."""


def _refuse_missing_node(rc: int, node: int | None) -> None:
    if node is None:
        return
    if rc == -errno.EINVAL:
        raise UserError(f"NUMA node {node}: cannot bind memory to it (no such node, or no "
                        "memory there); see `hpcprobe topology`")
    if rc in (-errno.EPERM, -errno.ENOSYS):
        raise BindingUnavailable(f"binding memory to NUMA node {node} is not permitted here "
                                 f"({errno.errorcode[-rc]})")


@dataclass(frozen=True)
class Binding:
    """Where each thread of a team really ran: its CPU and the size of its affinity mask."""

    cpus: tuple[int, ...]
    mask_counts: tuple[int, ...]


class Team:
    """A persistent team of threads, thread i pinned to cpus[i]; use as a context manager.

    Jobs run on the selected threads (all at first); `select` picks a subset by CPU, so one team
    serves every thread count of a benchmark and each thread keeps its first-touched memory."""

    def __init__(self, cpus: Sequence[int]) -> None:
        self.cpus = tuple(cpus)
        self.active = self.cpus
        arr = (ctypes.c_int * len(self.cpus))(*self.cpus)
        handle = ctypes.c_void_p()
        rc = lib().hpb_team_create(arr, len(self.cpus), ctypes.byref(handle))
        if rc == -errno.EINVAL:
            raise UserError(f"cannot pin threads to CPUs {list(self.cpus)}: a CPU is offline or "
                            "outside this process's allowed cpuset; see `hpcprobe topology`")
        _check(rc, "creating the thread team")
        self._h: ctypes.c_void_p | None = handle
        self.prepared_elems = 0

    def __enter__(self) -> Team:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._h is not None:
            lib().hpb_team_destroy(self._h)
            self._h = None

    @property
    def handle(self) -> ctypes.c_void_p:
        if self._h is None:
            raise NativeError("thread team already closed")
        return self._h

    @property
    def size(self) -> int:
        """Threads taking part in jobs now."""
        return len(self.active)

    def select(self, cpus: Sequence[int]) -> None:
        """Make the threads pinned to `cpus` (in that order) the ones that run jobs."""
        try:
            idx = [self.cpus.index(c) for c in cpus]
        except ValueError:
            raise NativeError(f"CPUs {list(cpus)} are not all in the team {list(self.cpus)}") \
                from None
        arr = (ctypes.c_int * len(idx))(*idx)
        _check(lib().hpb_team_select(self.handle, arr, len(idx)), "selecting threads")
        self.active = tuple(cpus)

    def binding(self) -> Binding:
        """Where the selected threads run, in selection order."""
        n = len(self.cpus)
        cpu = (ctypes.c_int * n)()
        cnt = (ctypes.c_int * n)()
        _check(lib().hpb_team_placement(self.handle, cpu, cnt), "reading the placement back")
        pos = [self.cpus.index(c) for c in self.active]
        return Binding(tuple(cpu[i] for i in pos), tuple(cnt[i] for i in pos))

    def stream_prepare(self, elems_per_thread: int, huge_pages: bool = False,
                       node: int | None = None) -> None:
        """Reserve each selected thread's buffer; `node` binds it to a NUMA node (mbind)."""
        rc = lib().hpb_stream_prepare(self.handle, elems_per_thread, int(huge_pages),
                                      -1 if node is None else node)
        _refuse_missing_node(rc, node)
        if rc == -errno.ENOMEM:
            raise OptionError(f"cannot allocate {3 * 8 * elems_per_thread * self.size} bytes of "
                              "stream arrays; use a smaller <size>")
        _check(rc, "allocating the stream arrays")
        self.prepared_elems = elems_per_thread

    def stream_begin(self, kernel_id: int, elems: int) -> None:
        """Make the kernel's arrays hold the initial pattern (first touch by their threads)."""
        _check(lib().hpb_stream_begin(self.handle, kernel_id, elems), "initialising the arrays")

    def stream_measure(self, kernel_id: int, isa: str, stores: str, elems: int, inner: int,
                       reps: int) -> tuple[list[list[float]], int]:
        """Timed samples: [sample][thread] seconds, and the number of migrated thread-samples."""
        n = self.size
        times = (ctypes.c_double * (n * reps))()
        migrations = ctypes.c_int(0)
        rc = lib().hpb_stream_measure(self.handle, kernel_id, isa_id(isa), STORES.index(stores),
                                      elems, inner, reps, times, ctypes.byref(migrations))
        _check(rc, f"measuring kernel {kernel_id} ({isa}, {stores} stores)")
        return _by_sample(times, n, reps), migrations.value

    def chase_prepare(self, size_bytes: int, stride: int, group_bytes: int, huge_pages: bool,
                      seed: int, node: int | None = None, order: str = "ring") -> None:
        """Build each selected thread's ring (in one of CHASE_ORDERS); `node` binds its memory
        to a NUMA node (mbind), None leaves it to first touch."""
        rc = lib().hpb_chase_prepare(self.handle, size_bytes, stride, group_bytes,
                                     int(huge_pages), -1 if node is None else node,
                                     CHASE_ORDERS.index(order), seed)
        _refuse_missing_node(rc, node)
        if rc == -errno.ENOMEM:
            raise OptionError(f"cannot allocate a {size_bytes} B pointer-chase ring per thread; "
                              "use a smaller <size>")
        _check(rc, "building the pointer-chase ring")

    def chase_measure(self, loads: int, reps: int) -> list[list[float]]:
        """Timed samples of `loads` dependent loads: [sample][thread] seconds."""
        n = self.size
        times = (ctypes.c_double * (n * reps))()
        _check(lib().hpb_chase_measure(self.handle, loads, reps, times), "chasing pointers")
        return _by_sample(times, n, reps)

    def chase_check(self, max_steps: int) -> bool:
        """Whether every selected thread's ring is a single cycle of its own lines."""
        ok = ctypes.c_int(0)
        _check(lib().hpb_chase_check(self.handle, max_steps, ctypes.byref(ok)), "checking rings")
        return bool(ok.value)

    def loaded_latency(self, loads: int, kernel_id: int, isa: str,
                       elems: int) -> tuple[float, list[tuple[float, int]]]:
        """The first selected thread chases `loads` loads while the others stream `kernel_id`
        over `elems` elements: (chase seconds, [(seconds, passes)] of each other thread)."""
        n = self.size
        chase = ctypes.c_double(0.0)
        secs = (ctypes.c_double * n)()
        passes = (ctypes.c_uint64 * n)()
        _check(lib().hpb_loaded_latency(self.handle, loads, kernel_id, isa_id(isa), elems,
                                        ctypes.byref(chase), secs, passes), "loaded latency")
        return chase.value, [(secs[k], passes[k]) for k in range(1, n)]

    def clock_chain(self, load: str, iters: int,
                    reps: int) -> tuple[list[list[float]], list[list[bool]]]:
        """Seconds of iters x 64 dependent adds with `load` (an ISA name) in flight:
        [sample][thread] times (-1 marks a wrong result) and whether the thread migrated."""
        n = self.size
        times = (ctypes.c_double * (n * reps))()
        migrated = (ctypes.c_int * (n * reps))()
        _check(lib().hpb_clock_chain(self.handle, isa_id(load), iters, reps, times, migrated),
               f"timing an add chain ({load} load)")
        return _by_sample(times, n, reps), _by_sample(migrated, n, reps, bool)

    def peak_measure(self, isa: str, precision: str, op: str, iters: int, calls: int,
                     reps: int) -> tuple[list[list[float]], list[list[bool]]]:
        """Seconds of `calls` x `iters` iterations of a peak kernel: [sample][thread] times
        (-1 where the chains did not end at their analytic values) and migration flags."""
        n = self.size
        times = (ctypes.c_double * (n * reps))()
        migrated = (ctypes.c_int * (n * reps))()
        _check(lib().hpb_peak_measure(self.handle, isa_id(isa), precision_names().index(precision),
                                      peak_op_names().index(op), iters, calls, reps, times,
                                      migrated), f"peak kernel {op} ({isa}, {precision})")
        return _by_sample(times, n, reps), _by_sample(migrated, n, reps, bool)

    def c2c_measure(self, rounds: int, reps: int) -> list[float]:
        """Round-trip seconds of `rounds` cache-line handoffs between the two selected threads."""
        times = (ctypes.c_double * reps)()
        _check(lib().hpb_c2c_measure(self.handle, rounds, reps, times), "bouncing a cache line")
        return list(times)

    def chase_mapping(self, cpu: int) -> tuple[int, int]:
        """(address, length) of the ring of the thread on `cpu`."""
        return self._region(lib().hpb_chase_buffer, cpu, "locating the chase ring")

    def stream_buffer(self, cpu: int) -> tuple[int, int]:
        """(address, touched length) of the stream buffer of the thread on `cpu`."""
        return self._region(lib().hpb_stream_buffer, cpu, "locating the stream buffer")

    def _region(self, fn: Callable[..., int], cpu: int, what: str) -> tuple[int, int]:
        addr, length = ctypes.c_size_t(), ctypes.c_size_t()
        _check(fn(self.handle, self.cpus.index(cpu), ctypes.byref(addr), ctypes.byref(length)),
               what)
        return addr.value, length.value

    def stream_check(self, kernel_id: int, elems: int) -> float:
        """Largest relative error of the arrays after the kernel, against closed-form values."""
        err = ctypes.c_double(0.0)
        _check(lib().hpb_stream_check(self.handle, kernel_id, elems, ctypes.byref(err)),
               "validating the stream arrays")
        return err.value
