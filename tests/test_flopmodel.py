"""The peak model: cpuinfo parsing, microarchitecture lookup (by ID, by SKU, by ISA flags when
the ID is masked), FLOPs per cycle from the pipe table, and the measured-throughput fallback."""

import pytest

from conftest import DATA
from hpcprobe import flopmodel as fm
from hpcprobe.peak import PEAK_KERNELS, PeakKernel

KERNELS = {(k.isa, k.precision, k.op): k for k in PEAK_KERNELS}


def cpu(vendor, family, model, name="", flags=""):
    return fm.CpuId(vendor, family, model, name, frozenset(flags.split()))


TURIN = cpu(fm.AMD, 0x1A, 0x02, "AMD EPYC 9755 128-Core Processor",
            "fma avx2 avx512f avx512_vp2intersect")
GENOA = cpu(fm.AMD, 0x19, 0x11, "AMD EPYC 9654 96-Core Processor", "fma avx2 avx512f")


def test_parses_the_recorded_cpuinfo_of_this_vm():
    c = fm.parse_cpuinfo((DATA / "cpuinfo-vm-masked.txt").read_text())
    assert (c.vendor, c.family, c.model) == ("GenuineIntel", 6, 167)
    assert c.virtual and "amx_tile" in c.flags


def test_cpuinfo_without_identity_gives_none():
    assert fm.parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n") is None
    assert fm.parse_cpuinfo("") is None


def test_masked_id_is_identified_by_flags():
    # this VM: the ID says Rocket Lake, the ISA says a server core with AMX
    ident = fm.identify(fm.parse_cpuinfo((DATA / "cpuinfo-vm-masked.txt").read_text()))
    assert ident.how == "flags"
    assert ident.arch.name.startswith("Sapphire")
    assert "amx_tile" in ident.note and "masked" in ident.note


@pytest.mark.parametrize("c,name", [
    (TURIN, "Zen 5"),
    (GENOA, "Zen 4"),
    (cpu(fm.INTEL, 6, 85, "Intel(R) Xeon(R) Gold 5218 CPU @ 2.30GHz"),
     "Skylake-SP/Cascade Lake (one 512-bit FMA unit)"),
    (cpu(fm.INTEL, 6, 85, "Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz"),
     "Skylake-SP/Cascade Lake/Cooper Lake"),
    (cpu(fm.INTEL, 6, 63, "Intel(R) Xeon(R) CPU E5-2680 v3"), "Haswell/Broadwell"),
])
def test_identified_by_cpu_id(c, name):
    ident = fm.identify(c)
    assert (ident.how, ident.arch.name) == ("cpuid", name)


def test_unknown_cpu_is_said_so():
    ident = fm.identify(cpu(fm.INTEL, 6, 250, "Intel(R) Future(R)", "avx2 fma"))
    assert ident.arch is None and ident.how == "unknown"
    assert "not in the table" in ident.note
    assert fm.identify(None).how == "unknown"


@pytest.mark.parametrize("arch,kernel,fpc", [
    ("Sapphire/Emerald/Granite Rapids", ("avx512", "dp", "fma"), 32),
    ("Sapphire/Emerald/Granite Rapids", ("avx512", "sp", "fma"), 64),
    ("Sapphire/Emerald/Granite Rapids", ("avx2", "dp", "fma+add"), 18.4),  # 8 FMA + 7 add
    ("Sapphire/Emerald/Granite Rapids", ("scalar", "dp", "mul+add"), 3),
    ("Zen 5", ("avx512", "dp", "fma"), 32),
    ("Zen 5", ("avx512", "dp", "fma+add"), 48),  # two FMA and two add pipes at once
    ("Zen 4", ("avx512", "dp", "fma"), 16),  # 512-bit in two passes
    ("Zen 4", ("avx2", "dp", "fma"), 16),
    ("Haswell/Broadwell", ("scalar", "dp", "mul+add"), 2),
    ("Haswell/Broadwell", ("avx2", "sp", "fma"), 32),
])
def test_flops_per_cycle_from_the_pipe_table(arch, kernel, fpc):
    row = next(a for a in fm.MICROARCHS if a.name == arch)
    assert row.flops_per_cycle(KERNELS[kernel]) == pytest.approx(fpc)


def test_a_width_the_core_lacks_has_no_model():
    row = next(a for a in fm.MICROARCHS if a.name == "Haswell/Broadwell")
    assert row.flops_per_cycle(KERNELS[("avx512", "dp", "fma")]) is None


def test_model_from_the_table():
    model, warning = fm.model_for(fm.identify(TURIN), KERNELS[("avx512", "dp", "fma")], 31.2)
    assert (model.flops_per_cycle, model.source, warning) == (32, "table", None)
    # 2 x 64 cores at 2.7 GHz, Rpeak of a dual-socket Turin node
    assert model.gflops(128, 2.7) == pytest.approx(32 * 128 * 2.7)
    assert fm.percent_of_model(97.0, 100.0) == pytest.approx(97.0)


def test_unknown_cpu_gets_the_measured_throughput_and_a_warning():
    k = KERNELS[("avx2", "dp", "fma")]
    model, warning = fm.model_for(fm.identify(cpu(fm.INTEL, 6, 250)), k, 15.7)
    assert (model.flops_per_cycle, model.source) == (15.7, "measured")
    assert "measured" in warning


def test_a_table_row_beaten_by_the_measurement_is_not_used():
    # the Rocket Lake row (one 512-bit FMA unit) cannot describe a core doing 32 FLOP/cycle
    rocket = cpu(fm.INTEL, 6, 167, "Intel(R) Core(TM) i9-11900K", "avx512f")
    model, warning = fm.model_for(fm.identify(rocket), KERNELS[("avx512", "dp", "fma")], 31.8)
    assert (model.flops_per_cycle, model.source) == (31.8, "measured")
    assert "above" in warning


def test_a_kernel_wider_than_the_table_row_gets_the_measured_throughput():
    haswell = cpu(fm.INTEL, 6, 63)
    k = PeakKernel("avx512", "dp", "fma", 16, 0, 0, 8)
    model, warning = fm.model_for(fm.identify(haswell), k, 16.0)
    assert model.source == "measured" and "no 512-bit unit" in warning
