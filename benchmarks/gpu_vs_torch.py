#!/usr/bin/env python3
"""hpcprobe's GPU figures beside PyTorch's on the same GPU, in rounds that alternate the order:
the device-to-device copy (BabelStream's copy kernel against `tensor.copy_`, both counting the
bytes read and written) and the BF16 and FP16 GEMM (cuBLAS through hpcprobe's program against
`torch.matmul`, 2 N^3 FLOPs) and, on GPUs of sm_89 and later, the FP8 GEMM (cuBLASLt against
`torch._scaled_mm`, E4M3 in, BF16 out, scales 1, no fast accumulation on either side), with
the same operands (uniform in [-1, 1)), cuBLAS (PyTorch's) and timing (a warm-up of 1 s or
more, then 10 batches spanning 2 s) on both sides; each round's ratio hpcprobe / PyTorch and
their median. PyTorch is the reference the field reaches for first; it is not a dependency of
hpcprobe: run this with a Python that has both (PYTHONPATH), on a node with a GPU.

Usage: benchmarks/gpu_vs_torch.py [--rounds 3] [--n 8192] [--bytes 1GiB] [--device 0]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys

from sidebyside import hpcprobe_json, in_turn, round_ratios

from hpcprobe.measure import options

REPS = 10  # timed repetitions on both sides (hpcprobe's --gpu-reps)


def torch_copy_gbs(torch, device: int, nbytes: int, reps: int = 20) -> float:
    """Median GB/s of copy_ between two device tensors (bytes read + written)."""
    n = nbytes // 8
    a = torch.full((n,), 0.1, dtype=torch.float64, device=f"cuda:{device}")
    c = torch.empty_like(a)
    times = []
    for _ in range(reps + 1):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        c.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    if not torch.equal(a, c):
        raise SystemExit("torch copy_ check failed")
    return 2 * n * 8 / statistics.median(times[1:]) / 1e9


def torch_gemm_tflops(torch, device: int, n: int, dtype, reps: int = REPS, warm_s: float = 1.0,
                      timed_s: float = 2.0) -> float:
    """Median TFLOP/s of batches of back-to-back products, as hpcprobe times them: operands
    uniform in [-1, 1) (the bits a power-capped GPU's multipliers toggle set its rate), a
    warm-up of back-to-back products for `warm_s` or more, then `reps` batches lasting
    `timed_s` together (a power-capped GPU's clock swings; both sides' batches span the same
    swings)."""
    dev = f"cuda:{device}"
    a = torch.rand(n, n, device=dev, dtype=torch.float64) * 2 - 1
    b = torch.rand(n, n, device=dev, dtype=torch.float64) * 2 - 1
    if dtype is torch.float8_e4m3fn:  # B column-major, as _scaled_mm takes it
        unit = torch.ones((), device=dev)
        a8, b8 = a.to(dtype), b.to(dtype).t()

        def op() -> object:
            return torch._scaled_mm(a8, b8, scale_a=unit, scale_b=unit, out_dtype=torch.bfloat16)
    else:
        a, b = a.to(dtype), b.to(dtype)

        def op() -> object:
            return torch.matmul(a, b)

    def timed(count: int) -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(count):
            op()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e-3

    spent, count, per = 0.0, 1, 0.0
    while spent < warm_s:  # batches doubling until warm_s has passed; the last sizes the rest
        t = timed(count)
        spent, per, count = spent + t, t / count, min(2 * count, 1 << 20)
    batch = max(1, math.ceil(max(0.1, timed_s / reps) / per))
    return 2 * n**3 * batch / statistics.median(timed(batch) for _ in range(reps)) / 1e12


def torch_cublas(torch, device: int) -> str | None:
    """The cuBLAS library PyTorch loaded (its own wheel's, often not the toolkit's): hpcprobe
    is run on the same one, so that the ratio compares the measurements, not two builds."""
    x = torch.ones(2, 2, device=f"cuda:{device}")
    (x @ x).sum().item()
    with open("/proc/self/maps") as maps:
        return next((f.split()[-1] for f in maps if "/libcublas.so" in f), None)


def ours(doc: dict, name: str, **match: object) -> float:
    got = [m for m in doc["metrics"] if m["benchmark"] == "gpu" and m["name"] == name
           and all(m["params"].get(k) == v for k, v in match.items())]
    if not got:
        raise SystemExit(f"hpcprobe measured no gpu {name} {match}: {doc.get('errors')}")
    return float(got[0]["summary"]["median"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--bytes", type=options.size, default=1 << 30)
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch is not importable from this Python: nothing to compare with")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch: nothing to measure")
        return 0
    precisions = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if torch.cuda.get_device_capability(a.device) >= (8, 9) and hasattr(torch, "_scaled_mm"):
        precisions["fp8"] = torch.float8_e4m3fn
    lib = torch_cublas(torch, a.device)
    print(f"cuBLAS on both sides: {lib or 'not found in PyTorch; hpcprobe picks its own'}")
    rows: dict[str, tuple[list[float], list[float]]] = {}
    for k in range(a.rounds):
        for who in in_turn("hpcprobe", "torch", k):
            if who == "hpcprobe":
                doc = hpcprobe_json(["gpu", "--gpu-devices", str(a.device), "--gpu-tests",
                                     "stream,gemm", "--gpu-precisions", ",".join(precisions),
                                     "--gpu-gemm-n", str(a.n), "--gpu-stream-size",
                                     str(a.bytes), "--profile", "quick", "--gpu-reps", str(REPS),
                                     *(["--gpu-cublas", lib] if lib else [])])
                rows.setdefault("d2d copy GB/s", ([], []))[0].append(
                    ours(doc, "bandwidth", kernel="copy", array_bytes=a.bytes))
                for p in precisions:
                    rows.setdefault(f"{p} GEMM N={a.n} TFLOP/s", ([], []))[0].append(
                        ours(doc, "gemm", precision=p, n=a.n))
            else:
                rows.setdefault("d2d copy GB/s", ([], []))[1].append(
                    torch_copy_gbs(torch, a.device, a.bytes))
                for p, dt in precisions.items():
                    rows.setdefault(f"{p} GEMM N={a.n} TFLOP/s", ([], []))[1].append(
                        torch_gemm_tflops(torch, a.device, a.n, dt))
    print(f"{'figure':28s} {'hpcprobe':>10s} {'torch':>10s}  ratio (median, range over "
          f"{a.rounds} rounds)")
    for what, (mine, theirs) in rows.items():
        med, lo, hi = round_ratios(mine, theirs)
        print(f"{what:28s} {statistics.median(mine):10.1f} {statistics.median(theirs):10.1f}  "
              f"{med:.3f} [{lo:.3f}, {hi:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
