"""The set-up contract's offline path: `make setup WHEELHOUSE=DIR` installs from DIR alone, and
scripts/wheelhouse.sh and scripts/gpu-verify.sh refuse bad arguments in one line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_setup_from_a_wheelhouse_asks_no_index(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    out = subprocess.run(["make", "-n", "setup", f"VENV={venv}", "WHEELHOUSE=wh",
                          "VENV_FLAGS=--system-site-packages"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"-m venv --system-site-packages {venv}" in out
    assert f"--no-index --find-links {ROOT / 'wh'} \".[test]\"" in out
    assert "--upgrade pip" not in out  # pip cannot upgrade itself without an index


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_setup_with_network_upgrades_pip_and_uses_the_index(tmp_path: Path) -> None:
    out = subprocess.run(["make", "-n", "setup", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "--upgrade pip" in out
    assert "--no-index" not in out


@pytest.mark.parametrize("args", [[], ["w", "twelve"], ["w", "3.12", "glibc"],
                                  ["w", "3.12", "2.28", "extra"]])
def test_wheelhouse_refuses_bad_arguments(args: list[str], tmp_path: Path) -> None:
    r = subprocess.run([str(ROOT / "scripts" / "wheelhouse.sh"), *args], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w").exists()  # nothing made before the arguments were checked


@pytest.mark.parametrize("args", [[], [""], ["out", "wh", "extra"]])
def test_gpu_verify_refuses_bad_arguments(args: list[str], tmp_path: Path) -> None:
    r = subprocess.run([str(ROOT / "scripts" / "gpu-verify.sh"), *args], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: scripts/gpu-verify.sh OUT")
    assert list(tmp_path.iterdir()) == []  # nothing made, nothing run
