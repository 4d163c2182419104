"""The DRAM ceiling from SMBIOS memory devices: recorded type 17 trees of documented server
configurations (tests/data/smbios/, written by its make.py), a VM without tables, and the
locator and channel-count tables."""

import pytest

from conftest import DATA
from hpcprobe.machine import dimms

SMBIOS = DATA / "smbios"
EDAC = DATA / "edac"
MILAN = "AMD EPYC 7763 64-Core Processor"
ICELAKE = "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz"


def ceiling(tree: str, model: str, edac_tree: str = "none") -> dimms.Ceiling:
    """The ceiling of a recorded SMBIOS tree with a recorded EDAC tree (default: none, as in a
    VM; never this machine's)."""
    return dimms.dram_ceiling(model, str(SMBIOS / tree), str(EDAC / edac_tree))


def test_a_fully_populated_two_socket_milan_is_16_channels_of_ddr4_3200():
    c = ceiling("epyc-7763-2s-full", MILAN)
    # 2 sockets x 8 channels x 3200 MT/s x 8 B (the Dell Rome study's 409.6 GB/s)
    assert c.gbs == pytest.approx(409.6)
    assert [(s.name, len(s.channels), s.mts) for s in c.sockets] == [("0", 8, 3200),
                                                                      ("1", 8, 3200)]
    assert c.findings == () and "SMBIOS" in c.source


def test_the_first_slot_is_parsed_field_by_field():
    d = dimms.parse_type17((SMBIOS / "epyc-7763-2s-full" / "17-0" / "raw").read_bytes())
    assert (d.locator, d.bank, d.size_mib, d.memory_type) == ("DIMM 0", "P0 CHANNEL A", 65536,
                                                              "DDR4")
    assert (d.rated_mts, d.configured_mts, d.rank) == (3200, 3200, 2)
    empty = dimms.parse_type17((SMBIOS / "epyc-7763-2s-full" / "17-1" / "raw").read_bytes())
    assert empty.locator == "DIMM 1" and not empty.populated


def test_a_missing_dimm_is_a_missing_channel_and_a_lower_ceiling():
    c = ceiling("epyc-7763-2s-one-missing", MILAN)
    assert c.gbs == pytest.approx(15 * 25.6)
    [f] = c.findings
    assert "socket 1: 7 of its 8 memory channels" in f and "88%" in f


def test_twelve_ddr5_channels_a_socket_on_genoa():
    c = ceiling("epyc-9654-2s-genoa", "AMD EPYC 9654 96-Core Processor")
    assert c.gbs == pytest.approx(2 * 12 * 4800 * 8 / 1000)
    assert c.findings == ()
    assert [len(s.channels) for s in c.sockets] == [12, 12]


def test_mixed_speed_dimms_run_at_the_slowest_and_are_findings():
    c = ceiling("xeon-8380-2s-mixed-speed", ICELAKE)
    assert c.gbs == pytest.approx(16 * 2933 * 8 / 1000)
    text = "\n".join(c.findings)
    assert "mixed rated speed (2933, 3200 MT/s)" in text
    assert "8 DIMM(s) configured below their rated speed" in text and "2933 of 3200" in text
    assert "channels populated" not in text  # every channel has its DIMM


@pytest.mark.parametrize("tree,why", [
    ("no-such-tree", "no SMBIOS tables"),
    ("qemu-guest", "no configured speed"),
    ("hpe-numbered-slots", "do not say socket and channel (\"PROC 1 DIMM 1\")"),
])
def test_an_unknown_ceiling_says_why_and_guesses_nothing(tree, why):
    c = ceiling(tree, MILAN)
    assert c.gbs is None and why in c.source and c.sockets == ()


@pytest.mark.parametrize("name,expected", [
    ("AMD EPYC 7742 64-Core Processor", 8),
    ("AMD EPYC 9755 128-Core Processor", 12),
    ("AMD EPYC 8534P 64-Core Processor", 6),
    ("Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz", 6),
    ("Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz", 6),
    ("Intel(R) Xeon(R) Platinum 8480+", 8),
    ("Intel(R) Xeon(R) Platinum 8380H CPU @ 2.90GHz", 6),
    ("Intel(R) Xeon(R) 6980P", 12),
    ("AMD EPYC", None),  # a VM's masked name
    ("AMD Ryzen 9 7950X 16-Core Processor", None),
])
def test_channels_per_socket_from_the_model_name(name, expected):
    assert dimms.channels_per_socket(name) == expected


@pytest.mark.parametrize("bank,locator,where", [
    ("P0 CHANNEL A", "DIMM 0", ("0", "A")),
    ("", "P2-DIMMK1", ("2", "K")),
    ("NODE 1", "CPU1_DIMM_H2", ("1", "H")),
    ("BANK 0", "DIMM_P1_C0", ("1", "C")),
    ("", "PROC 1 DIMM 3", None),
    ("", "A7", None),
])
def test_slot_names_give_socket_and_channel_or_nothing(bank, locator, where):
    d = dimms.Dimm(locator, bank, 32768, "DDR4", 3200, 3200)
    assert dimms.channel_of(d) == where


