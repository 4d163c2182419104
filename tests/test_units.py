"""Size parsing and formatting."""

import pytest

from hpcprobe.common.units import format_bytes, parse_size


@pytest.mark.parametrize("text,value", [("2GiB", 2 << 30), ("512MiB", 512 << 20), ("64KiB", 65536),
                                        ("1GB", 10**9), ("1e6", 10**6), ("100", 100),
                                        ("1.5 MiB", 3 << 19)])
def test_parse(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["-1GiB", "0", "abc", "1XB", ""])
def test_parse_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format():
    assert format_bytes(48 << 10) == "48 KiB"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(480 << 20) == "480 MiB"
