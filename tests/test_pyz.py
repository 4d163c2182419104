"""The node image's check in one file (`make pyz`, scripts/pyz.py): made from this install, it
checks the node's state with the standard library alone (`python -I -S`: no site-packages, so
hpcprobe can only come from the archive), gives the installed copy's verdict and version, runs
the other commands with the environment's interpreter, and says in one line what an
interpreter without hpcprobe's packages lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import hpcprobe
from test_check import fake_sys, write_reference

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "pyz.py"


def make_image(out: Path) -> Path:
    """The node image's directory made at `out` from this install (make pyz)."""
    r = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"python3 -I {out / 'hpcprobe.pyz'} check --state-only" in r.stdout
    return out


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_image(tmp_path_factory.mktemp("image") / "hpcprobe")


def bare(image: Path, *args: str, interpreter: tuple[str, ...] = (sys.executable, "-I", "-S")
         ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HPCPROBE_NATIVE_LIB"}
    return subprocess.run([*interpreter, str(image / "hpcprobe.pyz"), *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_image_holds_the_archive_the_native_core_and_the_release(image):
    assert image.stat().st_mode & 0o777 == 0o755  # the image's users run it too
    assert sorted(p.name for p in image.iterdir()) == [
        "hpcprobe-" + hpcprobe("--version").out.split()[1] + ".dist-info", "hpcprobe.pyz",
        "libhpcprobe_native.so"]
    # the same release and kernels as the installed copy, from the archive beside them
    assert bare(image, "--version").stdout == hpcprobe("--version").out


def test_the_state_only_check_needs_the_standard_library_alone(image, tmp_path):
    sysfs = fake_sys(tmp_path / "sys")
    ref = write_reference(tmp_path / "ref.toml", sysfs)
    args = ("check", "--state-only", "--no-store", "--sysfs", str(sysfs), "--against",
            str(ref))
    ok = bare(image, *args, "--counters", str(tmp_path / "a.json"), "--json",
              str(tmp_path / "a.out"))
    assert ok.returncode == 0 and ok.stdout.startswith("PASS"), ok.stdout + ok.stderr
    fake_sys(sysfs, state="1: DOWN")
    down = bare(image, *args, "--counters", str(tmp_path / "b.json"), "--json",
                str(tmp_path / "b.out"))
    installed = hpcprobe(*args, "--counters", str(tmp_path / "c.json"), "--json",
                         str(tmp_path / "c.out"))
    assert down.returncode == installed.code == 1, down.stderr
    got, want = (json.loads((tmp_path / f).read_text()) for f in ("b.out", "c.out"))
    assert got["status"] == want["status"] == "fail"
    assert got["reasons"] == want["reasons"] and "DOWN" in " ".join(got["reasons"])


def test_a_command_that_measures_runs_with_the_environments_interpreter(image):
    r = bare(image, "topology", interpreter=(sys.executable,))
    assert r.returncode == 0, r.stderr
    assert r.stdout == hpcprobe("topology").out


def test_without_hpcprobes_packages_a_command_says_so_in_one_line(image):
    r = bare(image, "run", "--help")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    [line] = r.stderr.splitlines()
    assert "No module named" in line and "run the archive with the interpreter" in line


def test_an_editable_install_is_refused(tmp_path):
    # the checkout's sources on the path: what an editable install imports
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parent.parent / "src"))
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1 and "installed from its sources" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_of_other_files_is_never_replaced(tmp_path):
    kept = tmp_path / "opt" / "other"
    kept.parent.mkdir()
    kept.write_text("someone's\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "opt")
    for where, says in ((tmp_path / "opt", "holds other files"), (kept, "not a directory"),
                        (link, "not a directory")):
        r = subprocess.run([sys.executable, str(SCRIPT), str(where)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert kept.read_text() == "someone's\n"