def test_bytes_that_are_not_a_memory_device_are_refused():
    assert dimms.parse_type17(b"") is None
    assert dimms.parse_type17(bytes([16, 0x17]) + bytes(0x20)) is None  # type 16
    assert dimms.parse_type17(bytes([17, 0x5C]) + bytes(10)) is None  # cut short


def _memory_run(ceil: dimms.Ceiling, triad_gbs: float):
    from hpcprobe.results.model import Metric, Run

    params = {"kernel": "triad", "stores": "regular", "threads": 128, "placement": "spread",
              "cpus": "0-127", "level": "DRAM", "phase": "stream", "size_bytes": 1 << 33}
    m = Metric("memory", "bandwidth", "GB/s", params,
               [triad_gbs * 0.99, triad_gbs, triad_gbs * 1.01])
    return Run("r1", "2026-11-27T00:00:00+00:00", "n1", "default", ["memory"],
               {"dram_ceiling": ceil.to_dict()}, {}, [m])


def test_the_header_states_the_ceiling_or_why_not_and_the_dimms_findings():
    missing = ceiling("epyc-7763-2s-one-missing", MILAN).to_dict()
    head, finding = dimms.line(missing)
    assert head == ("DRAM ceiling: 384.0 GB/s = 8 ch x 3200 MT/s x 8 B + 7 ch x 3200 MT/s x 8 B "
                    "(SMBIOS type 17)")
    assert finding.startswith("  memory: socket 1: 7 of its 8")
    [vm] = dimms.line(ceiling("no-such-tree", MILAN).to_dict())
    assert vm.startswith("DRAM ceiling unknown: no SMBIOS tables")
    assert dimms.line(None) == [] and dimms.line({}) == []


def test_the_dram_triad_is_shown_as_a_share_of_the_ceiling():
    from hpcprobe.families.memory.views import tables

    full = ceiling("epyc-7763-2s-full", MILAN)
    [line] = tables(_memory_run(full, 290.0))[-1].lines
    assert "DRAM triad on 128 thread(s), regular stores: 290.0 GB/s = 70.8 % of the DRAM " \
           "ceiling 409.6 GB/s" == line
    [above] = tables(_memory_run(full, 420.0))[-1].lines
    assert "ABOVE it" in above
    [vm] = tables(_memory_run(ceiling("qemu-guest", MILAN), 30.0))[-1].lines
    assert "no DRAM ceiling to judge it by: the firmware gives no configured speed" in vm


def test_the_memory_controllers_that_see_every_dimm_add_nothing_but_their_report():
    c = ceiling("epyc-7763-2s-full", MILAN, "epyc-7763-2s-full")
    assert c.gbs == pytest.approx(409.6) and c.findings == ()
    assert c.edac == {"driver": "F19h", "modules": 32, "ranks": True, "channels": 16, "ce": 0,
                      "ue": 0, "errors": {}}


def test_a_channel_the_firmware_lists_and_the_controllers_do_not_see_is_a_finding():
    [f] = ceiling("epyc-7763-2s-full", MILAN, "epyc-7763-2s-one-unseen").findings
    assert f.startswith("the memory controllers see 15 populated channel(s), the firmware "
                        "lists 16")


def test_corrected_errors_name_the_dimm_that_makes_them():
    [f] = ceiling("epyc-7763-2s-full", MILAN, "epyc-7763-2s-correcting").findings
    assert f.startswith("1234 corrected memory error(s)") and "mc#1csrow#0channel#3: 1234" in f
    assert ceiling("epyc-7763-2s-full", MILAN, "epyc-7763-2s-correcting").edac["ce"] == 1234


def test_uncorrected_errors_come_first_and_name_their_dimm():
    c = ceiling("xeon-8380-2s-mixed-speed", ICELAKE, "xeon-8380-2s-uncorrected")
    text = "\n".join(c.findings)
    assert "2 uncorrected memory error(s)" in text and "CPU_SrcID#1_MC#2_Chan#1_DIMM#0: 2" in text
    assert "corrected memory error(s)" not in text.replace("uncorrected", "")
    assert c.edac is not None and c.edac["channels"] == 16 and c.edac["ranks"] is False


def test_the_controllers_report_where_the_firmware_hides_the_dimms():
    """No SMBIOS (or no root) but EDAC: the DIMMs counted, still no ceiling (no speeds)."""
    c = ceiling("no-such-tree", ICELAKE, "xeon-8380-2s-uncorrected")
    assert c.gbs is None and c.source.startswith("no SMBIOS tables")
    assert any(f.startswith("the memory controllers (Intel_10nm Socket#0 IMC#0, ") and
               "see 16 DIMM(s) in 16 channel(s), 512 GiB; EDAC gives no speeds" in f
               for f in c.findings)
