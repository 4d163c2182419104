"""The kernel registry's byte and flop counts, and the one rate formula."""

import pytest

from hpcprobe.common.errors import UserError
from hpcprobe.native.kernels import KERNELS, bandwidth_gbs, get


def test_stream_byte_counting():
    b = {k: v.stream_bytes for k, v in KERNELS.items()}
    assert b == {"copy": 16, "scale": 16, "add": 24, "triad": 24, "load": 8, "store": 8,
                 "sum": 8}


def test_write_allocate_only_with_regular_stores():
    triad = KERNELS["triad"]
    assert triad.bytes_per_element("regular", True) == 32  # x 4/3
    assert triad.bytes_per_element("nt", True) == 24
    assert KERNELS["copy"].bytes_per_element("regular", True) == 24  # x 3/2
    assert KERNELS["load"].bytes_per_element("regular", True) == 8


def test_flops():
    assert KERNELS["triad"].flops == 2 and KERNELS["copy"].flops == 0


def test_bandwidth_formula_uses_given_time():
    # 1e6 elements x 24 B x 2 threads x 10 repetitions in 0.5 s = 0.96 GB/s
    assert bandwidth_gbs(KERNELS["triad"], "nt", 10**6, 2, 10, 0.5) == pytest.approx(0.96)


def test_unknown_kernel():
    with pytest.raises(UserError, match="kernels: copy"):
        get("daxpy")
