"""The peak model: FLOPs per cycle per core from a documented table of microarchitectures, times
cores, times the clock measured in the same run. Pure: no measurement, no I/O but cpuinfo text.

The table gives, per microarchitecture and vector width, the pipes that execute FMAs (and
multiplies) and the pipes that execute only FP adds. A kernel of f FMA, m multiply and a add
chains per iteration needs at least max((f+m)/F, (f+m+a)/(F+A)) cycles per iteration (FMAs and
multiplies go to FMA pipes, adds to any FP pipe); that gives its FLOPs per cycle. Each row
cites its pipes and, for each width where FMAs mix with adds, a source that the pipes alone bind
the mix; a mix without one has no table figure (the model is then the measured single-core
rate). Figures: the vendors' optimisation manuals (Intel 248966; AMD 55723, 56305, 56665,
57647, 58455), vfpbench measurements; docs/methods.md lists them."""

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
#: A kernel above this % of its model (the whole CI of its median: `above_model`) is a finding
#: about the model's clock, not an efficiency.
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
    source: str  # where the pipes come from
    #: per width, the citation that the pipes alone bind its kernel's mix (FMAs, or in scalar
    #: code multiplies, beside FP adds); "" where the project found none, and the model is then
    #: the measured single-core rate
    mixes: dict[int, str]
    name_pattern: str | None = None  # a SKU split within the models (model name regex)
    lacks: frozenset[str] = frozenset()  # flags this core never has: such an ID is not trusted
    signature: frozenset[str] = frozenset()  # flags that identify it when the ID is not trusted

    def unsourced(self, k: PeakKernel) -> bool:
        """Whether k mixes FMAs or multiplies with adds at a width whose mix has no source."""
        mixes = bool(k.add_chains and (k.fma_chains or k.mul_chains))
        return mixes and k.width_bits in self.pipes and not self.mixes.get(k.width_bits)

    def flops_per_cycle(self, k: PeakKernel) -> float | None:
        """FLOPs per cycle per core of kernel k; None where this core has no such unit or the
        kernel's mix has no source."""
        if k.width_bits not in self.pipes or self.unsourced(k):
            return None
        fma, add = self.pipes[k.width_bits]
        f = k.fma_chains + k.mul_chains
        cycles = max(f / fma, (f + k.add_chains) / (fma + add))
        return k.flops_per_iter / cycles


def _r(*ranges: tuple[int, int]) -> frozenset[int]:
    return frozenset(m for lo, hi in ranges for m in range(lo, hi + 1))


INTEL, AMD = "GenuineIntel", "AuthenticAMD"
_NO_512 = {64: (2, 0), 256: (2, 0)}
#: Intel before Golden Cove: adds run on the FMA ports, so a mix is bound by those ports alone.
_ON_FMA_PORTS = "Intel 248966: FP adds execute on the FMA ports"
_INTEL_MIX = {64: _ON_FMA_PORTS, 256: _ON_FMA_PORTS, 512: _ON_FMA_PORTS}
_INTEL_MIX_NO_512 = {64: _ON_FMA_PORTS, 256: _ON_FMA_PORTS}
_VFPBENCH_ZEN3 = ("vfpbench on a Ryzen 5 5560U (wlog.flatlib.jp, 2024-01-13): mul+add 4.0 "
                  "instructions/cycle")
#: Scalar multiplies + adds on Zen: 2 FMUL/FMA pipes and 2 FADD pipes, all four at once
_ZEN_MUL_ADD = ("AMD software optimization guides (55723, 56305, 56665, 57647, 58455) "
                "§2.11: FMUL on pipes 0-1, FADD on 2-3; " + _VFPBENCH_ZEN3)
