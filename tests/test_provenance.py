"""Provenance readings."""

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import DATA
from hpcprobe import native
from hpcprobe.machine import provenance, sysinfo, topology

ROOT = Path(__file__).resolve().parents[1]


def test_bracketed_choice():
    assert sysinfo.bracketed("always [madvise] never") == "madvise"
    assert sysinfo.bracketed("performance") == "performance"
    assert sysinfo.bracketed(None) is None


def test_environment_keeps_only_relevant_variables():
    env = {"OMP_NUM_THREADS": "4", "OMPI_MCA_btl": "self", "HOME": "/root", "PATH": "/bin",
           "I_MPI_PIN": "1", "OPENBLAS_NUM_THREADS": "1"}
    assert provenance.environment(env) == {"I_MPI_PIN": "1", "OMPI_MCA_btl": "self",
                                           "OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "1"}


def test_no_secret_is_recorded_in_the_environment():
    env = provenance.environment({
        "HPCPROBE_DB": "postgresql://fleet:s3cr3t@db.example:5432/hpcprobe",
        "HPCPROBE_API_TOKEN": "abc", "UCX_TLS": "rc", "PGPASSWORD": "x",
        "OMPI_MCA_x": "see https://u:pw@host/ and http://host/"})
    assert env == {"HPCPROBE_DB": "postgresql://fleet:***@db.example:5432/hpcprobe",
                   "HPCPROBE_API_TOKEN": "***", "UCX_TLS": "rc",
                   "OMPI_MCA_x": "see https://u:***@host/ and http://host/"}
    assert "s3cr3t" not in repr(env)


@pytest.mark.usefixtures("toy_family")
def test_a_runs_document_and_store_hold_no_password_and_are_private(tmp_path, monkeypatch):
    """A password in HPCPROBE_DB (the store a fleet writes to) reaches neither the document
    nor the store; both are readable by their owner and group only."""
    import os
    import stat

    from hpcprobe import cli

    monkeypatch.setenv("HPCPROBE_DB", str(tmp_path / "s.sqlite"))
    monkeypatch.setenv("HPCPROBE_X_URL", "postgresql://fleet:s3cr3t@127.0.0.1:1/x")
    assert cli.main(["run", "toy", "--json", str(tmp_path / "run.json")]) == 0
    for f in (tmp_path / "run.json", tmp_path / "s.sqlite"):
        assert b"s3cr3t" not in f.read_bytes() and b"fleet:***@" in f.read_bytes(), f
        assert stat.S_IMODE(f.stat().st_mode) & 0o007 == 0, oct(f.stat().st_mode)
    assert os.environ["HPCPROBE_X_URL"].endswith("@127.0.0.1:1/x")


def test_collect_records_build_and_system():
    topo = topology.load_xml(DATA / "xeon-2s-26c-smt.xml")
    p = provenance.collect(topo, "scalar")
    assert p["smt"] == 2 and p["numa_nodes"] == 2 and p["isa"] == "scalar"
    assert p["compiler"] == native.build_info() and "flags:" in p["compiler"]
    assert p["isa_supported"][0] == "scalar"


def test_the_node_record_reads_back_by_attribute_and_an_older_run_reads_none():
    """What collect records is the node record as stored: read back by attribute it is equal;
    a run of an older version that lacks a field reads None there, never a guess."""
    from hpcprobe.results import node
    from hpcprobe.results.model import schema

    topo = topology.load_xml(DATA / "xeon-2s-26c-smt.xml")
    kept = provenance.node(topo, "scalar")
    again = node.Node.of(provenance.collect(topo, "scalar"))
    assert again == kept and again.smt == 2 and again.isa == "scalar"
    assert again.cpu_flags == kept.cpu_flags and isinstance(again.isa_supported, tuple)
    old = node.Node.of({"host": "n1", "cpu_model": "AMD EPYC 7763", "kernel": "Linux 5.14"})
    assert old.cpu_model == "AMD EPYC 7763" and old.governor is None and old.dmi is None
    part = schema()["properties"]["provenance"]
    assert set(node.REQUIRED) == set(part["required"]) and set(node.SCHEMA) <= set(
        part["properties"])


def _digest(root: Path, files: list[str]) -> str:
    """The kernels' digest as CMakeLists.txt computes it: each file's SHA-256 after its path,
    a line each in path order, and the first 12 hex digits of that manifest's SHA-256."""
    manifest = "".join(f"{f} {hashlib.sha256((root / f).read_bytes()).hexdigest()}\n"
                       for f in sorted(files))
    return hashlib.sha256(manifest.encode()).hexdigest()[:12]


def _measured(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in (root / "native").rglob("*")
            if p.suffix in (".c", ".h", ".cu")] + ["CMakeLists.txt"]


def test_runs_record_the_digest_of_the_sources_they_were_built_from():
    """The installed core says which sources it was built from: those of this checkout (`make
    test` installs it first), every measurement source counted, the MPI and GPU programs too."""
    files = _measured(ROOT)
    assert {"native/mpi/hpb_mpi.c", "native/cuda/hpb_gpu.cu", "native/src/peak.c"} <= set(files)
    assert native.source_id() == _digest(ROOT, files), \
        "the installed core was built from other sources: reinstall it (make setup)"
    p = provenance.collect(topology.load_xml(DATA / "laptop-8c.xml"), "scalar")
    assert p["kernels"] == native.source_id()


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("make")), reason="no cmake")
def test_a_changed_source_changes_the_digest_in_a_kept_build_folder(tmp_path):
    """The wheel's build folder is kept between installs: an edited kernel must re-run the
    step that computes the digest, or the new build would carry the old one."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "native", src / "native")
    shutil.copy(ROOT / "CMakeLists.txt", src)
    build = tmp_path / "build"

    def said(*cmd: str) -> str:
        """The digest the configure step printed ("" where it did not run)."""
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        return "".join(re.findall(r"hpcprobe kernels: ([0-9a-f]{12})", out)[-1:])

    first = said("cmake", "-G", "Unix Makefiles", "-S", str(src), "-B", str(build))
    assert first == native.source_id()
    peak = src / "native/src/peak.c"
    peak.write_text(peak.read_text() + "\n/* another kernel */\n")
    # the check every build starts with: it re-runs the configure step when a file it read
    # has changed
    again = said("make", "-C", str(build), "cmake_check_build_system")
    assert again == _digest(src, _measured(src)) != first


def test_an_applications_command_and_environment_hold_no_secret(tmp_path):
    from conftest import hpcprobe

    out = tmp_path / "app.json"
    r = hpcprobe("app", "calc", "--fom", r"value = ([0-9.]+)", "--repeat", "1", "--no-store",
                 "--json", str(out), "--env", "API_TOKEN=t0k3n", "--env", "U=https://u:pw@h/",
                 "--", "sh", "-c", "echo value = 1 # https://me:s3cr3t@host/x")
    assert r.code == 0, r.err
    kept = out.read_text()
    assert "s3cr3t" not in kept and "t0k3n" not in kept and "u:pw@" not in kept
    assert "https://me:***@host/x" in kept and "https://u:***@h/" in kept


def test_a_node_fact_is_declared_once_and_every_reader_walks_it(tmp_path, monkeypatch):
    """A fact in machine/facts.FACTS reaches the provenance, the run header, the node's state
    that `check` compares, and the recorded-/sys replay (`check --sysfs`), none naming it."""
    from dataclasses import replace

    from hpcprobe.analysis import health
    from hpcprobe.commands import check
    from hpcprobe.machine import facts
    from hpcprobe.results.model import Run
    from hpcprobe.views import terminal

    (tmp_path / "fans").write_text("6\n")

    def fans(cpu_model: str, sysfs: Path) -> dict[str, int]:
        got = sysfs / "fans"
        return {"count": int(got.read_text()) if got.exists() else 0}

    toy = facts.Fact("fans", fans, lambda s: [f"Fans: {s['count']}"] if s else [],
                     lambda s: {"fans": str(s["count"])})
    monkeypatch.setattr(facts, "FACTS", (*facts.FACTS, toy))
    topo = topology.discover()
    p = provenance.collect(topo, native.best_isa())
    assert p["fans"] == {"count": 0} and "links" in p and "dram_ceiling" in p
    run = Run("r1", "2026-01-01T00:00:00+00:00", "n1", "check", [], p, topo.to_dict())
    check.recorded_sysfs(run, tmp_path)  # a copy of another node's /sys
    assert run.provenance["fans"] == {"count": 6}
    assert "\nFans: 6" in terminal._header(run)
    assert health.state_of(run)["fans"] == "6"
    assert "fans" not in health.state_of(replace(run, provenance={}))  # an older run's
