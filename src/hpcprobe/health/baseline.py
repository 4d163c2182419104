"""The error counters' baseline: the counts of each node's last passed check, kept in one file
(a rise stays a fault until someone takes the counts as the new baseline)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcprobe.common import files
from hpcprobe.common.errors import OptionError

#: What a counters file holds: node -> {"counters": {name: count}, "when": ISO time}
COUNTERS_DOC = "node -> {counters, when}"


def load(path: str) -> dict[str, Any]:
    """The counters file's document ({} where there is none yet); anything else there (another
    file named by mistake, a damaged one) is refused, never overwritten: resetting a damaged
    baseline would forget a rise it kept."""
    p = Path(path)
    if not p.exists():
        return {}
    text = files.read_input(p, f"<counters> {path}")
    try:
        doc = json.loads(text)
        ok = isinstance(doc, dict) and all(
            isinstance(v, dict) and isinstance(v.get("counters"), dict)
            and all(isinstance(n, int) and not isinstance(n, bool)
                    for n in v["counters"].values()) for v in doc.values())
    except ValueError:
        ok = False
    if not ok:
        raise OptionError(f"<counters> {path}: not a check's counters file ({COUNTERS_DOC}), "
                          "or a damaged one: left as it is; name another file, or move it "
                          "away once you know what it is (its baseline is then taken anew)")
    return dict(doc)


def saved(doc: dict[str, Any], node: str) -> dict[str, int] | None:
    """The node's baseline, None where it has none yet."""
    kept = doc.get(node)
    return None if kept is None else {str(k): int(v) for k, v in kept["counters"].items()}


def save(path: str, doc: dict[str, Any], node: str, now: dict[str, int]) -> None:
    """The node's counts now as its baseline (the file written atomically)."""
    doc = {**doc, node: {"counters": now,
                         "when": datetime.now(UTC).isoformat(timespec="seconds")}}
    files.atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode(),
                       "<counters>")