#: A 256-bit FMA+add mix where no published figure exists: the model is the measured rate
_NO_SOURCE = ""
#: Order matters: the first row that matches wins (SKU splits before their family).
MICROARCHS: tuple[Microarch, ...] = (
    Microarch("Haswell/Broadwell", INTEL, 6, frozenset({60, 63, 69, 70, 61, 71, 79, 86}),
              _NO_512, "Intel 248966 §2.5-2.6: FMA on ports 0 and 1", _INTEL_MIX_NO_512,
              lacks=frozenset({"avx512f"})),
    Microarch("Skylake/Kaby/Coffee/Comet Lake (client)", INTEL, 6,
              frozenset({78, 94, 142, 158, 165, 166}), _NO_512,
              "Intel 248966 §2.3: FMA on ports 0 and 1", _INTEL_MIX_NO_512,
              lacks=frozenset({"avx512f"})),
    Microarch("Skylake-SP/Cascade Lake (one 512-bit FMA unit)", INTEL, 6, frozenset({85}),
              {64: (2, 0), 256: (2, 0), 512: (1, 0)},
              "Intel 248966 §2.2: one 512-bit FMA unit (ports 0+1) in these SKUs", _INTEL_MIX,
              name_pattern=r"Bronze|Silver|Gold 5\d\d\d|Gold 3\d\d\d"),
    Microarch("Skylake-SP/Cascade Lake/Cooper Lake", INTEL, 6, frozenset({85}),
              {64: (2, 0), 256: (2, 0), 512: (2, 0)},
              "Intel 248966 §2.2: a second 512-bit FMA unit on port 5", _INTEL_MIX,
              lacks=frozenset({"amx_tile"})),
    Microarch("Ice Lake/Tiger Lake/Rocket Lake (client)", INTEL, 6,
              frozenset({125, 126, 140, 141, 167}), {64: (2, 0), 256: (2, 0), 512: (1, 0)},
              "Intel 248966 §2.1: Sunny Cove client, one 512-bit FMA unit", _INTEL_MIX,
              lacks=frozenset({"amx_tile", "avx512_fp16"})),
    Microarch("Ice Lake-SP", INTEL, 6, frozenset({106, 108}),
              {64: (2, 0), 256: (2, 0), 512: (2, 0)},
              "Intel 248966 §2.1: Sunny Cove server, a 512-bit FMA unit on port 5", _INTEL_MIX,
              lacks=frozenset({"amx_tile"})),
    # Golden Cove and later server cores: FADD units on ports 1 and 5 beside the FMA units
    Microarch("Sapphire/Emerald/Granite Rapids", INTEL, 6, frozenset({143, 207, 173, 174}),
              {64: (2, 1), 256: (2, 1), 512: (2, 0)},
              "Intel 248966, Golden Cove: FMA on ports 0 and 1 (0+1 and 5 at 512 bits), FADD "
              "on ports 1 and 5 up to 256 bits",
              {w: ("Intel 248966, Golden Cove: three FP ports (FMA 0, 1; FADD 1, 5) "
                   "up to 256 bits, the FMA ports at 512") for w in (64, 256, 512)},
              signature=frozenset({"amx_tile"})),
    Microarch("Zen/Zen+", AMD, 0x17, _r((0x00, 0x2F)), {64: (2, 2), 256: (1, 1)},
              "AMD 55723 §2.11: FP pipes 0-1 FMA/FMUL, 2-3 FADD, 128 bits wide (a 256-bit "
              "instruction is two operations)", {64: _ZEN_MUL_ADD, 256: _NO_SOURCE},
              lacks=frozenset({"avx512f"})),
    Microarch("Zen 2", AMD, 0x17, _r((0x30, 0xFF)), {64: (2, 2), 256: (2, 2)},
              "AMD 56305 §2.11: FP pipes 0-1 FMA/FMUL, 2-3 FADD, 256 bits wide",
              {64: _ZEN_MUL_ADD, 256: _NO_SOURCE}, lacks=frozenset({"avx512f"})),
    # Zen 3's 256-bit FMA+add: vfpbench's 3.0 a cycle (12 chains: 6 FMA chains at 4 cycles'
    # latency start at most 1.5 FMAs a cycle) is below what an EPYC 7003 core ran this kernel
    # at here (3.30 DP, 3.35-3.55 SP, sessions 48-49), so no source gives its rate
    Microarch("Zen 3", AMD, 0x19, _r((0x00, 0x0F), (0x20, 0x5F)), {64: (2, 2), 256: (2, 2)},
              "AMD 56665 §2.11: FP pipes 0-1 FMA/FMUL, 2-3 FADD, 256 bits wide",
              {64: _ZEN_MUL_ADD, 256: _NO_SOURCE}, lacks=frozenset({"avx512f"})),
    # Zen 4 executes a 512-bit instruction on its 256-bit pipes in two passes
    Microarch("Zen 4", AMD, 0x19, _r((0x10, 0x1F), (0x60, 0xAF)),
              {64: (2, 2), 256: (2, 2), 512: (1, 1)},
              "AMD 57647 §2.11: FP pipes 0-1 FMA/FMUL, 2-3 FADD, 256 bits wide; a 512-bit "
              "instruction takes a pipe for two passes",
              {64: _ZEN_MUL_ADD, 256: _NO_SOURCE,
               512: ("AMD 57647 §2.11: one 512-bit FMA and one 512-bit FADD per cycle "
                     "(each two passes of a 256-bit pipe)")},
              signature=frozenset({"avx512f"})),
    # Zen 5 mobile (Strix) keeps Zen 4's two-pass 512-bit execution; server and desktop do not
    Microarch("Zen 5 (mobile)", AMD, 0x1A, _r((0x20, 0x2F), (0x60, 0x7F)),
              {64: (2, 2), 256: (2, 2), 512: (1, 1)},
              "AMD 58455 §2.11: the 256-bit datapath of the mobile parts",
              {64: _ZEN_MUL_ADD, 256: _NO_SOURCE, 512: _NO_SOURCE}),
    Microarch("Zen 5", AMD, 0x1A, _r((0x00, 0x1F), (0x40, 0x5F)),
              {64: (2, 2), 256: (2, 2), 512: (2, 2)},
              "AMD 58455 §2.11: FP pipes 0-1 FMA/FMUL, 2-3 FADD, 512 bits wide",
              {64: _ZEN_MUL_ADD, 256: _NO_SOURCE,
               512: ("vfpbench on a Ryzen 7 9700X (wlog.flatlib.jp): 512-bit mul+add "
                     "4 instructions/cycle, the four pipes at once; FMA+add: hpcprobe "
                     "measured 48 DP FLOP/cycle, the pipes' rate, on an EPYC family 26 "
                     "model 2")},
              signature=frozenset({"avx512f", "avx512_vp2intersect"})),
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
    if ident.arch.unsourced(kernel):
        return (Model(measured_per_cycle, "measured", name),
                f"{name}: no published rate for {kernel.op} at {kernel.width_bits} bits (the "
                f"pipes alone need not bind there): the {kernel.label} model is the measured "
                f"single-core throughput ({measured_per_cycle:.2f} FLOP/cycle), so its % reads "
                "scaling across cores, not efficiency")
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


def above_model(percent: float, low: float | None = None) -> bool:
    """A figure at `percent` of its model (median), `low` at the low end of its median's CI,
    above its model: the whole CI above ABOVE_MODEL, as the run judge asks of a ceiling
    (`analysis.verdict.Headline.above_ceiling`). A median above it whose CI reaches back to it
    is a figure at its model within its noise."""
    return (percent if low is None else low) > ABOVE_MODEL


def efficiency_label(percent: float, low: float | None = None) -> str:
    """A % of the model as a table shows it (`low`: the low end of its CI's): above its model
    (`above_model`) it is no efficiency."""
    return f"{percent:.1f} (above model!)" if above_model(percent, low) else f"{percent:.1f}"
