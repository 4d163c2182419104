"""The native core driven from C alone, compiled against the installed library and hpb.h."""

import shutil
import subprocess
from pathlib import Path

import pytest

import hpcprobe.native

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_core_from_c(tmp_path):
    libdir = Path(hpcprobe.native.__file__).parent
    exe = tmp_path / "core_test"
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-I", str(ROOT / "native/include"),
                    str(ROOT / "tests/native/core_test.c"), "-L", str(libdir),
                    "-l:libhpcprobe_native.so", f"-Wl,-rpath,{libdir}", "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("0 failed")
