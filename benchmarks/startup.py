#!/usr/bin/env python3
"""What starting hpcprobe costs a node: wall time and the files it opens (strace), for the
commands a fleet runs on every node at every job start (`--version`, `check --state-only`),
for one that loads every family (`run --help`), and for the node image's archive (`make pyz`,
run as `python -I`). Files under /sys, /proc and /dev are counted apart (they are the node's
state, not the install); a file opened twice counts once; a path that was not there (ENOENT:
the import system's probing) is not an open. The interpreter alone (`python -c pass`) is
printed first for scale.

Each command runs `--rounds` times in turn with the others (the median wall time is printed);
strace runs once per command, apart from the timed rounds.

Usage: benchmarks/startup.py [--rounds 5]
Issue 64's targets here: `--version` at most 0.2 s, `check --state-only` at most 150 files
(the archive's: the installed package opens each of its modules' files).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODE_STATE = ("/sys/", "/proc/", "/dev/")


def commands(tmp: Path) -> dict[str, list[str]]:
    exe = shutil.which("hpcprobe", path=str(Path(sys.executable).parent)) or "hpcprobe"
    pyz = [sys.executable, "-I", str(tmp / "image" / "hpcprobe.pyz")]
    check = ["check", "--state-only", "--no-store", "--counters", str(tmp / "counters.json")]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "hpcprobe --version": [exe, "--version"],
        "hpcprobe check --state-only": [exe, *check],
        "hpcprobe run --help": [exe, "run", "--help"],
        "hpcprobe.pyz --version": [*pyz, "--version"],
        "hpcprobe.pyz check --state-only": [*pyz, *check],
    }


def opened(argv: list[str], tmp: Path) -> tuple[int, int]:
    """(files of the install and the interpreter, files of the node's state) `argv` opened."""
    log = tmp / "strace.txt"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(log), *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    paths = set()
    for line in log.read_text().splitlines():
        m = re.search(r'open(?:at)?\((?:[^,]+, )?"([^"]+)".*\) = (-?\d+)', line)
        if m and int(m.group(2)) >= 0:
            paths.add(m.group(1))
    state = {p for p in paths if p.startswith(NODE_STATE)}
    return len(paths - state), len(state)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if shutil.which("strace") is None:
        print("strace is not installed (apt-get install strace)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        # the node image's archive (make pyz), made from this install
        subprocess.run([sys.executable, str(Path(__file__).resolve().parent.parent / "scripts" /
                                            "pyz.py"), str(tmp / "image")],
                       stdout=subprocess.DEVNULL, check=True)
        cmds = commands(tmp)
        took: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(a.rounds):
            for name, argv in cmds.items():
                t = time.perf_counter()
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=False)
                took[name].append(time.perf_counter() - t)
        print(f"{'command':<30} {'median s':>9} {'files':>6} {'/sys /proc /dev':>16}")
        for name, argv in cmds.items():
            files, state = opened(argv, tmp)
            print(f"{name:<30} {statistics.median(took[name]):>9.3f} {files:>6} {state:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
