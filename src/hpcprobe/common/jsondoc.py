"""JSON text as RFC 8259 has it, for every document hpcprobe writes: a float that is not finite
(an unbounded confidence interval, a change against a median of 0) is null, never the
NaN/Infinity that Python writes by default and jq, browsers and other parsers refuse."""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = None, sort_keys: bool = False) -> str:
    """`json.dumps`, with every non-finite float written as null."""
    return json.dumps(_finite(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)
