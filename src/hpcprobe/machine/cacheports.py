"""The bandwidth ceilings of the L1 and L2 caches from the core's load/store ports: per
microarchitecture (the rows of `flopmodel.MICROARCHS`, by name), the bytes the L1 data cache can
load and store a cycle at each vector width, and the bytes a cycle the L2 can fill into the L1,
each row citing where its figures come from. Rows without a source are absent, so their
ceiling is unknown, never guessed.

A kernel's ceiling at L1 is bound by whichever of its loads and stores needs more cycles an
element; at L2 by the fill path, which also carries the line an ordinary store reads first
(write-allocate) and which the L1 ports bound too. Writebacks to L2 are not counted, so the
L2 figure is an upper bound. Times the clock (GHz) and the cores, it is GB/s."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.native.kernels import ELEMENT_BYTES

#: Vector width (bits) of the memory kernels' ISA variants
ISA_WIDTH = {"scalar": 64, "avx2": 256, "avx512": 512}


@dataclass(frozen=True)
class Ports:
    """One core's cache ports: width (bits) -> bytes loaded and stored a cycle at that width
    (the widths with a source only), bytes a cycle from L2 into L1, and the sources."""

    load: dict[int, int]
    store: dict[int, int]
    l2_fill: int
    source: str

    def bytes_per_cycle(self, level: str, loads: int, stores: int, width: int,
                        regular_stores: bool = True) -> float | None:
        """The most bytes a cycle (STREAM counting: explicit loads and stores) a kernel of
        `loads` and `stores` per element moves at `level` (L1 or L2) with instructions of
        `width` bits; None where the row has no figure for that width or level."""
        if width not in self.load or width not in self.store or level not in ("L1", "L2"):
            return None
        counted = (loads + stores) * ELEMENT_BYTES
        cycles = max(loads * ELEMENT_BYTES / self.load[width],
                     stores * ELEMENT_BYTES / self.store[width])
        if level == "L2":
            crossing = (loads + (stores if regular_stores else 0)) * ELEMENT_BYTES
            if crossing:
                cycles = max(cycles, crossing / self.l2_fill)
        return counted / cycles if cycles else None


_INTEL = "Intel 64 and IA-32 Architectures Optimization Reference Manual (248966)"
_ZEN4_AIDA = ("AIDA64 on a Ryzen 5 7600X (tomshw.it, 2024-06-10): L1 read 2030, write 1027, L2 "
              "read 1029 GB/s on 6 cores at about 5.3 GHz, i.e. 64, 32 and 32 B a cycle")
_ZEN5_AIDA = ("AIDA64 on a Ryzen 5 9600X (tomshw.it, 2024-06-10): L1 read 3756, write 1884, L2 "
              "read 1875 GB/s on 6 cores at about 5.4 GHz, i.e. 116, 58 and 58 B a cycle")

#: Microarchitecture row name -> its ports (the flopmodel's rows, by name).
PORTS: dict[str, Ports] = {
    "Haswell/Broadwell": Ports(
        {256: 64}, {256: 32}, 64, f"{_INTEL}, Haswell cache parameters: L1 data 64 B load + "
                                  "32 B store a cycle, L2 64 B a cycle"),
    "Skylake/Kaby/Coffee/Comet Lake (client)": Ports(
        {256: 64}, {256: 32}, 64, f"{_INTEL}, Skylake client: L1 data 2 x 32 B loads + 1 x "
                                  "32 B store a cycle, L2 64 B a cycle"),
    "Skylake-SP/Cascade Lake (one 512-bit FMA unit)": Ports(
        {256: 64, 512: 128}, {256: 32, 512: 64}, 64,
        f"{_INTEL}, Skylake server: L1 data 2 loads + 1 store a cycle of up to 64 B, L2 64 B "
        "a cycle"),
    "Skylake-SP/Cascade Lake/Cooper Lake": Ports(
        {256: 64, 512: 128}, {256: 32, 512: 64}, 64,
        f"{_INTEL}, Skylake server: L1 data 2 loads + 1 store a cycle of up to 64 B, L2 64 B "
        "a cycle"),
    "Zen/Zen+": Ports(
        {256: 32}, {256: 16}, 32, "AMD 55723, load-store unit: two 128-bit loads and one "
                                  "128-bit store a cycle (a 256-bit access is two); L2 32 B a "
                                  "cycle"),
    "Zen 2": Ports(
        {256: 64}, {256: 32}, 32, "AMD 56305, load-store unit: two 256-bit loads and one "
                                  "256-bit store a cycle; L2 32 B a cycle"),
    "Zen 3": Ports(
        {256: 64}, {256: 32}, 32, "AMD 56665, load-store unit: two 256-bit loads and one "
                                  "256-bit store a cycle; L2 32 B a cycle"),
    "Zen 4": Ports(
        {256: 64, 512: 64}, {256: 32, 512: 32}, 32,
        "AMD 57647, load-store unit: two 256-bit or one 512-bit loads and one 256-bit store a "
        f"cycle (a 512-bit store takes two); L2 32 B a cycle; {_ZEN4_AIDA}"),
    "Zen 5": Ports(
        {512: 128}, {512: 64}, 64, "AMD 58455, load-store unit: two 512-bit loads and one "
                                   f"512-bit store a cycle; L2 64 B a cycle; {_ZEN5_AIDA}"),
}
