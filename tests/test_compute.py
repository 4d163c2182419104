"""The compute benchmark: its plan on recorded machines, a real narrowed run with its model, the
core-scaling points, and bad input."""

import pytest

from conftest import DATA, assert_user_error, hpcprobe, run_json
from hpcprobe import native, registry
from hpcprobe.families.compute.bench import ComputeOptions, plan
from hpcprobe.machine import topology


def test_plan_covers_every_kernel_at_one_and_all_cores_and_a_scaling_curve():
    topo = topology.load_xml(DATA / "epyc-2s-nps4-128c.xml")
    name, points = plan(topo, ComputeOptions(), ["scalar", "avx2"], 16)
    table = [p for p in points if p.phase == "peak"]
    assert name == "one-per-core"
    assert {len(p.cpus) for p in table} == {1, 128}
    assert len(table) == 2 * 6  # scalar mul+add x 2 precisions, avx2 fma and fma+add x 2
    curve = sorted(len(p.cpus) for p in points if p.scaling)
    assert curve[0] == 1 and curve[-1] == 128 and len(curve) == len(set(curve)) <= 16
    assert {p.kernel.label for p in points if p.scaling} == {"avx2 dp fma"}


def test_narrowed_plan_has_no_curve():
    topo = topology.load_xml(DATA / "laptop-8c.xml")
    _, points = plan(topo, ComputeOptions(precisions=("sp",), threads=(2, 4)), ["avx2"], 16)
    assert {(p.kernel.precision, len(p.cpus)) for p in points} == {("sp", 2), ("sp", 4)}
    assert not any(p.scaling for p in points)


def test_peak_against_its_model(tmp_path):
    _, doc = run_json(tmp_path, "compute", "--quick", "--isa", "scalar", "--threads", "1",
                      "--precision", "dp", "--no-store")
    by_name = {m["name"]: m for m in doc["metrics"]}
    assert set(by_name) == {"peak", "peak_model", "peak_fraction", "clock", "clock_after"}
    peak = by_name["peak"]
    assert peak["unit"] == "GFLOP/s" and peak["params"]["op"] == "mul+add"
    assert peak["params"]["threads"] == 1 and peak["summary"]["n"] >= 3
    model = by_name["peak_model"]
    assert model["params"]["model_source"] in ("table", "measured")
    assert model["params"]["clock_load"] == "scalar"
    # the fraction is the peak over the model's median, sample by sample
    frac = by_name["peak_fraction"]
    assert frac["samples"][0] == pytest.approx(
        100 * peak["samples"][0] / model["summary"]["median"])
    assert any(f["kind"] == "microarchitecture" for f in doc["findings"])
    assert not doc["errors"]


def test_each_isa_and_core_set_gets_its_clock_before_its_kernels(tmp_path):
    _, doc = run_json(tmp_path, "compute", "--quick", "--isa", native.best_isa(),
                      "--threads", "1", "--precision", "sp", "--no-store")
    names = [m["name"] for m in doc["metrics"]]
    assert names[0] == "clock" and names.count("clock") == 1
    assert names.index("clock_after") > names.index("peak")  # the bracket's end, after them
    clock = doc["metrics"][0]
    assert clock["benchmark"] == "compute" and clock["params"]["load"] == native.best_isa()
    model = next(m for m in doc["metrics"] if m["name"] == "peak_model")
    # the model's samples are FLOPs/cycle x cores x each sample of the side it used
    side = {"before": "clock", "after": "clock_after"}[model["params"]["clock_side"]]
    used = next(m for m in doc["metrics"] if m["name"] == side)
    fpc = model["params"]["flops_per_cycle"]
    assert model["samples"] == pytest.approx([fpc * g for g in used["samples"]], rel=1e-3)
    medians = {m["name"]: m["summary"]["median"] for m in doc["metrics"]
               if m["name"] in ("clock", "clock_after")}
    assert medians[side] == max(medians.values())


def test_unknown_precision_and_bad_threads_are_user_errors():
    r = hpcprobe("run", "compute", "--precision", "hp")
    assert r.code == 2 and "--precision" in r.err
    assert_user_error(hpcprobe("run", "compute", "--threads", "999", "--no-store"),
                      "--threads 999")
    assert_user_error(hpcprobe("run", "latency", "--precision", "dp", "--no-store"),
                      "--precision", "compute")


def test_an_unknown_microarchitecture_gets_a_measured_model_and_one_warning(monkeypatch, tiny):
    from hpcprobe.machine import flopmodel
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import NoProgress

    unknown = flopmodel.CpuId("GenuineIntel", 6, 250, "Intel(R) Future(R)", frozenset())
    monkeypatch.setattr(flopmodel, "read_cpuid", lambda: unknown)
    run = registry.execute(tiny, profiles.get("quick"), ["compute"], "scalar",
                         {"compute": ComputeOptions(isa="scalar", threads=(1,))}, NoProgress())
    assert not run.errors
    models = [m for m in run.metrics if m.name == "peak_model"]
    assert len(models) == 2 and all(m.params["model_source"] == "measured" for m in models)
    assert len([w for w in run.warnings if "not in the table" in w]) == 1


