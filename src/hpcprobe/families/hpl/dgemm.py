"""DGEMM through one BLAS library, in a process of its own (`python -m
hpcprobe.families.hpl.dgemm LIB N REPS CPUS [gated]`; N 0 sizes the product for about 0.2 s a
call): the library reads its environment (OPENBLAS_CORETYPE, thread counts) when it loads, so
each library and core type gets a fresh process. It says which library and kernel set it
loaded, times C = A B (n x n, beta 0), checks sampled entries of C against sums taken here, and
prints one JSON line. Gated, it prints READY after the warm-up call and waits for a line on its
input before the timed calls, and prints DONE after them: the parent reads the node's energy
counters around the timed calls alone (not the start-up, the fill or the check)."""

from __future__ import annotations

import ctypes
import json
import math
import os
import random
import sys
import time
from array import array
from typing import Any

#: Entries of C checked against a sum taken here (each n products).
CHECKED = 16
#: A fill pattern of this (prime) length: no short period along rows or columns.
PATTERN = 1009
#: N 0: a call lasts about this long (N a multiple of 64 within the bounds below).
CALL_S = 0.2
SMALLEST, LARGEST = 256, 4096


def _text(lib: ctypes.CDLL, name: str) -> str | None:
    fn = getattr(lib, name, None)
    if fn is None:
        return None
    fn.restype = ctypes.c_char_p
    out = fn()
    return out.decode(errors="replace") if out else None


def identify(path: str, lib: ctypes.CDLL) -> dict[str, Any]:
    """The library's own words on what it is and which kernels it chose."""
    if hasattr(lib, "openblas_get_corename"):
        return {"library": "openblas", "config": _text(lib, "openblas_get_config"),
                "kernel": _text(lib, "openblas_get_corename")}
    if "blis" in path:  # Debian's libblas.so.3 of BLIS hides bli_*: ask its libblis
        try:
            blis = ctypes.CDLL(os.path.join(os.path.dirname(os.path.dirname(path)),
                                            "libblis.so.4"))
        except OSError:
            return {"library": "blis", "config": None, "kernel": None}
        blis.bli_arch_string.restype = ctypes.c_char_p
        arch = blis.bli_arch_string(blis.bli_arch_query_id())
        return {"library": "blis", "config": "BLIS " + (_text(blis, "bli_info_get_version_str")
                                                        or "?"),
                "kernel": arch.decode() if arch else None}
    if hasattr(lib, "MKL_Get_Version_String"):
        buf = ctypes.create_string_buffer(256)
        lib.MKL_Get_Version_String(buf, 256)
        return {"library": "mkl", "config": buf.value.decode(errors="replace"), "kernel": None}
    return {"library": "reference", "config": "reference BLAS (netlib Fortran)",
            "kernel": "generic"}


def matrix(n: int, seed: int) -> array[float]:
    rng = random.Random(seed)
    pattern = array("d", (rng.uniform(-0.5, 0.5) for _ in range(PATTERN)))
    out = pattern * (n * n // PATTERN + 1)
    del out[n * n:]
    return out


def check(n: int, a: array[float], b: array[float], c: array[float]) -> str | None:
    """None when sampled entries of C (column-major) match sums taken here within the bound
    of rounding in n products; else what differs."""
    rng = random.Random(7)
    eps = sys.float_info.epsilon
    for _ in range(CHECKED):
        i, j = rng.randrange(n), rng.randrange(n)
        terms = [a[i + k * n] * b[k + j * n] for k in range(n)]
        want = math.fsum(terms)
        bound = 2 * n * eps * math.fsum(abs(t) for t in terms) + 1e-300
        if not abs(c[i + j * n] - want) <= bound:
            return f"C[{i},{j}] = {c[i + j * n]!r}, expected {want!r}"
    return None


#: What a gated worker prints before and after its timed calls
READY, DONE = "ready", "done"


def _gate(word: str) -> None:
    print(word, flush=True)
    if word == READY:
        sys.stdin.readline()


def product(lib: ctypes.CDLL, n: int, reps: int, gated: bool = False
            ) -> tuple[list[float], str | None]:
    """GFLOP/s of reps timed calls (after one that warms up) and the check of the result;
    `gated`: the timed calls between READY (and the parent's answer) and DONE."""
    a, b, c = matrix(n, 1), matrix(n, 2), array("d", bytes(8 * n * n))
    pa, pb, pc = (ctypes.cast((ctypes.c_double * (n * n)).from_buffer(x),
                              ctypes.POINTER(ctypes.c_double)) for x in (a, b, c))
    no = ctypes.c_char(b"N")
    dim = ctypes.c_int(n)
    one, zero = ctypes.c_double(1.0), ctypes.c_double(0.0)
    ref = ctypes.byref
    gflops = []
    for i in range(reps + 1):  # the first call warms up (thread pool, pages)
        if gated and i == 1:
            _gate(READY)
        t0 = time.perf_counter()
        lib.dgemm_(ref(no), ref(no), ref(dim), ref(dim), ref(dim), ref(one), pa, ref(dim), pb,
                   ref(dim), ref(zero), pc, ref(dim))
        gflops.append(2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9)
    if gated:
        _gate(DONE)
    return gflops[1:], check(n, a, b, c)


def run(path: str, n: int, reps: int, cpus: list[int], gated: bool = False) -> dict[str, Any]:
    os.sched_setaffinity(0, cpus)
    lib = ctypes.CDLL(path)
    out = identify(path, lib)
    lib.dgemm_.restype = None
    if n <= 0:  # size it from a small product's rate
        rate = max(product(lib, SMALLEST, 1)[0])
        n = int((CALL_S * rate * 1e9 / 2) ** (1 / 3)) // 64 * 64
        n = min(LARGEST, max(SMALLEST, n))
    samples, error = product(lib, n, reps, gated)
    out.update(n=n, samples=samples, error=error)
    return out


def main(argv: list[str]) -> int:
    path, n, reps, cpus = argv[0], int(argv[1]), int(argv[2]), argv[3]
    try:
        got = run(path, n, reps, [int(x) for x in cpus.split(",")], argv[4:] == ["gated"])
    except (OSError, AttributeError) as exc:
        got = {"error": f"{path}: {exc}"}
    print(json.dumps(got), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
