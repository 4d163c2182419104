"""The peak model: FLOPs per cycle per core from a documented table of microarchitectures, times
cores, times the clock measured in the same run. Pure: no measurement, no I/O but cpuinfo text.

The table gives, per microarchitecture and vector width, the pipes that execute FMAs (and
multiplies) and the pipes that execute only FP adds. A kernel of f FMA, m multiply and a add
chains per iteration needs at least max((f+m)/F, (f+m+a)/(F+A)) cycles per iteration (FMAs and
multiplies go to FMA pipes, adds to any FP pipe), which gives its FLOPs per cycle. Figures:
the vendors' optimisation manuals (Intel 248966, AMD 58455 / 57647) and their public
microarchitecture descriptions; docs/methods.md lists them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcprobe.native.peak import PeakKernel

#: A measured single-core figure this far above the table's means the table does not describe
#: this core (a masked CPU ID, an unlisted SKU): the model falls back to the measurement. Rows
#: differ by a pipe at least (x1.25 or more); the clock of a busy host drifts by a few percent
#: between the clock's and the kernel's samples.
EXCEEDS_TOLERANCE = 1.10
#: A kernel above this % of its model is a finding about the model's clock, not an efficiency.
ABOVE_MODEL = 101.0


@dataclass(frozen=True)
class CpuId:
    """The identity of a CPU as /proc/cpuinfo states it."""

    vendor: str
    family: int
    model: int
    model_name: str
    flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def virtual(self) -> bool:
        return "hypervisor" in self.flags

    @property
    def label(self) -> str:
        return f"{self.vendor} family {self.family} model {self.model}"


def parse_cpuinfo(text: str) -> CpuId | None:
    """The first processor's identity in /proc/cpuinfo text; None when it lacks one (non-x86)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    try:
        return CpuId(fields["vendor_id"], int(fields["cpu family"]), int(fields["model"]),
                     fields.get("model name", ""), frozenset(fields.get("flags", "").split()))
    except (KeyError, ValueError):
        return None


def virtual_cpu() -> bool:
    """Whether this CPU says it runs under a hypervisor."""
    cpu = read_cpuid()
    return cpu is not None and cpu.virtual


def read_cpuid(path: str = "/proc/cpuinfo") -> CpuId | None:
    try:
        return parse_cpuinfo(Path(path).read_text())
    except OSError:
        return None


@dataclass(frozen=True)
class Microarch:
    """One row of the table: which CPUs it covers and its FP pipes per vector width (64 stands
    for scalar code): width -> (FMA pipes, add-only pipes), in instructions of that width."""

    name: str
    vendor: str
    family: int
    models: frozenset[int]
    pipes: dict[int, tuple[int, int]]
    name_pattern: str | None = None  # a SKU split within the models (model name regex)
    lacks: frozenset[str] = frozenset()  # flags this core never has: such an ID is not trusted
    signature: frozenset[str] = frozenset()  # flags that identify it when the ID is not trusted
    #: FP instructions issued per cycle, per width, when FMAs and adds mix (absent: every pipe
    #: at once). An FMA reads three operands; on Zen 1-4 the FP register file's read ports let
    #: two FMAs and one add start per cycle, not two of each (multiplies and adds alone do 4).
    fma_mix_issue: dict[int, int] = field(default_factory=dict)

    def flops_per_cycle(self, k: PeakKernel) -> float | None:
        """FLOPs per cycle per core of kernel k; None where this core has no such unit."""
        if k.width_bits not in self.pipes:
            return None
        fma, add = self.pipes[k.width_bits]
        f = k.fma_chains + k.mul_chains
        cycles = max(f / fma, (f + k.add_chains) / (fma + add))
        issue = self.fma_mix_issue.get(k.width_bits)
        if issue and k.fma_chains and k.add_chains:
            cycles = max(cycles, (f + k.add_chains) / issue)
        return k.flops_per_iter / cycles


def _r(*ranges: tuple[int, int]) -> frozenset[int]:
    return frozenset(m for lo, hi in ranges for m in range(lo, hi + 1))


