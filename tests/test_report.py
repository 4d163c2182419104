"""The HTML report: self-contained, escaped, one figure per kind of data, PNGs on request,
nothing written half; rendered for real in headless Chromium (no console errors, a non-blank
page), with a broken figure as the control that the check can fail."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
from html import escape
from pathlib import Path

import pytest
from matplotlib import image

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe import native, registry
from hpcprobe.analysis import compare
from hpcprobe.families.compute.bench import ComputeOptions
from hpcprobe.families.frequency.bench import FrequencyOptions
from hpcprobe.families.latency.bench import LatencyOptions
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.results import model as results
from hpcprobe.views import html as report

#: what the report is built from: the families' views and figures, the params not joined
REG = (registry.views(), registry.figures(), registry.not_joined())

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> results.Run:
    """A small real run with memory, latency, frequency and compute figures."""
    from hpcprobe.machine import topology

    topo = topology.load_xml(DATA / "tiny-2c.xml")
    isa = native.best_isa()
    run = registry.execute(
        topo, profiles.get("quick"), ["memory", "latency", "frequency", "compute"], isa,
        {"memory": MemoryOptions(kernels=("triad",), stores=("regular",), threads=(1,),
                                 size_bytes=256 << 10),
         "latency": LatencyOptions(size_bytes=64 << 10, pages="default"),
         "frequency": FrequencyOptions(threads=(1,), loads=(isa,)),
         "compute": ComputeOptions(isa=isa, precisions=("dp",), threads=(1,))}, NoProgress(),
        tag="<script>alert('tag')</script>")
    assert not run.errors
    return run


def images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"',
                                                    html)]


def non_blank(png: bytes) -> bool:
    px = image.imread(io.BytesIO(png), format="png")
    return float(px.std()) > 0.01


def test_report_of_one_run_is_self_contained_and_escaped(measured):
    html, pngs = report.build([measured], *REG)
    assert "<script>alert(" not in html and "&lt;script&gt;alert(" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    assert {slug for slug, _ in pngs} >= {"latency-sweep", "clock-curve"}
    assert len(images(html)) == len(pngs) and all(non_blank(p) for p in images(html))
    assert "Configuration" in html and "Topology" in html
    assert "Node sentinel (DRAM triad on CPUs" in html  # the run's first and last readings


def test_two_runs_are_overlaid_and_compared(measured):
    other = results.Run.from_dict(measured.to_dict())
    other.run_id, other.tag = "f" * 12, "second"
    html, _ = report.build([measured, other], *REG)
    assert "Comparison against" in html and "~" in html
    assert "(interrupted" not in html
    # a run stopped by a signal is marked where it is listed and where its results begin
    other.provenance = {**other.provenance,
                        "interrupted": {"benchmark": "compute", "not_run": []}}
    html, _ = report.build([measured, other], *REG)
    assert "<td>memory,latency,frequency,compute (interrupted)</td>" in html
    assert "<h2>Run second (interrupted during compute)</h2>" in html
    # what the terminal's comparison says of its runs, the report says too
    other.provenance = {**other.provenance, "steal_percent": {"memory": 2.5, "latency": 0.2}}
    html, _ = report.build([measured, other], *REG)
    label = compare.label(other)
    assert (f'<p class="warn">Run {escape(label)} was interrupted during compute: the figures it '
            "would have measured from there on are missing from it.</p>") in html
    assert (f'<p class="warn">Run {escape(label)}: the hypervisor took CPU time while memory ran '
            "(2.5 %) (steal time): those figures carry the host&#x27;s load too.</p>") in html


def test_cli_report_with_pngs_and_an_unwritable_path(tmp_path):
    out, pngs = tmp_path / "r.html", tmp_path / "png"
    r = hpcprobe("report", str(DATA / "compare" / "nps1.json"), str(DATA / "compare" /
                                                                      "nps4.json"),
                 "-o", str(out), "--png", str(pngs))
    assert r.code == 0, r.err
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert (out.stat().st_mode & 0o777) == 0o666 & ~_umask()
    blocked = tmp_path / "ro"
    blocked.mkdir()
    blocked.chmod(0o500)
    if os.access(blocked, os.W_OK):
        pytest.skip("running as a user who can write anywhere (root)")
    assert_user_error(hpcprobe("report", str(DATA / "compare" / "nps1.json"), "-o",
                               str(blocked / "r.html")), "not writable")
    assert not list(blocked.iterdir())


def test_a_report_on_standard_output_is_the_page_alone():
    r = hpcprobe("report", str(DATA / "compare" / "nps1.json"), "-o", "-")
    assert r.code == 0, r.err
    assert r.out.startswith("<!DOCTYPE html>") and r.out.rstrip().endswith("</html>")
    assert "Wrote - (" in r.err
    r = hpcprobe("run", "latency", "--size", "64KiB", "--pages", "default", "--quick",
                 "--details",
                 "--no-store", "--report", "-")
    assert r.code == 0, r.err
    assert r.out.startswith("<!DOCTYPE html>") and r.out.rstrip().endswith("</html>")
    assert "Memory latency" in r.err and "Wrote the report - (" in r.err


def test_two_documents_on_standard_output_are_refused_before_any_work(tmp_path):
    """Each would write there, and the two would run together: one clear line, nothing run."""
    db = tmp_path / "r.sqlite"
    r = hpcprobe("run", "latency", "--quick", "--db", str(db), "--json", "-", "--report", "-")
    assert_user_error(r, "--json and --report", "standard output")
    assert not db.exists()
    r = hpcprobe("cluster", "report", "c1", "--db", str(db), "--json", "-o", "-")
    assert_user_error(r, "--json and -o", "standard output")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_missing_directory_is_refused_before_any_work(tmp_path):
    assert_user_error(hpcprobe("report", str(DATA / "compare" / "nps1.json"), "-o",
                               str(tmp_path / "no" / "such" / "r.html")), "not writable")


def test_one_run_named_twice_is_refused(tmp_path):
    run = str(DATA / "compare" / "nps1.json")
    out = tmp_path / "r.html"
    assert_user_error(hpcprobe("report", run, run, "-o", str(out)), "are the same run")
    assert not out.exists()


def test_run_writes_its_report_and_says_how_to_make_one(tmp_path):
    out = tmp_path / "run.html"
    r = hpcprobe("run", "latency", "--size", "64KiB", "--pages", "default", "--quick",
                 "--details",
                 "--no-store", "--report", str(out))
    assert r.code == 0, r.err
    assert "Wrote the report" in r.out and out.read_text().count('class="plot"') >= 1
    r = hpcprobe("run", "latency", "--size", "64KiB", "--pages", "default", "--quick",
                 "--details",
                 "--db", str(tmp_path / "r.sqlite"))
    assert "hpcprobe report" in r.out


def chromium(html_file: Path, shot: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--window-size=1300,6000", f"--screenshot={shot}", html_file.as_uri()],
        capture_output=True, text=True, timeout=120)


def console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium: make setup installs Debian's "
                                             "chromium as root")
def test_rendered_in_headless_chromium(measured, tmp_path):
    page, shot = tmp_path / "report.html", tmp_path / "shot.png"
    report.write([measured], page, *REG)
    p = chromium(page, shot)
    assert p.returncode == 0, p.stderr[-2000:]
    assert console_errors(p.stderr) == []
    assert non_blank(shot.read_bytes())
    # the control: a figure that does not decode is reported on the console
    broken = page.read_text().replace("base64,iVBOR", "base64,AAAA", 1)
    page.write_text(broken)
    p = chromium(page, shot)
    assert any("plot not drawn" in ln for ln in console_errors(p.stderr)), p.stderr[-2000:]


def test_report_from_json_of_the_schema(tmp_path, measured):
    path = tmp_path / "m.json"
    results.write_json(measured, path)
    doc = json.loads(path.read_text())
    assert doc["tag"].startswith("<script>")  # stored as given, escaped only in HTML
    html, _ = report.build([results.read_json(path)], *REG)
    assert "&lt;script&gt;" in html


def test_the_report_shows_every_table_the_terminal_shows(measured):
    """One view definition, two renderings: every table title and every cell of the run's
    views is in the HTML page."""
    from html import escape

    from hpcprobe.viewkit.table import Table

    page, _ = report.build([measured], *REG)
    tables = [b for view in registry.views() for b in view(measured) if isinstance(b, Table)]
    assert len(tables) >= 4  # memory, latency, frequency and compute each show one at least
    for t in tables:
        assert escape(t.title) in page
        assert all(escape(c) in page for row in t.rows for c in row)
