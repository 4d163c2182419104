#!/usr/bin/env python3
"""The figures of an `hpcprobe gpu --json` document to read first, one line each: every
precision's GEMM rate at the largest N with the NVML readings and SM clock beside it, the best
figure of every other test with what it was measured at, and every error and warning. Used by
scripts/gpu-verify.sh; usage: scripts/gpu_summary.py DOC.json"""

from __future__ import annotations

import json
import sys

from hpcprobe.families.gpu.bench import NOT_JOINED


def summary(doc: dict) -> list[str]:
    ms = [m for m in doc["metrics"] if m["benchmark"] == "gpu"]
    out = [f"{len(ms)} gpu metrics; {len(doc['errors'])} error(s), "
           f"{len(doc['warnings'])} warning(s)"]
    gemm = [m for m in ms if m["name"] == "gemm"]
    for prec in dict.fromkeys(m["params"]["precision"] for m in gemm):
        m = max((m for m in gemm if m["params"]["precision"] == prec),
                key=lambda m: m["params"]["n"])
        p = m["params"]
        out.append(f"gemm {prec} n={p['n']}: {m['summary']['median']:.1f} {m['unit']}, "
                   f"nvml_readings {p.get('nvml_readings')}, sm_mhz {p.get('sm_mhz')}")
    for name in sorted({m["name"] for m in ms} - {"gemm"}):
        figures = [m for m in ms if m["name"] == name]
        best = max(figures, key=lambda m: m["summary"]["median"])
        at = ", ".join(f"{k}={v}" for k, v in best["params"].items() if k not in NOT_JOINED)
        out.append(f"{name}: best {best['summary']['median']:.1f} {best['unit']} of "
                   f"{len(figures)} figure(s), at {at}")
    return out + [f"  {line}" for line in doc["errors"] + doc["warnings"]]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/gpu_summary.py DOC.json")
    with open(sys.argv[1]) as f:
        print("\n".join(summary(json.load(f))))