def test_the_models_clock_is_the_higher_side_of_the_bracket():
    from hpcprobe.families.compute.bench import bracket
    from hpcprobe.machine import topology as topo_mod
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import RunContext
    from hpcprobe.results.model import Metric

    ctx = RunContext(topo_mod.load_xml(DATA / "laptop-8c.xml"), profiles.get("quick"), "scalar")
    before = Metric("compute", "clock", "GHz", {"load": "avx2", "cpus": "0"}, [3.0, 3.1, 3.2])
    assert bracket(ctx, before, [2.9, 3.0, 3.0]) == (before, "before") and ctx.findings == []
    assert bracket(ctx, before, []) == (before, "before")
    used, side = bracket(ctx, before, [3.4, 3.5, 3.5])
    assert side == "after" and used.name == "clock_after" and used.params == before.params
    assert [m.name for m in ctx.metrics] == ["clock_after", "clock_after"]  # both stored
    [f] = ctx.findings
    assert f["kind"] == "clock_bracket" and f["before_ghz"] == 3.1 and f["after_ghz"] == 3.5


def _judged(monkeypatch, gflops: dict[str, float]) -> list[dict]:
    """The above-model findings of a Sapphire Rapids core's AVX2 DP kernels with these one-core
    figures, all timed on the same clock samples (3.0 GHz)."""
    from hpcprobe.families.compute.bench import PeakPoint, _Models
    from hpcprobe.machine import flopmodel
    from hpcprobe.machine import topology as topo_mod
    from hpcprobe.measure import profiles
    from hpcprobe.measure.family import RunContext
    from hpcprobe.native.peak import PEAK_KERNELS
    from hpcprobe.results.model import Metric

    spr = flopmodel.parse_cpuinfo((DATA / "cpuinfo" / "sapphire-rapids-8480.txt").read_text())
    monkeypatch.setattr(flopmodel, "read_cpuid", lambda: spr)
    ctx = RunContext(topo_mod.load_xml(DATA / "laptop-8c.xml"), profiles.get("quick"), "avx2")
    clk = Metric("compute", "clock", "GHz", {"load": "avx2", "cpus": "0"}, [2.99, 3.0, 3.01])
    kernels = {k.op: k for k in PEAK_KERNELS if (k.isa, k.precision) == ("avx2", "dp")}
    measured = [(PeakPoint(kernels[op], (0,), "peak"),
                 Metric("compute", "peak", "GFLOP/s", {"op": op}, [g * 0.99, g, g * 1.01]))
                for op, g in gflops.items()]
    _Models(ctx).add_group(measured, clk, "before")
    return [f for f in ctx.findings if f["kind"] == "above_model"]


def test_a_kernel_above_its_model_beside_one_within_blames_the_models_row(monkeypatch):
    # Sapphire Rapids: FMA 16 and 8 FMA + 7 add 18.4 FLOP/cycle; at 3.0 GHz 48 and 55.2 GFLOP/s
    [f] = _judged(monkeypatch, {"fma": 47.0, "fma+add": 59.1})
    assert f["likelier"] == "model" and f["microarch"] == "Sapphire/Emerald/Granite Rapids"
    assert f["kernel"].startswith("avx2 dp fma+add") and f["percent"] > 101
    text = f["message"]
    assert "Sapphire/Emerald/Granite Rapids row's 18.4 FLOP/cycle" in text
    assert "on the same clock samples" in text
    assert "clock the model used" in text  # the other cause is named too


def test_kernels_all_above_their_models_blame_the_clock_first(monkeypatch):
    found = _judged(monkeypatch, {"fma": 50.0, "fma+add": 57.5})
    assert [f["likelier"] for f in found] == ["clock", "clock"]
    assert all("else the Sapphire/Emerald/Granite Rapids row's" in f["message"] for f in found)
    assert _judged(monkeypatch, {"fma": 47.5, "fma+add": 54.0}) == []


def test_a_kernel_whose_ci_reaches_back_to_its_model_is_no_finding(monkeypatch):
    """Above its model by its median alone (its samples 1 % apart, its CI their range), a
    kernel is at its model within its noise; with the whole CI above, it is a finding."""
    assert _judged(monkeypatch, {"fma": 48.0 * 1.02, "fma+add": 54.0}) == []  # low end 101.0 %
    [f] = _judged(monkeypatch, {"fma": 48.0 * 1.03, "fma+add": 54.0})  # low end 102.0 %
    assert f["kernel"].startswith("avx2 dp fma") and "add" not in f["kernel"]
