"""Every JSON document is RFC 8259 JSON: non-finite floats are written as null; a document is
read as the standard library reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis.strategies import (
    booleans,
    dictionaries,
    floats,
    integers,
    lists,
    none,
    recursive,
    text,
)

from hpcprobe.common import jsondoc


def test_non_finite_floats_are_null_at_any_depth():
    doc = {"a": [1.5, float("inf"), float("nan")], "b": {"c": (-float("inf"), 2)}, "d": "inf"}
    text = jsondoc.dumps(doc, indent=1)
    assert json.loads(text) == {"a": [1.5, None, None], "b": {"c": [None, 2]}, "d": "inf"}
    assert "Infinity" not in text and "NaN" not in text
    assert jsondoc.dumps({"b": 1, "a": 0}, sort_keys=True) == '{"a": 0, "b": 1}'


#: any JSON value json reads, the cases orjson reads otherwise among them
VALUES = recursive(
    none() | booleans() | integers() | integers(min_value=2**63 - 2, max_value=2**70)
    | integers(min_value=-(2**70), max_value=-(2**63) + 2) | floats() | text(),
    lambda inner: lists(inner, max_size=4) | dictionaries(text(max_size=4), inner, max_size=4),
    max_leaves=12)


def _same(a: Any, b: Any) -> bool:
    """The same value and the same types all the way down (1 is not 1.0; NaN is NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return repr(a) == repr(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(VALUES)
def test_a_document_reads_as_the_standard_library_reads_it(value):
    """Integers past 64 bits, NaN, Infinity and lone surrogates included (orjson reads the
    first as floats and refuses the others)."""
    for doc in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        assert _same(jsondoc.loads(doc), json.loads(doc)), doc
        try:
            data = doc.encode()
        except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
            continue
        assert _same(jsondoc.loads(data), json.loads(doc)), doc  # read as UTF-8 bytes


def test_bytes_that_are_not_utf8_are_not_read() -> None:
    for data in (b'"\xff"', b'["a\xc3"]', b'{"a": 1, "\xed\xa0\x80": 2}'):
        with pytest.raises(UnicodeDecodeError):
            jsondoc.loads(data)


def test_a_text_that_is_not_json_gets_the_standard_librarys_message():
    for doc in ("[1,]", '{"a": 1', "\"\x00\"", ""):
        with pytest.raises(json.JSONDecodeError) as fast:
            jsondoc.loads(doc)
        with pytest.raises(json.JSONDecodeError) as slow:
            json.loads(doc)
        assert (fast.value.msg, fast.value.pos) == (slow.value.msg, slow.value.pos)
