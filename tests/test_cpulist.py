"""cpulist and hwloc bitmap parsing."""

import pytest

from hpcprobe.common.cpulist import format_cpulist, parse_cpulist, parse_hwloc_bitmap


def test_parse_keeps_order_and_ranges():
    assert parse_cpulist("0-3,8") == [0, 1, 2, 3, 8]
    assert parse_cpulist("8,0-1") == [8, 0, 1]
    assert parse_cpulist("") == []


@pytest.mark.parametrize("bad", ["a", "1-", "3-1", "1,,2", "-1", "1-x"])
def test_parse_rejects(bad):
    with pytest.raises(ValueError):
        parse_cpulist(bad)


def test_format_compresses():
    assert format_cpulist([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"
    assert format_cpulist([]) == ""


def test_hwloc_bitmap_words_most_significant_first():
    assert parse_hwloc_bitmap("0x00000003") == {0, 1}
    assert parse_hwloc_bitmap("0x00000001,0x00000000") == {32}
    assert parse_hwloc_bitmap("0xf...f,0xffffffff") is None
    with pytest.raises(ValueError):
        parse_hwloc_bitmap("12")
