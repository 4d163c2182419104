"""Provenance readings."""

from conftest import DATA
from hpcprobe import native
from hpcprobe.machine import provenance, sysinfo, topology


def test_bracketed_choice():
    assert sysinfo.bracketed("always [madvise] never") == "madvise"
    assert sysinfo.bracketed("performance") == "performance"
    assert sysinfo.bracketed(None) is None


def test_environment_keeps_only_relevant_variables():
    env = {"OMP_NUM_THREADS": "4", "OMPI_MCA_btl": "self", "HOME": "/root", "PATH": "/bin",
           "I_MPI_PIN": "1", "OPENBLAS_NUM_THREADS": "1"}
    assert provenance.environment(env) == {"I_MPI_PIN": "1", "OMPI_MCA_btl": "self",
                                           "OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "1"}


def test_collect_records_build_and_system():
    topo = topology.load_xml(DATA / "xeon-2s-26c-smt.xml")
    p = provenance.collect(topo, "scalar")
    assert p["smt"] == 2 and p["numa_nodes"] == 2 and p["isa"] == "scalar"
    assert p["compiler"] == native.build_info() and "flags:" in p["compiler"]
    assert p["isa_supported"][0] == "scalar"
