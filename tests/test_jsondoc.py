"""Every JSON document is RFC 8259 JSON: non-finite floats are written as null."""

from __future__ import annotations

import json

from hpcprobe.common import jsondoc


def test_non_finite_floats_are_null_at_any_depth():
    doc = {"a": [1.5, float("inf"), float("nan")], "b": {"c": (-float("inf"), 2)}, "d": "inf"}
    text = jsondoc.dumps(doc, indent=1)
    assert json.loads(text) == {"a": [1.5, None, None], "b": {"c": [None, 2]}, "d": "inf"}
    assert "Infinity" not in text and "NaN" not in text
    assert jsondoc.dumps({"b": 1, "a": 0}, sort_keys=True) == '{"a": 0, "b": 1}'
