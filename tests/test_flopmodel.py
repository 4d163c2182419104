"""The peak model: cpuinfo parsing, microarchitecture lookup (by ID, by SKU, by ISA flags when
the ID is masked), FLOPs per cycle from the pipe table, and the measured-throughput fallback."""

import pytest

from conftest import DATA
from hpcprobe.machine import flopmodel as fm
from hpcprobe.native.peak import PEAK_KERNELS, PeakKernel

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


#: DP FLOP/cycle/core per kernel from each CPU's documented pipes: (scalar mul+add, AVX2 FMA,
#: AVX2 8 FMA + 7 add, AVX-512 FMA, AVX-512 12 FMA + 12 add); None where the core lacks the ISA,
#: MEASURED where no source gives the mix's rate. No source gives Zen 2's, Zen 3's, Zen 4's or
#: Zen 5's 256-bit rate (vfpbench's 3 instructions a cycle on Zen 3 is below the 3.3-3.55 an
#: EPYC 7003 core ran this kernel at; Zen 4 ran it at 3.2, Zen 5 at 3); Zen 4
#: runs a 512-bit FMA and a 512-bit add per cycle, Zen 5 two of each. Intel's server cores put
#: adds on the FMA ports, and Golden Cove adds a 256-bit FADD port.
MEASURED = "measured"
ROWS = {
    "zen2-epyc-7742": ("Zen 2", (4, 16, MEASURED, None, None)),
    "zen3-epyc-7763": ("Zen 3", (4, 16, MEASURED, None, None)),
    "zen4-epyc-9654": ("Zen 4", (4, 16, MEASURED, 16, 24)),
    "zen5-epyc-9755": ("Zen 5", (4, 16, MEASURED, 32, 48)),
    "skylake-sp-8180": ("Skylake-SP/Cascade Lake/Cooper Lake", (2, 16, 92 / 7.5, 32, 24)),
    "cascade-lake-5218": ("Skylake-SP/Cascade Lake (one 512-bit FMA unit)",
                          (2, 16, 92 / 7.5, 16, 12)),
    "ice-lake-sp-8380": ("Ice Lake-SP", (2, 16, 92 / 7.5, 32, 24)),
    "sapphire-rapids-8480": ("Sapphire/Emerald/Granite Rapids", (3, 16, 18.4, 32, 24)),
}
ORDER = (("scalar", "mul+add"), ("avx2", "fma"), ("avx2", "fma+add"), ("avx512", "fma"),
         ("avx512", "fma+add"))


def expect_row(arch, isa, op, fpc):
    """The row's model of both precisions of one kernel is fpc (DP) FLOP/cycle, or, for an
    unsourced mix, the measured single-core rate with a warning that says so."""
    for precision, lanes in (("dp", 1), ("sp", 1 if isa == "scalar" else 2)):
        k = KERNELS[(isa, precision, op)]
        got = arch.flops_per_cycle(k)
        if fpc == MEASURED:
            assert got is None and arch.unsourced(k), (isa, op)
            model, warning = fm.model_for(fm.Identification(arch, "cpuid", arch.name), k, 19.7)
            assert (model.flops_per_cycle, model.source) == (19.7, "measured")
            assert "no published rate" in warning and op in warning
        else:
            assert got == (None if fpc is None else pytest.approx(lanes * fpc)), (isa, op)


@pytest.mark.parametrize("fixture", sorted(ROWS))
def test_every_row_from_a_real_cpuinfo(fixture):
    c = fm.parse_cpuinfo((DATA / "cpuinfo" / f"{fixture}.txt").read_text())
    name, expected = ROWS[fixture]
    ident = fm.identify(c)
    assert (ident.how, ident.arch.name) == ("cpuid", name)
    for (isa, op), fpc in zip(ORDER, expected, strict=True):
        expect_row(ident.arch, isa, op, fpc)


@pytest.mark.parametrize("arch", fm.MICROARCHS, ids=lambda a: a.name)
def test_every_row_cites_its_pipes_and_says_what_is_known_of_each_mix(arch):
    """Each width a row executes has an entry for its kernel's mix (scalar mul+add, vector
    FMA+add): a citation that the pipes alone bind, or an explicit lack of source, which the
    model turns into the measured rate."""
    assert arch.source
    assert set(arch.mixes) == set(arch.pipes)
    for width, mix in arch.mixes.items():
        k = next(k for k in KERNELS.values() if k.width_bits == width and k.add_chains)
        assert arch.unsourced(k) == (not mix)


def test_every_row_of_the_table_is_covered_by_a_fixture_or_a_test():
    tested = {name for name, _ in ROWS.values()} | {
        "Haswell/Broadwell", "Skylake/Kaby/Coffee/Comet Lake (client)",
        "Ice Lake/Tiger Lake/Rocket Lake (client)", "Zen/Zen+", "Zen 5 (mobile)"}
    assert {a.name for a in fm.MICROARCHS} <= tested


@pytest.mark.parametrize("family,model,name,flags,arch", [
    (6, 94, "Intel(R) Xeon(R) E-2176G", "avx2 fma", "Skylake/Kaby/Coffee/Comet Lake (client)"),
    (6, 140, "11th Gen Intel(R) Core(TM) i7-1185G7", "avx2 fma avx512f",
     "Ice Lake/Tiger Lake/Rocket Lake (client)"),
])
def test_client_rows(family, model, name, flags, arch):
    c = cpu(fm.INTEL, family, model, name, flags)
    assert fm.identify(c).arch.name == arch


def test_zen_rows_of_the_older_and_mobile_cores():
    zen1 = fm.identify(cpu(fm.AMD, 0x17, 0x01, "AMD EPYC 7601", "avx2 fma")).arch
    assert zen1.name == "Zen/Zen+"
    assert zen1.flops_per_cycle(KERNELS[("avx2", "dp", "fma")]) == pytest.approx(8)
    strix = fm.identify(cpu(fm.AMD, 0x1A, 0x24, "AMD Ryzen AI 9 HX 370", "avx2 avx512f")).arch
    assert strix.name == "Zen 5 (mobile)"
    assert strix.flops_per_cycle(KERNELS[("avx512", "dp", "fma")]) == pytest.approx(16)


def test_above_the_model_is_no_efficiency():
    assert fm.efficiency_label(99.6) == "99.6"
    assert fm.efficiency_label(100.9) == "100.9"
    assert "above model" in fm.efficiency_label(104.2)
    # a median above whose CI reaches back to the model: at it within its noise
    assert fm.efficiency_label(104.2, 98.0) == "104.2"
    assert "above model" in fm.efficiency_label(104.2, 102.0)
