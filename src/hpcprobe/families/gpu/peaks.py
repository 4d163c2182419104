"""The GPU peak models: dense GEMM FLOPs per SM per clock by architecture and precision (a
documented table), times the SMs and the SM clock NVML read during the run; device memory
bandwidth from the memory clock and bus width the CUDA runtime reports (double data rate);
host<->device bandwidth from the PCIe link's generation and width NVML read during the copy."""

from __future__ import annotations

#: Dense GEMM FLOP per SM per clock (an FMA is 2), for the precisions cuBLAS runs: FP64 (tensor
#: cores from sm_80), FP32 (CUDA cores: cuBLAS's SGEMM), TF32, BF16 and FP16 with FP32
#: accumulation (tensor cores). Derived from NVIDIA's data-sheet peaks divided by SMs x boost
#: clock, which land on these powers of two: V100 (80 SMs) 7.8/15.7/125 TFLOP/s; A100 (108 SMs,
#: 1410 MHz) 19.5/19.5/156/312/312; A40 (84 SMs, 1740 MHz) and L40S (142 SMs, 2520 MHz) FP32
#: 37.4 and 91.6, their FP64 1/64 of FP32, TF32/FP16 at 1/2 and 1/4 of the tensor rates of
#: sm_80's per-SM; H100/H200 (132 SMs) 67/67 and 495/989/989 dense. FP8 (E4M3 in, FP32
#: accumulation; cuBLASLt): L40S 733 and H100/H200 1979 TFLOP/s dense, twice FP16's per-SM rate.
#: B200 and GB200 (sm_100, 148 SMs): FP64 37 and FP32 75 TFLOP/s at about 1.95 GHz; TF32, BF16,
#: FP16 and FP8 dense 1.1, 2.25, 2.25 and 4.5 PFLOP/s (the HGX B200 sheet gives them with
#: sparsity, twice these) at 1.86 GHz, as H100's tensor rates are at 1.83 GHz.
#: Architectures absent here get no model: their rates are shown without a percentage.
GEMM_FLOPS_PER_SM_CLOCK: dict[str, dict[str, int]] = {
    "7.0": {"fp64": 64, "fp32": 128, "fp16": 1024},
    "8.0": {"fp64": 128, "fp32": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048},
    "8.6": {"fp64": 4, "fp32": 256, "tf32": 512, "bf16": 1024, "fp16": 1024},
    "8.9": {"fp64": 4, "fp32": 256, "tf32": 512, "bf16": 1024, "fp16": 1024, "fp8": 2048},
    "9.0": {"fp64": 256, "fp32": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192},
    "10.0": {"fp64": 128, "fp32": 256, "tf32": 4096, "bf16": 8192, "fp16": 8192, "fp8": 16384},
}
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
#: GeForce parts of sm_86 and sm_89 run the tensor precisions (TF32, and BF16, FP16 and FP8 with
#: FP32 accumulation) at half the rate of their architecture's professional and data-centre
#: parts, whose figures the table holds: RTX 3090 (82 SMs, 1695 MHz) TF32 35.6 and FP16 71
#: TFLOP/s dense, RTX 4090 (128 SMs, 2520 MHz) TF32 82.6, BF16 and FP16 165.2, FP8 330.3.
GEFORCE_HALF_RATE = frozenset({"8.6", "8.9"})
TENSOR_PRECISIONS = frozenset({"tf32", "bf16", "fp16", "fp8"})
#: Where the table comes from, stored with each model.
SOURCE = "hpcprobe table (data-sheet peaks / SMs / boost clock)"
MEMORY_SOURCE = "CUDA runtime: 2 x memory clock x bus width"


def gemm_per_sm_clock(cc: str, precision: str, name: str = "") -> int | None:
    """FLOP per SM per clock of a dense GEMM on the GPU of this product `name`, or None where
    the table has no figure."""
    per = GEMM_FLOPS_PER_SM_CLOCK.get(cc, {}).get(precision)
    if per is not None and "GeForce" in name and cc in GEFORCE_HALF_RATE \
            and precision in TENSOR_PRECISIONS:
        return per // 2
    return per


def gemm_peak_tflops(cc: str, precision: str, sms: int, sm_mhz: float, name: str = ""
                     ) -> float | None:
    """The GEMM peak in TFLOP/s at this SM clock, or None without a table entry."""
    per = gemm_per_sm_clock(cc, precision, name)
    return None if per is None else per * sms * sm_mhz * 1e6 / 1e12


def memory_peak_gbs(mem_khz: int, bus_width_bits: int) -> float | None:
    """Device memory's peak in GB/s: two transfers per memory clock over the bus (the
    runtime's memory clock is the base of its double data rate, HBM and GDDR alike)."""
    if mem_khz <= 0 or bus_width_bits <= 0:
        return None
    return 2 * mem_khz * 1e3 * bus_width_bits / 8 / 1e9


#: PCIe transfer rate per lane (GT/s) and line-code efficiency by generation: 8b/10b up to
#: 2.0, 128b/130b from 3.0 to 5.0; 6.0 (PAM4, FLIT mode) has no line code, its FLIT framing
#: and FEC count with the packet headers as protocol overhead inside the model.
PCIE_LANE: dict[int, tuple[float, float]] = {
    1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
    5: (32.0, 128 / 130), 6: (64.0, 1.0)}
PCIE_SOURCE = "PCIe link: GT/s per lane x line code x lanes / 8, per direction"


def pcie_gbs(generation: int, width: int) -> float | None:
    """A PCIe link's data rate in GB/s per direction (before packet overhead), or None for a
    generation unknown here."""
    lane = PCIE_LANE.get(generation)
    if lane is None or width <= 0:
        return None
    return lane[0] * lane[1] * width / 8