INTEL, AMD = "GenuineIntel", "AuthenticAMD"
#: Zen 1-4: 2 FMAs + 1 add per cycle at every vector width (vfpbench, Zen 3: 3 FP instructions
#: per cycle for an FMA + add mix, 4 for multiply + add).
_MIX3 = {256: 3, 512: 3}
_NO_512 = {64: (2, 0), 256: (2, 0)}
#: Order matters: the first row that matches wins (SKU splits before their family).
MICROARCHS: tuple[Microarch, ...] = (
    Microarch("Haswell/Broadwell", INTEL, 6, frozenset({60, 63, 69, 70, 61, 71, 79, 86}),
              _NO_512, lacks=frozenset({"avx512f"})),
    Microarch("Skylake/Kaby/Coffee/Comet Lake (client)", INTEL, 6,
              frozenset({78, 94, 142, 158, 165, 166}), _NO_512, lacks=frozenset({"avx512f"})),
    Microarch("Skylake-SP/Cascade Lake (one 512-bit FMA unit)", INTEL, 6, frozenset({85}),
              {64: (2, 0), 256: (2, 0), 512: (1, 0)},
              name_pattern=r"Bronze|Silver|Gold 5\d\d\d|Gold 3\d\d\d"),
    Microarch("Skylake-SP/Cascade Lake/Cooper Lake", INTEL, 6, frozenset({85}),
              {64: (2, 0), 256: (2, 0), 512: (2, 0)}, lacks=frozenset({"amx_tile"})),
    Microarch("Ice Lake/Tiger Lake/Rocket Lake (client)", INTEL, 6,
              frozenset({125, 126, 140, 141, 167}), {64: (2, 0), 256: (2, 0), 512: (1, 0)},
              lacks=frozenset({"amx_tile", "avx512_fp16"})),
    Microarch("Ice Lake-SP", INTEL, 6, frozenset({106, 108}),
              {64: (2, 0), 256: (2, 0), 512: (2, 0)}, lacks=frozenset({"amx_tile"})),
    # Golden Cove and later server cores: FADD units on ports 1 and 5 beside the FMA units
    Microarch("Sapphire/Emerald/Granite Rapids", INTEL, 6, frozenset({143, 207, 173, 174}),
              {64: (2, 1), 256: (2, 1), 512: (2, 0)}, signature=frozenset({"amx_tile"})),
    Microarch("Zen/Zen+", AMD, 0x17, _r((0x00, 0x2F)), {64: (2, 2), 256: (1, 1)},
              lacks=frozenset({"avx512f"}), fma_mix_issue=_MIX3),
    Microarch("Zen 2", AMD, 0x17, _r((0x30, 0xFF)), {64: (2, 2), 256: (2, 2)},
              lacks=frozenset({"avx512f"}), fma_mix_issue=_MIX3),
    Microarch("Zen 3", AMD, 0x19, _r((0x00, 0x0F), (0x20, 0x5F)), {64: (2, 2), 256: (2, 2)},
              lacks=frozenset({"avx512f"}), fma_mix_issue=_MIX3),
    # Zen 4 executes a 512-bit instruction on its 256-bit pipes in two passes
    Microarch("Zen 4", AMD, 0x19, _r((0x10, 0x1F), (0x60, 0xAF)),
              {64: (2, 2), 256: (2, 2), 512: (1, 1)}, signature=frozenset({"avx512f"}),
              fma_mix_issue=_MIX3),
    # Zen 5 mobile (Strix) keeps Zen 4's two-pass 512-bit execution; server and desktop do not
    Microarch("Zen 5 (mobile)", AMD, 0x1A, _r((0x20, 0x2F), (0x60, 0x7F)),
              {64: (2, 2), 256: (2, 2), 512: (1, 1)}),
    # Zen 5 issues a 512-bit FMA + add mix at 4 per cycle (vfpbench, Ryzen 9700X: IPC 4 for
    # 512-bit multiply + add; measured here: 48 DP FLOP/cycle), but a 256-bit one at 3
    # (measured on an EPYC family 26 model 2: 17.5 of 23 FLOP/cycle with 8 FMA + 7 add chains)
    Microarch("Zen 5", AMD, 0x1A, _r((0x00, 0x1F), (0x40, 0x5F)),
              {64: (2, 2), 256: (2, 2), 512: (2, 2)},
              signature=frozenset({"avx512f", "avx512_vp2intersect"}),
              fma_mix_issue={256: 3}),
)


