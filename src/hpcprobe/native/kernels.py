"""The streaming-kernel registry: what each kernel moves and computes per element.

Rates are computed here and nowhere else (STREAM byte counting as the headline, the
write-allocate corrected count beside it)."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe import native
from hpcprobe.common.errors import OptionError

ELEMENT_BYTES = 8  # double precision


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


KERNELS: dict[str, StreamKernel] = {
    k.name: k for k in (
        StreamKernel("copy", "z = x", loads=1, stores=1, flops=0),
        StreamKernel("scale", "z = s*x", loads=1, stores=1, flops=1),
        StreamKernel("add", "z = x + y", loads=2, stores=1, flops=1),
        StreamKernel("triad", "z = x + s*y", loads=2, stores=1, flops=2),
        StreamKernel("load", "read x", loads=1, stores=0, flops=0),
        StreamKernel("store", "z = s", loads=0, stores=1, flops=0),
        StreamKernel("sum", "sum += x", loads=1, stores=0, flops=1),
    )
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
