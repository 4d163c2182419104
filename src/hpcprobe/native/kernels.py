"""The streaming kernels: what each moves and computes per element, read from the native core's
table.

Rates are computed here and nowhere else (STREAM byte counting as the headline, the
write-allocate corrected count beside it)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.common.errors import OptionError

ELEMENT_BYTES = 8  # double precision
#: STREAM's validation bound for double precision; our patterns are exact, so anything above
#: zero already means a broken kernel, but the field's bound is the one we state.
MAX_REL_ERROR = 1e-13


@dataclass(frozen=True)
class StreamKernel:
    """One row of the kernel table."""

    name: str
    formula: str
    loads: int  # explicit loads per element
    stores: int  # explicit stores per element
    flops: int  # floating-point operations per element

    @property
    def arrays(self) -> int:
        """Arrays the kernel touches (each is loaded or stored once per element)."""
        return self.loads + self.stores

    @property
    def stream_bytes(self) -> int:
        """Bytes per element as STREAM counts them: explicit loads and stores only."""
        return (self.loads + self.stores) * ELEMENT_BYTES

    def bytes_per_element(self, stores: str, write_allocate: bool) -> int:
        """Bytes per element; with ordinary stores DRAM also reads each stored line first."""
        extra = self.stores * ELEMENT_BYTES if write_allocate and stores == "regular" else 0
        return self.stream_bytes + extra

    @property
    def kernel_id(self) -> int:
        return native.kernel_names().index(self.name)


#: The kernels as the native core declares them (its table is the one definition).
KERNELS: dict[str, StreamKernel] = {
    name: StreamKernel(name, formula, loads, stores, flops)
    for name, formula, loads, stores, flops in native.kernel_shapes()
}
STREAM_KERNELS = ("copy", "scale", "add", "triad")
STORE_TYPES = ("regular", "nt")


def get(name: str) -> StreamKernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise OptionError(f"<kernels> {name!r} is unknown; kernels: {', '.join(KERNELS)}") from None


def bandwidth_gbs(kernel: StreamKernel, stores: str, elems_per_thread: int, threads: int,
                  inner: int, seconds: float, write_allocate: bool = False) -> float:
    """GB/s (10^9 B/s) of one sample, from the slowest thread's time."""
    moved = kernel.bytes_per_element(stores, write_allocate) * elems_per_thread * threads * inner
    return moved / seconds / 1e9