@dataclass(frozen=True)
class Identification:
    """The table row that describes this CPU, or None, and how it was found (for the output)."""

    arch: Microarch | None
    how: str  # "cpuid", "flags" or "unknown"
    note: str


def identify(cpu: CpuId | None) -> Identification:
    """Find the table row: by vendor, family and model (and model name for SKU splits), unless
    the CPU has a flag that row's core lacks (a virtual CPU with a masked ID); then by ISA
    signature among the vendor's rows; else unknown."""
    if cpu is None:
        return Identification(None, "unknown", "no CPU identification in /proc/cpuinfo")
    why = f"{cpu.label} is not in the table"
    for a in MICROARCHS:
        if (a.vendor, a.family) != (cpu.vendor, cpu.family) or cpu.model not in a.models:
            continue
        if a.name_pattern and not re.search(a.name_pattern, cpu.model_name):
            continue
        contradicted = sorted(a.lacks & cpu.flags)
        if not contradicted:
            return Identification(a, "cpuid", f"{a.name} ({cpu.label})")
        why = (f"{cpu.label} names {a.name}, but the CPU has {', '.join(contradicted)}, which "
               "that core lacks" + (" (a virtual CPU with a masked ID)" if cpu.virtual else ""))
        break
    for a in MICROARCHS:
        if a.vendor == cpu.vendor and a.signature and a.signature <= cpu.flags:
            return Identification(a, "flags", f"{a.name}, identified by its ISA flags "
                                              f"({', '.join(sorted(a.signature))}): {why}")
    return Identification(None, "unknown", why)


@dataclass(frozen=True)
class Model:
    """FLOPs per cycle per core of one kernel, and where the figure comes from."""

    flops_per_cycle: float
    source: str  # "table" or "measured"
    microarch: str

    def gflops(self, cores: int, ghz: float) -> float:
        return self.flops_per_cycle * cores * ghz


def model_for(ident: Identification, kernel: PeakKernel,
              measured_per_cycle: float) -> tuple[Model, str | None]:
    """The model of `kernel` and a warning, if any. `measured_per_cycle` is one core's measured
    FLOPs per cycle at the measured clock: the model where the table has no row for this CPU or
    its row is exceeded (a model cannot be beaten, so such a row does not describe this core)."""
    table = ident.arch.flops_per_cycle(kernel) if ident.arch else None
    if ident.arch is None:
        return (Model(measured_per_cycle, "measured", "unknown"),
                f"{ident.note}: the {kernel.label} model is the measured single-core throughput "
                f"({measured_per_cycle:.2f} FLOP/cycle)")
    name = ident.arch.name
    if table is None:
        return (Model(measured_per_cycle, "measured", name),
                f"{name} has no {kernel.width_bits}-bit unit in the table, yet {kernel.label} "
                f"ran: the model is the measured throughput ({measured_per_cycle:.2f} FLOP/cycle)")
    if measured_per_cycle > table * EXCEEDS_TOLERANCE:
        return (Model(measured_per_cycle, "measured", name),
                f"{kernel.label}: one core measured {measured_per_cycle:.2f} FLOP/cycle, above "
                f"the {table:g} of the {name} table row; the row does not describe this CPU, "
                "so the model is the measured throughput")
    return Model(table, "table", name), None


def percent_of_model(measured_gflops: float, model_gflops: float) -> float:
    return 100.0 * measured_gflops / model_gflops


def efficiency_label(percent: float) -> str:
    """A % of the model as a table shows it: above ABOVE_MODEL it is no efficiency."""
    return f"{percent:.1f}" if percent <= ABOVE_MODEL else f"{percent:.1f} (above model!)"
