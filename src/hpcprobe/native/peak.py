"""The peak-FLOP kernel registry: what each kernel computes per iteration, and its rate.

Rates are computed here and nowhere else. An FMA counts as two FLOPs, a multiply or an add as
one; one iteration updates every chain of the kernel once."""

from __future__ import annotations

from dataclasses import dataclass

ELEMENT_BITS = {"dp": 64, "sp": 32}
OPS = ("fma", "fma+add", "mul+add")
PRECISIONS = ("dp", "sp")


@dataclass(frozen=True)
class PeakKernel:
    """One row of the table: an ISA variant, a precision, an operation mix and its chains."""

    isa: str
    precision: str
    op: str
    fma_chains: int
    mul_chains: int
    add_chains: int
    lanes: int  # elements per vector (1 for scalar code)

    @property
    def flops_per_iter(self) -> int:
        return (2 * self.fma_chains + self.mul_chains + self.add_chains) * self.lanes

    @property
    def width_bits(self) -> int:
        """Vector width of its instructions; 64 stands for scalar code of either precision."""
        return 64 if self.isa == "scalar" else self.lanes * ELEMENT_BITS[self.precision]

    @property
    def label(self) -> str:
        return f"{self.isa} {self.precision} {self.op}"


PEAK_KERNELS: tuple[PeakKernel, ...] = (
    # the x86-64 baseline has no FMA: multiply chains beside add chains
    PeakKernel("scalar", "dp", "mul+add", 0, 8, 8, 1),
    PeakKernel("scalar", "sp", "mul+add", 0, 8, 8, 1),
    PeakKernel("avx2", "dp", "fma", 12, 0, 0, 4),
    PeakKernel("avx2", "dp", "fma+add", 8, 0, 7, 4),
    PeakKernel("avx2", "sp", "fma", 12, 0, 0, 8),
    PeakKernel("avx2", "sp", "fma+add", 8, 0, 7, 8),
    PeakKernel("avx512", "dp", "fma", 16, 0, 0, 8),
    PeakKernel("avx512", "dp", "fma+add", 12, 0, 12, 8),
    PeakKernel("avx512", "sp", "fma", 16, 0, 0, 16),
    PeakKernel("avx512", "sp", "fma+add", 12, 0, 12, 16),
)


def kernels(isas: tuple[str, ...] | list[str], precisions: tuple[str, ...] = PRECISIONS
            ) -> list[PeakKernel]:
    """The kernels of these ISA variants and precisions, in table order."""
    return [k for k in PEAK_KERNELS if k.isa in isas and k.precision in precisions]


def headline(isa: str, precision: str) -> PeakKernel:
    """The kernel whose figure is the peak of an ISA: FMA where the ISA has it."""
    rows = kernels([isa], (precision,))
    return next((k for k in rows if k.op == "fma"), rows[0])


def gflops(kernel: PeakKernel, iters: int, calls: int, threads: int, seconds: float) -> float:
    """GFLOP/s of one sample: the FLOPs of all threads over the slowest thread's time."""
    return kernel.flops_per_iter * iters * calls * threads / seconds / 1e9
