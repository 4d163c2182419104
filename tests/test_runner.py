"""Choosing the ISA variant and the benchmarks of a run."""

import pytest

from hpcprobe import native, registry
from hpcprobe.common.errors import UserError
from hpcprobe.measure import runner


def test_default_isa_is_the_best():
    assert runner.resolve_isa(None) == native.supported_isas()[-1]


def test_unknown_isa_lists_what_the_cpu_has():
    with pytest.raises(UserError, match="this CPU runs scalar"):
        runner.resolve_isa("sve")


def test_missing_isa():
    missing = [i for i in native.isa_names() if i not in native.supported_isas()]
    if not missing:
        pytest.skip("this CPU supports every compiled variant")
    with pytest.raises(UserError, match="lacks it"):
        runner.resolve_isa(missing[0])


def test_benchmarks():
    def names(fams):
        return [f.name for f in fams]

    assert names(registry.resolve(None)) == ["memory", "latency", "numa", "frequency",
                                             "compute", "mpi", "hpl", "dslash", "cg", "gpu"]
    assert names(registry.resolve(["latency", "memory", "latency"])) == ["latency", "memory"]
    with pytest.raises(UserError, match="benchmarks: memory, latency, numa, frequency, "
                                        "compute, mpi, hpl, dslash, cg"):
        registry.resolve(["nope"])


def test_an_isa_this_cpu_lacks_lists_what_it_has(monkeypatch):
    monkeypatch.setattr(runner.native, "supported_isas", lambda: ["scalar", "avx2"])
    with pytest.raises(UserError, match="isa avx512: this CPU lacks it; it supports scalar, "
                                        "avx2"):
        runner.resolve_isa("avx512")
