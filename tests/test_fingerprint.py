"""The configuration fingerprint of a run, and what differs between runs."""

from conftest import DATA
from hpcprobe.analysis import fingerprint
from hpcprobe.machine import provenance, topology
from hpcprobe.results import model as results


def test_fingerprint_labels_the_settings_that_decide_results():
    run = results.read_json(DATA / "compare" / "nps4.json")
    fp = fingerprint.fingerprint(run)
    assert fp["NUMA domains per socket"] == "4"
    assert fp["env OMP_PROC_BIND"] == "close"
    assert fp["THP"] == run.provenance["thp"]
    assert set(fp) >= {"SMT", "L3 as NUMA", "governor", "tuned profile", "kernel", "BIOS", "MPI",
                       "BLAS", "compiler"}


def test_old_runs_read_as_not_recorded():
    run = results.read_json(DATA / "compare" / "nps1.json")
    for key in ("dmi", "tuned_profile", "blas", "l3_as_numa"):
        run.provenance.pop(key, None)
    fp = fingerprint.fingerprint(run)
    assert fp["BIOS"] == "n/a" and fp["tuned profile"] == "n/a" and fp["L3 as NUMA"] == "n/a"


def test_differences_list_only_what_differs():
    a = results.read_json(DATA / "compare" / "nps1.json")
    b = results.read_json(DATA / "compare" / "nps4.json")
    assert fingerprint.differences([a, b]) == [("NUMA domains per socket", ["1", "4"]),
                                               ("env OMP_PROC_BIND", ["n/a", "close"])]
    assert fingerprint.differences([a, a]) == []


def test_nps_and_l3_as_numa_from_recorded_machines():
    nps4 = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    assert provenance.numa_per_package(nps4) == 4
    assert provenance.l3_as_numa(nps4) is False  # 4 L3 domains per NUMA domain
    laptop = topology.load_xml(DATA / "laptop-8c.xml")
    assert provenance.numa_per_package(laptop) == 1 and not provenance.l3_as_numa(laptop)


def test_dmi_reads_what_is_readable(tmp_path):
    (tmp_path / "bios_vendor").write_text("AMI\n")
    (tmp_path / "product_name").write_text("<Server> & co\n")
    assert provenance.dmi(str(tmp_path)) == {"bios_vendor": "AMI",
                                             "product_name": "<Server> & co"}


def test_runs_of_other_kernels_differ_even_at_the_same_version():
    a = results.read_json(DATA / "compare" / "nps1.json")
    b = results.read_json(DATA / "compare" / "nps1.json")
    a.provenance["kernels"], b.provenance["kernels"] = "7daef8c4a820", "0f3e2a91bc47"
    assert a.provenance["hpcprobe_version"] == b.provenance["hpcprobe_version"]
    assert fingerprint.differences([a, b]) == [("kernels", ["7daef8c4a820", "0f3e2a91bc47"])]
    del a.provenance["kernels"]  # stored before the digest was: not known, so not the same
    assert fingerprint.differences([a, b]) == [("kernels", ["n/a", "0f3e2a91bc47"])]


def test_an_mpi_whose_protocol_thresholds_moved_differs():
    """An MCA parameter file changed between runs: the same MPI, a larger eager limit."""
    a = results.read_json(DATA / "compare" / "nps1.json")
    b = results.read_json(DATA / "compare" / "nps1.json")
    mpi = {"implementation": "Open MPI", "version": "4.1.4", "prefix": "/usr"}
    a.provenance["mpi"] = {**mpi, "thresholds": {"OMPI_MCA_btl_vader_eager_limit": 4096,
                                                 "OMPI_MCA_btl_tcp_eager_limit": 65536}}
    b.provenance["mpi"] = {**mpi, "thresholds": {"OMPI_MCA_btl_vader_eager_limit": 32768,
                                                 "OMPI_MCA_btl_tcp_eager_limit": 65536}}
    assert fingerprint.differences([a, b]) == [("MPI thresholds", [
        "OMPI_MCA_btl_tcp_eager_limit 65536, OMPI_MCA_btl_vader_eager_limit 4096",
        "OMPI_MCA_btl_tcp_eager_limit 65536, OMPI_MCA_btl_vader_eager_limit 32768"])]
    del a.provenance["mpi"]["thresholds"]  # stored before they were read: not known
    assert fingerprint.fingerprint(a)["MPI thresholds"] == "n/a"
