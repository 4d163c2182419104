"""What the side-by-side benchmark scripts share: the tool check, the alternating order within a
round, and the within-round ratio statistics (imported by the scripts next to this file)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hpcprobe import tools


def missing(tool: str) -> bool:
    """Say so and return True when the registered tool is not installed."""
    if tools.get(tool).find():
        return False
    print(f"{tool} not found: install Debian's {tools.get(tool).package} (make setup does, "
          "as root)")
    return True


def in_turn(first: str, second: str, k: int) -> tuple[str, str]:
    """The two tools of round/configuration k in alternating order, so neither always runs on a
    warmer (or cooler) machine."""
    return (first, second) if k % 2 == 0 else (second, first)


def round_ratios(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float, float]:
    """Median, lowest and highest of the within-round ratios ours / theirs (the two runs of a
    round are adjacent in time, so a slow phase of the host affects both)."""
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def hpcprobe_json(args: list[str]) -> dict:
    """`hpcprobe ARGS --no-store --json FILE` as a user runs it (this Python's CLI): its
    document; exits with hpcprobe's message when it wrote none."""
    exe = shutil.which("hpcprobe", path=str(Path(sys.executable).parent)) or "hpcprobe"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        p = subprocess.run([exe, *args, "--no-store", "--json", str(out)], capture_output=True,
                           text=True, timeout=3600)
        if not out.is_file():
            raise SystemExit(f"hpcprobe failed: {p.stderr.strip()}")
        doc: dict = json.loads(out.read_text())
        return doc
