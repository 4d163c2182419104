"""A reference file in other tools' formats (`hpcprobe reference export`): each figure's
expected value with its lower and upper bounds, written as those tools read them.

- `json`: every group and figure with `value`, `lower` and `upper` in the figure's unit (the
  side that cannot fail is null), for services that track benchmark figures.
- `reframe`: a Python file defining `REFERENCES`, one ReFrame `reference` per hardware group
  and profile: `{'system:partition': {'figure': (value, lower, upper, unit)}}`, the thresholds
  relative as ReFrame's `assert_reference` takes them (lower in [-1, 0], upper >= 0, None
  where that side cannot fail).
- `nhc`: lines of a Node Health Check `nhc.conf` (`TARGET || check ...`) that run `hpcprobe
  check --against` the file, its "cannot judge" (exit 3) not failing the node.
- `clustercockpit`: a `subClusters` fragment of ClusterCockpit's `cluster.json`, one entry per
  hardware group: the processor, sockets, cores per socket, and the measured peaks it keeps
  (`flopRateSimd` from the DP peak, `memoryBandwidth` from the all-core DRAM triad, each as
  `{"unit": {"base", "prefix"}, "value"}`).

Pure: reads a reference's groups only."""

from __future__ import annotations

import json
import pprint
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hpcprobe.analysis.reference import Group, describe
from hpcprobe.analysis.verdict import Expected


@dataclass(frozen=True)
class Where:
    """What a format needs beyond the reference: the file it came from, ReFrame's
    `system:partition` scope, NHC's host match and the `hpcprobe` to run there."""

    source: str
    system: str = "*"
    hosts: str = "*"
    command: str = "hpcprobe"


def bounds(e: Expected) -> tuple[float | None, float | None]:
    """The worst values still within the tolerance, in the figure's unit: (lower, None) where
    higher is better, (None, upper) where lower is."""
    return (e.threshold, None) if e.better == "higher" else (None, e.threshold)


def _name(g: Group) -> str:
    return f"{describe(g.hardware)}, {g.profile}"


def _bounded(e: Expected) -> dict[str, Any]:
    lower, upper = bounds(e)
    return {"name": e.key, "label": e.label, "unit": e.unit, "better": e.better,
            "value": e.value, "lower": lower, "upper": upper, "tolerance": e.tolerance,
            "runs": e.runs}


def to_json(groups: Sequence[Group], where: Where) -> str:
    out = {"format": "hpcprobe-reference-bounds", "version": 1, "source": where.source,
           "groups": [{"name": _name(g), "hardware": g.hardware, "profile": g.profile,
                       "runs": len(g.runs), "figures": [_bounded(e) for e in g.figures.values()]}
                      for g in groups]}
    return json.dumps(out, indent=2) + "\n"


def reframe_tuple(e: Expected) -> tuple[float, float | None, float | None, str]:
    """A figure as ReFrame's reference tuple: (value, lower, upper, unit), the thresholds
    relative to the value."""
    if e.better == "higher":  # a tolerance is under 0.5 (reference.MAX_TOLERANCE)
        return (e.value, -e.tolerance, None, e.unit)
    return (e.value, None, e.tolerance, e.unit)


def to_reframe(groups: Sequence[Group], where: Where) -> str:
    refs = {_name(g): {where.system: {e.key: reframe_tuple(e) for e in g.figures.values()}}
            for g in groups}
    return ("# ReFrame references from hpcprobe's reference file " + where.source + "\n"
            "# (hpcprobe reference export --format reframe): one per hardware and profile,\n"
            "# reference[system:partition][figure] = (value, lower, upper, unit), the\n"
            "# thresholds relative (None: that side cannot fail). In a test:\n"
            "#     reference = REFERENCES['<hardware>, <profile>']\n"
            "REFERENCES = " + pprint.pformat(refs, width=96, sort_dicts=False) + "\n")


#: `hpcprobe check`'s exit status for a node it fails (0 passes, 3 cannot judge)
CHECK_FAILED = 1


def to_nhc(groups: Sequence[Group], where: Where) -> str:
    run = (f"{where.command} check --against {shlex.quote(where.source)} --no-store; "
           f"test $? -ne {CHECK_FAILED}")
    lines = [f"# Node Health Check (nhc.conf) lines from hpcprobe's reference {where.source}",
             "# (hpcprobe reference export --format nhc): `hpcprobe check` judges the node's",
             "# figures and state against the file; only its FAIL (exit 1) fails the node, a",
             "# CANNOT JUDGE (exit 3: a busy or noisy node) does not. The file's groups:"]
    for g in groups:
        lines += [f"#   {_name(g)}: " + ", ".join(
            f"{e.key} {e.value:g} {e.unit} ({'-' if e.better == 'higher' else '+'}"
            f"{100 * e.tolerance:.1f} %)" for e in g.figures.values())]
    lines.append(f"{where.hosts} || check_cmd_status -t 600 -r 0 sh -c {shlex.quote(run)}")
    return "\n".join(lines) + "\n"


#: ClusterCockpit's subcluster peaks: its field, the reference's figure and the unit it is kept
#: in, that unit's base and prefix as ClusterCockpit writes them
CC_PEAKS = (("flopRateSimd", "compute.peak_dp", "GFLOP/s", "F/s", "G"),
            ("memoryBandwidth", "memory.dram_triad_all", "GB/s", "B/s", "G"))


def to_clustercockpit(groups: Sequence[Group], where: Where) -> str:
    subs = []
    for i, g in enumerate(groups):
        hw = g.hardware
        sockets = max(1, int(hw.get("sockets") or 1))
        sub: dict[str, Any] = {"name": f"hpcprobe{i + 1}", "processorType": str(hw["cpu"]),
                               "socketsPerNode": sockets,
                               "coresPerSocket": int(hw.get("cores") or 0) // sockets}
        for field, key, unit, base, prefix in CC_PEAKS:
            e = g.figures.get(key)
            if e is not None and e.unit == unit:
                sub[field] = {"unit": {"base": base, "prefix": prefix}, "value": e.value}
        subs.append(sub)
    doc = {"comment": f"hpcprobe reference export --format clustercockpit from {where.source}: "
                      "measured peaks per hardware group (merge into cluster.json's "
                      "subClusters; add its nodes and topology)", "subClusters": subs}
    return json.dumps(doc, indent=2) + "\n"


#: The formats by name: what each is, and how it is written
FORMATS: dict[str, tuple[str, Callable[[Sequence[Group], Where], str]]] = {
    "json": ("value, lower and upper bounds of every figure", to_json),
    "reframe": ("ReFrame references (a Python file defining REFERENCES)", to_reframe),
    "nhc": ("Node Health Check lines running hpcprobe check --against the file", to_nhc),
    "clustercockpit": ("a ClusterCockpit cluster.json subClusters fragment", to_clustercockpit),
}
