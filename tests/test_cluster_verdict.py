"""The campaign verdict on synthetic campaigns (tests/clusterdata.py): slow nodes, slow links and
slow endpoints told apart, peers grouped by hardware, the practical threshold, re-measured
transients, failures; the pair schedule; the report command on a stored campaign."""

from __future__ import annotations

import itertools
import json
import math
import random
from dataclasses import replace

import pytest

import clusterdata
from hpcprobe import registry
from hpcprobe.cli import build_parser, main
from hpcprobe.cluster import pairs, verdict, views
from hpcprobe.cluster.verdict import SLOW_ENDPOINT, SLOW_LINK, SLOW_NODE, analyse
from hpcprobe.commands import cluster as cluster_cmd
from hpcprobe.common import jsondoc
from hpcprobe.history import changes
from hpcprobe.judge.peers import Thresholds
from hpcprobe.measure.family import Scaling
from hpcprobe.results.model import HEALTH, Metric, read_json
from hpcprobe.results.store import Selection, Store


def kinds(v: verdict.FleetVerdict) -> list[tuple[str, str]]:
    return [(f.kind, f.item) for f in v.findings]


def test_a_figures_label_tells_params_python_finds_equal_apart():
    """A figure's label is made once per distinct params (a fleet repeats them): params equal
    in Python but not in JSON (1 and True, 0.0 and -0.0) are labelled each as `compare` does,
    in whichever order they come."""
    from hpcprobe.analysis.compare import describe_params, joined_params
    from hpcprobe.judge.peers import label

    none: frozenset[str] = frozenset()
    values = [1, True, 1.0, 0, False, 0.0, -0.0, 0.0, True, 1]
    for order in (values, values[::-1]):
        for v in order:
            m = Metric("b", "f", "u", {"x": v, "n": 4}, [1.0])
            assert label(m, none) == "b.f " + describe_params(joined_params(m.params, none))


def test_a_clean_fleet_flags_nothing():
    _, runs = clusterdata.campaign(16, noise=0.01)
    v = analyse(runs, "c1")
    assert kinds(v) == [] and not v.flagged
    assert v.heat.shape == (16, len(v.heat_metrics)) and len(v.heat_metrics) > 100
    assert len(v.links["links.latency size=8"]) == 16 * 15 // 2  # every pair of a small fleet


def test_a_node_that_draws_more_power_is_a_finding_of_its_own_never_drained():
    """Peers of one hardware with the same peak: one draws 30 % more power for it (its peak
    per watt lower), one cannot read its counters. The first is a power-hungry node (watch,
    not a slow node, not drained), the second is not missing anything."""
    _, runs = clusterdata.campaign(12, noise=0.01)
    rng = random.Random(3)
    peak = next(m for m in runs[0].metrics if m.name == "peak")
    for run in runs:
        if run.kind != "node" or run.host == "n9":
            continue
        watts = 200.0 * (1.3 if run.host == "n4" else 1.0)
        params = dict(peak.params, domains="package-0")
        run.metrics = [*run.metrics, *(Metric("compute", name, unit, dict(params), [
            v * (1 + rng.gauss(0, 0.01)) for v in values], better) for name, unit, values,
            better in (("power", "W", [watts], "lower"),
                       ("peak_per_watt", "GFLOP/s/W", [x / watts for x in peak.samples],
                        "higher")))]
    v = analyse(runs, "c1")
    assert kinds(v) == [(verdict.POWER_HUNGRY, "n4")]
    found = v.findings[0].to_dict()
    assert found["code"] == "HP404" and found["action"] == "watch"
    assert {d["metric"].split(" ")[0] for d in found["evidence"]} == {
        "compute.power", "compute.peak_per_watt"}
    assert found["evidence"][0]["median"] == pytest.approx(200, rel=0.05)
    assert "n9" not in v.missing and views.to_drain(v) == []
    for run in runs:  # n4 now slow at the same power as its peers: slow, not power-hungry
        if run.host == "n4":
            run.metrics = [replace(m, samples=[
                x / 1.3 if m.name == "power" else x * 0.8 if m.better == "higher" else x / 0.8
                for x in m.samples]) for m in run.metrics]
    assert kinds(analyse(runs, "c1")) == [(SLOW_NODE, "n4")]


def test_a_slow_node_is_a_slow_node_and_nothing_else():
    _, runs = clusterdata.campaign(16, slow_nodes={"n5": 0.85})
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_NODE, "n5")]
    f = v.findings[0]
    assert not f.confirmed  # measured once
    assert all(abs(d.worse - 0.15 / 0.85) < 0.05 or abs(d.worse - 0.15) < 0.05
               for d in f.evidence)
    assert len(f.evidence) > 100  # its figures, each against the fleet's median


def test_a_slow_node_whose_cpus_others_used_is_a_suspect_never_drained():
    """n5 slow while other processes used a fifth of its CPUs in every benchmark (a job
    outside Slurm, a stray process): said, with its load, and not drained; where only some of
    its slow benchmarks were shared, it is still a slow node."""
    _, runs = clusterdata.campaign(16, slow_nodes={"n5": 0.85})
    every = sorted({m.benchmark for r in runs if r.host == "n5" for m in r.metrics})
    for shared, drained in ((every, False), (every[:1], True)):
        busy = [replace(r, provenance={**r.provenance, "others_percent": dict.fromkeys(
            shared, 20.0)}) if r.host == "n5" else r for r in runs]
        v = analyse(busy, "c1")
        assert v.busy == {"n5": 20.0}
        assert kinds(v) == ([(SLOW_NODE, "n5")] if drained else [])
        assert [f.item for f in v.suspects] == ([] if drained else ["n5"])
        assert [n for n, _ in views.to_drain(v)] == (["n5"] if drained else [])


def test_a_flagged_node_is_judged_in_the_one_judgement_record():
    """The peers judge's answers are judgement records in the report's JSON: the slow node
    as their subject, basis peers, mark below, its value against the peers' median."""
    _, runs = clusterdata.campaign(8, slow_nodes={"n5": 0.6})
    v = analyse(runs, "c1")
    doc = json.loads(json.dumps(v.to_dict()))
    judged = doc["judgements"]
    assert judged and {j["subject"] for j in judged} == {"n5"}
    assert {(j["basis"], j["mark"]) for j in judged} == {("peers", "below")}
    for j, d in zip(judged, v.findings[0].evidence, strict=True):
        assert j["figure"] == d.metric and j["value"] == d.value and j["expected"] == d.median
        assert j["tolerance"] == v.thresholds.worse and j["why"] == d.text()
    clean = analyse(clusterdata.campaign(8)[1], "c1").to_dict()
    assert clean["judgements"] == []


def test_a_slow_node_explains_its_slow_links():
    _, runs = clusterdata.campaign(12, slow_nodes={"n3": 0.7}, slow_endpoints={"n3": 0.7})
    assert kinds(analyse(runs, "c1")) == [(SLOW_NODE, "n3")]


def test_one_slow_link_is_a_slow_link():
    _, runs = clusterdata.campaign(16, slow_links={("n2", "n7"): 0.5})
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_LINK, "n2 - n7")]
    metrics = {d.metric for d in v.findings[0].evidence}
    assert "links.bandwidth size=8 n2->n7" in metrics and "links.latency size=8" in metrics


def test_loss_on_one_link_where_the_others_lose_nothing():
    """The peers' median is 0 (their z spread too): the change is no percentage, and the JSON
    report says null where it would say Infinity."""
    _, runs = clusterdata.campaign(12)
    camp = next(r for r in runs if r.host == "login")
    camp.metrics += [Metric("iperf3", "lost", "%", {"a": m.params["a"], "b": m.params["b"]},
                            [2.5 if {m.params["a"], m.params["b"]} == {"n2", "n7"} else 0.0] * 5,
                            "lower")
                     for m in list(camp.metrics) if m.name == "latency"]
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_LINK, "n2 - n7")]
    assert [d.text() for d in v.findings[0].evidence] == \
        ["iperf3.lost 2.5 % where the peers' median is 0 (z inf)"]
    doc = json.loads(jsondoc.dumps(views.document(v, lambda node, why: ["scontrol", node])),
                     parse_constant=lambda name: pytest.fail(f"{name} in the JSON report"))
    assert doc["findings"][0]["evidence"][0]["worse"] is None


def test_every_link_of_a_node_slow_is_its_network_endpoint():
    _, runs = clusterdata.campaign(16, slow_endpoints={"n4": 0.6})
    assert kinds(analyse(runs, "c1")) == [(SLOW_ENDPOINT, "n4")]


def test_a_large_fleet_uses_ring_and_random_pairs_and_still_finds_the_endpoint():
    _, runs = clusterdata.campaign(40, slow_endpoints={"n17": 0.6}, slow_links={})
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_ENDPOINT, "n17")]
    assert len(v.links["links.latency size=8"]) < 40 * 39 // 2  # not every pair


def test_the_practical_threshold_keeps_a_tight_fleet_quiet():
    _, runs = clusterdata.campaign(16, slow_nodes={"n9": 0.98}, noise=0.001)
    assert kinds(analyse(runs, "c1")) == []  # 2 % worse: far beyond 3.5 z, under 4 %
    assert kinds(analyse(runs, "c1", Thresholds(worse=0.01))) == [(SLOW_NODE, "n9")]
    assert kinds(analyse(runs, "c1", Thresholds(z=1e6, worse=0.01))) == []


@pytest.mark.parametrize("differs,factor,group", [
    # 30 % slower than n*, but the same as their own peers
    ({"cpu_model": "Other CPU"}, 0.7, "Other CPU, "),
    # an install of their own, built from other sources, whose peak kernel gives 15 % less
    ({"kernels": "0f3e2a91bc47"}, 0.85, ", kernels 0f3e2a91bc47"),
])
def test_nodes_are_judged_against_peers_of_their_own_hardware_and_kernels(differs, factor,
                                                                          group):
    nodes, runs = clusterdata.campaign(12)
    other = read_json(clusterdata.TEMPLATE)
    other.provenance = {**other.provenance, **differs}
    rng = random.Random(5)
    runs += [clusterdata.node_run(other, f"m{i}", factor, rng, 0.01, 0, "c1") for i in range(4)]
    v = analyse(runs, "c1")
    assert kinds(v) == []
    assert sorted(len(g) for g in v.groups.values()) == [4, 12]
    assert sorted(v.groups[g] for g in v.groups if group in g) == [[f"m{i}" for i in range(4)]]


def test_too_few_peers_are_not_judged():
    _, runs = clusterdata.campaign(2, slow_nodes={"n2": 0.5})
    v = analyse(runs, "c1")
    assert kinds(v) == [] and "not judged" in v.unjudged[0]


def test_a_transient_is_not_a_verdict_and_a_confirmed_node_is():
    nodes, runs = clusterdata.campaign(12, slow_nodes={"n3": 0.8, "n6": 0.8})
    template = read_json(clusterdata.TEMPLATE)
    rng = random.Random(9)
    # measured again: n3 is fine now (a transient), n6 still slow
    runs += [clusterdata.node_run(template, "n3", 1.0, rng, 0.01, 5, "c1"),
             clusterdata.node_run(template, "n6", 0.8, rng, 0.01, 5, "c1")]
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_NODE, "n6")] and v.findings[0].confirmed
    assert [(t.kind, t.item) for t in v.transients] == [(SLOW_NODE, "n3")]
    # a campaign keeps its runs' figures from its first verdict to the next, after the
    # re-measures: the same verdict
    made: dict = {}
    first = analyse(runs[:-2], "c1", made=made)
    assert [k for k in kinds(first) if k[1] in ("n3", "n6")] == [(SLOW_NODE, "n3"),
                                                                   (SLOW_NODE, "n6")]
    assert len(made) == 12
    again = analyse(runs, "c1", made=made)
    assert len(made) == 14
    assert kinds(again) == kinds(v) and again.transients == v.transients
    assert again.findings == v.findings and again.heat.tolist() == v.heat.tolist()


def test_a_link_slow_once_is_a_transient():
    nodes, runs = clusterdata.campaign(12, slow_links={("n1", "n2"): 0.5})
    rng = random.Random(3)
    runs.append(clusterdata.campaign_run(nodes, rng, 0.01, "c1", 9, {}, {}, {},
                                         role="re-measure", rounds=[[("n1", "n2")]]))
    v = analyse(runs, "c1")
    assert kinds(v) == [] and [t.item for t in v.transients] == ["n1 - n2"]


def test_failed_nodes_are_reported_and_flag_the_campaign():
    _, runs = clusterdata.campaign(8, failed={"n8": "its job ended node fail"})
    v = analyse(runs, "c1")
    assert v.failed == {"n8": "its job ended node fail"} and v.flagged
    assert v.measured == [f"n{i}" for i in range(1, 8)]


def test_a_node_short_of_figures_its_peers_have_is_said_and_flags_the_campaign():
    # eight nodes of two H100s each; n6's second GPU fell off the bus: its figures are gone,
    # and n6 stays among its peers (the hardware group names GPU models, not their count)
    _, runs = clusterdata.campaign(8, noise=0.01)
    for r in runs:
        if "cluster" in r.provenance:
            continue
        devices = (0,) if r.host == "n6" else (0, 1)
        r.metrics = [*r.metrics, *(Metric("gpu", "bandwidth", "GB/s", {"device": d},
                                          [3000.0, 3010.0, 2990.0], "higher")
                                   for d in devices)]
        r.provenance = {**r.provenance, "gpu": {"gpus": [{"name": "NVIDIA H100"}] * 2}}
    v = analyse(runs, "c1", labels=registry.hardware_labels)  # the GPU family's inventory
    assert v.missing == {"n6": ["gpu.bandwidth device=1"]}, v.missing
    assert v.flagged and kinds(v) == [] and len(v.groups) == 1
    assert next(iter(v.groups)).endswith(", NVIDIA H100")
    assert ("n6", "hpcprobe c1: 1 figure(s) of its peers missing, gpu.bandwidth device=1") in \
        views.to_drain(v)
    assert not analyse([r for r in runs if r.host != "n6"], "c1").flagged  # the seven alone


def test_a_node_whose_own_checks_found_a_gpu_due_for_a_reset_is_drained_with_the_fix():
    _, runs = clusterdata.campaign(8, noise=0.01)
    msg = ("GPU3 (0000:4e:00.0): a memory row remapping is pending, applied at the GPU's next "
           "reset: drain the node and reset the GPU (nvidia-smi -r -i 3) or reboot it")
    [n2] = [r for r in runs if r.host == "n2"]
    n2.benchmarks = [*n2.benchmarks, "gpu"]
    n2.findings = [{"benchmark": "gpu", "kind": HEALTH, "item": "GPU3", "message": msg},
                   {"benchmark": "memory", "kind": "sampling", "message": "budget spent"}]
    v = analyse(runs, "c1")
    assert v.unhealthy == {"n2": [msg]} and v.flagged and kinds(v) == []
    assert views.to_drain(v) == [("n2", f"hpcprobe c1: {msg}"[:200])]
    [table] = [b for b in views.blocks(v, lambda n, r: ["drain", n])
               if getattr(b, "title", "").startswith("Unhealthy nodes")]
    assert table.rows == [["n2", msg]]
    assert json.loads(json.dumps(v.to_dict()))["unhealthy"] == {"n2": [msg]}
    # a later run without the GPU family says nothing of the GPU: still unhealthy
    memory = replace(n2, run_id="memory", created="2026-01-02T00:00:00+00:00", findings=[],
                     benchmarks=["memory"])
    assert analyse([*runs, memory], "c1").unhealthy == {"n2": [msg]}
    # measured again after the reset: its latest GPU run is healthy, nothing to drain
    again = replace(memory, run_id="again", created="2026-01-03T00:00:00+00:00",
                    benchmarks=["memory", "gpu"])
    v = analyse([*runs, memory, again], "c1")
    assert v.unhealthy == {} and not v.flagged


def test_nodes_whose_host_took_cpu_time_or_changed_are_named_beside_the_verdict():
    _, runs = clusterdata.campaign(12, slow_nodes={"n5": 0.85})
    stolen = {"n5": {"memory": 6.2, "latency": 0.1}, "n7": {"compute": 1.5},
              "n3": {"memory": 0.4}}
    for r in runs:
        if r.host in stolen:
            r.provenance = {**r.provenance, "steal_percent": stolen[r.host]}
        if r.host in ("n5", "n9"):  # the node sentinel moved around their memory benchmark
            r.findings = [*r.findings, {"benchmark": "memory", "kind": "node_changed",
                                        "ratio": 0.61, "message": "moved"}]
    v = analyse(runs, "c1")
    assert v.steal == {"n5": 6.2, "n7": 1.5}  # under 1 % is no warning
    assert v.changed == {"n5": {"memory": 0.61}, "n9": {"memory": 0.61}}
    assert kinds(v) == [(SLOW_NODE, "n5")]  # context for the verdict, not a verdict
    [table] = [b for b in views.blocks(v, lambda n, r: ["drain", n])
               if getattr(b, "title", "").startswith("Host load")]
    assert table.rows == [["n5", "6.2", "-", "memory x0.61"], ["n7", "1.5", "-", "-"],
                          ["n9", "-", "-", "memory x0.61"]]
    doc = json.loads(json.dumps(v.to_dict()))
    assert doc["steal_percent"] == {"n5": 6.2, "n7": 1.5}
    assert doc["node_changed"] == {"n5": {"memory": 0.61}, "n9": {"memory": 0.61}}
    # a fleet whose only news is one node's steal time is not flagged: nothing to drain
    _, runs = clusterdata.campaign(8, noise=0.01)
    runs[0].provenance = {**runs[0].provenance, "steal_percent": {"memory": 3.0}}
    clean = analyse(runs, "c1")
    assert clean.steal == {runs[0].host: 3.0} and not clean.flagged
    assert views.to_drain(clean) == []


def test_links_that_could_not_be_measured_flag_the_campaign():
    _, runs = clusterdata.campaign(8)
    runs[-1].metrics = []
    runs[-1].provenance["cluster"]["link_error"] = "job 7 ended failed: srun: error: ..."
    v = analyse(runs, "c1")
    assert v.flagged and not v.findings and "job 7 ended failed" in v.link_errors[0]


def test_the_scaling_curve_and_the_json_document():
    _, runs = clusterdata.campaign(8)
    v = analyse(runs, "c1")
    assert [n for n, _ in v.scaling["allreduce 8 B"]] == [2, 4, 8]
    doc = json.loads(json.dumps(v.to_dict()))
    assert doc["campaign"] == "c1" and doc["findings"] == [] and len(doc["heat"]["nodes"]) == 8
    z = doc["heat"]["z"]  # every node's robust z-score per figure, against its peers
    assert len(z) == 8 and len(z[0]) == len(doc["heat"]["metrics"])
    norm = doc["heat"]["normalised"]
    pairs = [(zx, nx) for zr, nr in zip(z, norm, strict=True)
             for zx, nx in zip(zr, nr, strict=True)
             if zx is not None and nx is not None and zx != 0 and nx != 1]
    assert pairs and all((zx > 0) == (nx < 1) for zx, nx in pairs)  # z > 0: worse


def _scaling_run(template, count: int, rmax: float, minute: int, errors=()):
    """A family's run across `count` nodes as cluster mode stores it."""
    params = {"blas": "openblas", "nodes": count, "n": 1000 * count, "ranks": 2 * count,
              "p": 1, "q": 2 * count, "hosts": ",".join(f"n{i + 1}" for i in range(count))}
    return replace(template, run_id=f"s{count}{minute}", host="n1", tag="c1",
                   created=f"2026-01-01T00:{minute:02d}:00+00:00", errors=list(errors),
                   provenance={**template.provenance, "cluster": {
                       "role": "scaling", "family": "hpl", "count": count,
                       "nodes": [f"n{i + 1}" for i in range(count)],
                       "metrics": ["rmax", "efficiency"], "grow": ["rmax"],
                       "vary": ["nodes", "n", "ranks", "p", "q", "hosts"]}},
                   metrics=[Metric("hpl", "rmax", "GFLOP/s", params, [rmax]),
                            Metric("hpl", "efficiency", "%", dict(params),
                                           [50.0 * rmax / (100 * count)])])


def test_a_family_across_nodes_gives_its_parallel_efficiency():
    _, runs = clusterdata.campaign(4)
    template = read_json(clusterdata.TEMPLATE)
    runs += [_scaling_run(template, 1, 100.0, 10), _scaling_run(template, 2, 190.0, 11),
             _scaling_run(template, 4, 300.0, 12)]
    v = analyse(runs, "c1")
    # the scaling runs are neither nodes to judge nor their node's probe
    assert v.measured == ["n1", "n2", "n3", "n4"] and not v.findings and not v.flagged
    [rmax] = [k for k in v.weak if k.startswith("hpl.rmax")]
    assert v.weak[rmax] == [(1, 100.0, 1.0), (2, 190.0, 0.95), (4, 300.0, 0.75)]
    [eff] = [k for k in v.weak if k.startswith("hpl.efficiency")]
    assert all(e is None for _, _, e in v.weak[eff])  # a share does not grow with nodes
    doc = v.to_dict()
    assert doc["weak_scaling"][rmax][2] == {"nodes": 4, "median": 300.0,
                                            "parallel_efficiency": 0.75}
    from hpcprobe.cluster import views
    [table] = [b for b in views.blocks(v, lambda n, r: ["drain", n])
               if getattr(b, "title", "").startswith("Across nodes")]
    assert ["hpl.rmax blas=openblas", "4", "300", "GFLOP/s", "75", "75.0 %"] == table.rows[2]
    assert [slug for slug, _, _ in views.figures(v)][-1] == "cluster-weak"
    # a count that failed flags the campaign and says why
    runs.append(_scaling_run(template, 8, 1.0, 13, ["hpl: HPL ... residual check FAILED"]))
    v = analyse(runs, "c1")
    assert v.flagged and v.scaling_errors == ["hpl on 8 node(s): hpl: HPL ... residual check "
                                              "FAILED"]


def _app_run(template, count: int, rate: float, minute: int):
    """LAMMPS across `count` nodes, a rank a node, its atoms grown with the ranks ({ranks})."""
    where = {"ranks": count, "nodes": count, "layout": "numa", "threads": 1,
             "problem_ranks": count, "cpus": "0", "mpi": "Open MPI 4.1.4"}
    return replace(template, run_id=f"a{count}{minute}", host="n1", tag="c1",
                   created=f"2026-01-01T00:{minute:02d}:00+00:00", errors=[],
                   provenance={**template.provenance, "cluster": {
                       "role": "scaling", "family": "app", "count": count,
                       "nodes": [f"n{i + 1}" for i in range(count)], "metrics": [],
                       "grow": [], "vary": ["problem_ranks"], "prefix": "app:"}},
                   metrics=[Metric("app", "app:lammps", "atom-step/s",
                                   {**where, "figure": "atom-step/s"}, [rate, rate]),
                            Metric("app", "app:lammps", "tau/day",
                                   {**where, "figure": "tau/day"}, [rate / count / 100])])


def test_an_application_across_nodes_gives_its_work_rate_and_efficiency():
    """`cluster run --scale app`: the application's figures joined across the counts (the
    problem it was sized for varies with them), its work rate with the parallel efficiency;
    without the family's work rate (an older report) the figures alone."""
    _, runs = clusterdata.campaign(2)
    template = read_json(clusterdata.TEMPLATE)
    runs += [_app_run(template, 1, 1.0e6, 10), _app_run(template, 2, 1.8e6, 11),
             _app_run(template, 4, 3.2e6, 12)]
    rates = verdict.work_rates(registry.capable(Scaling))
    v = analyse(runs, "c1", ignore=registry.not_joined(), rates=rates)
    assert not v.findings
    assert v.weak["app work rate"] == [(1, 1.0e6, 1.0), (2, 1.8e6, 0.9), (4, 3.2e6, 0.8)]
    assert v.weak_units["app work rate"] == "atom-step/s"
    [tau] = [k for k in v.weak if "tau/day" in k]
    assert [(k, e) for k, _, e in v.weak[tau]] == [(1, None), (2, None), (4, None)]
    assert "app work rate" not in analyse(runs, "c1", ignore=registry.not_joined()).weak


@pytest.mark.parametrize("n", [2, 3, 4, 7, 16])
def test_small_fleets_measure_every_pair_once_in_matchings(n):
    rounds = pairs.schedule(n)
    flat = [p for r in rounds for p in r]
    assert sorted(flat) == list(itertools.combinations(range(n), 2))
    for r in rounds:  # a node in at most one pair per round
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))


def test_large_fleets_meet_several_partners_in_linear_pairs():
    n = 1000
    rounds = pairs.schedule(n, random_rounds=3, seed=1)
    partners: dict[int, set[int]] = {i: set() for i in range(n)}
    for r in rounds:
        ends = [x for p in r for x in p]
        assert len(ends) == len(set(ends))
        for a, b in r:
            partners[a].add(b)
            partners[b].add(a)
    assert len(rounds) == 5
    assert min(len(p) for p in partners.values()) >= 4  # the ring's 2 and random ones
    assert sum(len(r) for r in rounds) <= 5 * n // 2
    assert pairs.schedule(n, seed=1) == rounds and pairs.schedule(n, seed=2) != rounds


@pytest.fixture
def stored(tmp_path):
    """A store holding a campaign with a slow node (c1) and a clean one (c2)."""
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st, st.transaction():  # the recorded run, validated once
        for tag, slow in (("c1", {"n5": 0.8}), ("c2", {})):
            _, runs = clusterdata.campaign(8, slow_nodes=slow, tag=tag, seed=len(tag + str(slow)))
            for r in runs:
                st.insert(replace(r, tag=tag))
    return db


def test_cluster_report_exits_1_on_a_finding_and_prints_the_drain_line(stored, tmp_path,
                                                                       capsys):
    out = tmp_path / "c1.html"
    assert main(["cluster", "report", "c1", "--db", str(stored), "-o", str(out)]) == 1
    text = capsys.readouterr().out
    assert "slow node" in text and "n5" in text
    assert "scontrol update NodeName=n5 State=DRAIN" in text
    html = out.read_text()
    assert html.count('<img class="plot"') == 5  # heat map, 3 link matrices, scaling
    assert "Nothing to drain" not in html


def test_a_cluster_report_page_on_standard_output_is_alone_there(stored, capfd):
    assert main(["cluster", "report", "c1", "--db", str(stored), "-o", "-"]) == 1
    out, err = capfd.readouterr()
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "scontrol update NodeName=n5 State=DRAIN" in err and "Wrote -." in err


def test_cluster_report_of_a_clean_campaign_exits_0(stored, capsys):
    assert main(["cluster", "report", "c2", "--db", str(stored)]) == 0
    assert "Nothing flagged." in capsys.readouterr().out


def test_cluster_report_against_a_reference_names_the_nodes_below_it(stored, tmp_path,
                                                                      capsys):
    ref = tmp_path / "ref.toml"
    assert main(["reference", "make", "--tag", "c2", "--db", str(stored), "-o", str(ref)]) == 0
    capsys.readouterr()
    assert main(["cluster", "report", "c2", "--db", str(stored), "--against", str(ref)]) == 0
    assert f"Nodes against {ref}: 0 of 8 below" in " ".join(capsys.readouterr().out.split())
    assert main(["cluster", "report", "c1", "--db", str(stored), "--against", str(ref),
                 "--details"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"Nodes against {ref}: 1 of 8 below" in out and "n5 DRAM triad, 1 core -" in out
    for node in range(1, 9):  # --details: each node's own verdict box
        assert f"n{node}: Verdict: " in out
    assert "n5: Verdict: BELOW the reference" in out and "n4: Verdict: nothing below" in out


def _weekly(db, n: int, slow: str) -> None:
    """Three weekly campaigns of n nodes, then one of n + 1 (campaign c1) where `slow` is 20 %
    slower."""
    with Store.open(db) as st:
        for seed, (tag, k, slowed, day) in enumerate((
                ("c0", n, {}, "2025-12-01"), ("cb", n, {}, "2025-12-08"),
                ("cc", n, {}, "2025-12-15"), ("c1", n + 1, {slow: 0.8}, "2026-01-01"))):
            _, runs = clusterdata.campaign(k, slow_nodes=slowed, tag=tag, seed=k + seed)
            st.save_all([replace(r, created=r.created.replace("2026-01-01", day))
                         for r in runs])


def test_cluster_report_judges_each_node_against_its_own_previous_runs(tmp_path, capsys):
    """Without a file, a node that fell behind its own earlier campaigns (three: fewer judge
    nothing) is named; a node without earlier runs is said to have no reference."""
    db = tmp_path / "r.sqlite"
    _weekly(db, 5, "n5")
    assert main(["cluster", "report", "c0", "--db", str(db)]) == 0
    assert "Nodes: none of the 5 has a reference" in " ".join(capsys.readouterr().out.split())
    assert main(["cluster", "report", "c1", "--db", str(db)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "Nodes against their own previous runs: 1 of 6 below, 1 without a reference" in out
    assert "n5 DRAM triad, 1 core -" in out


def test_a_fleets_verdicts_at_once_are_each_nodes_own(tmp_path):
    """`Against.verdicts` reads every node's previous runs at once; each verdict is the one
    `verdict` makes for the node alone (no history asked): against its own previous runs,
    none for a node without any, and an empty one for the campaign's own run."""
    from hpcprobe import registry

    db = tmp_path / "r.sqlite"
    _weekly(db, 4, "n2")
    with Store.open(db) as st:
        latest = st.load_all(Selection(tag="c1"))
        against = registry.against(None)
        judged = against.verdicts(latest, st)
        assert judged.keys() == {r.run_id for r in latest}
        for r in latest:
            assert judged[r.run_id] == against.verdict(r, st, recent=False)
    by_host = {r.host: judged[r.run_id] for r in latest if r.kind == "node"}
    assert by_host["n5"].reference is None and all(
        by_host[h].reference is not None and "3 previous" in by_host[h].reference.source
        for h in ("n1", "n2", "n3", "n4"))
    assert by_host["n2"].marked("below") and not by_host["n1"].marked("below")


def test_a_nodes_reference_leaves_out_its_interrupted_runs_and_those_of_another_profile(
        tmp_path):
    """A node's previous runs that were interrupted (figures missing) or of another profile
    (other sizes) are not its reference: n1's three weekly runs with one of each left make
    one run, too few to judge; n2's make three."""
    from hpcprobe import registry

    db = tmp_path / "r.sqlite"
    _weekly(db, 4, "n2")
    with Store.open(db) as st:
        cut, other = st.load_ids([r.run_id for r in st.runs(where=Selection(host="n1"))][1:3]
                                 ).values()
        assert st.delete([cut.run_id, other.run_id]) == 2
        st.save_all([replace(cut, provenance={**cut.provenance, "interrupted": {
            "benchmark": "latency", "not_run": []}}), replace(other, profile="thorough")])
    with Store.open(db, create=False) as st:
        latest = st.load_all(Selection(tag="c1"))
        judged = registry.against(None).verdicts(latest, st)
    by_host = {r.host: judged[r.run_id] for r in latest if r.kind == "node"}
    assert "1 previous" in by_host["n1"].reference.source  # type: ignore[union-attr]
    assert "3 previous" in by_host["n2"].reference.source  # type: ignore[union-attr]


def test_cluster_report_names_a_node_that_drifted_from_its_own_past_inside_the_fleet(
        tmp_path, capsys, monkeypatch):
    """Ten nightly campaigns of six nodes whose figures spread by 0.5 %: n3 loses 2.5 % from
    the sixth on, less than the 4 % its peers would flag, but a step in its own history."""
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st, st.transaction():  # the recorded run, validated once
        for night in range(10):
            tag = f"c{night:02d}"
            _, runs = clusterdata.campaign(6, slow_nodes={"n3": 0.975} if night >= 5 else {},
                                           noise=0.005, tag=tag, seed=night)
            for r in runs:
                st.insert(replace(r, tag=tag, created=r.created.replace(
                    "2026-01-01", f"2026-02-{night + 1:02d}")))
    begun: list[bool] = []
    ahead = changes.ahead
    monkeypatch.setattr(changes, "ahead", lambda likely=True: begun.append(likely) or ahead(
        likely))
    # the document to a file and the verdict to the terminal, from one report
    assert main(["cluster", "report", "c09", "--db", str(db), "--json",
                 str(tmp_path / "r.json")]) in (0, 1)
    doc = json.loads((tmp_path / "r.json").read_text())
    out = " ".join(capsys.readouterr().out.split())
    assert not any("n3" in f["nodes"] for f in doc["findings"])  # inside the fleet's spread
    assert list(doc["drifted"]) == ["n3"]
    assert doc["drifted"]["n3"].startswith("since 2026-02-06: DRAM triad, 1 core -2.")
    assert doc["group_changes"] == []  # one node of six does not move the group's median
    assert "Drifted from their own past while inside the fleet's spread (1): n3: " in out
    # the searches' workers were begun ahead where there was a search to make: not the second
    # time (each series' search kept), nor for a history too short to search
    for tag in ("c09", "c03"):
        assert main(["cluster", "report", tag, "--db", str(db)]) in (0, 1)
    assert begun == [True, False, False]


def test_cluster_report_names_a_change_of_the_whole_group_and_what_its_nodes_changed(
        tmp_path, capsys):
    """Ten nightly campaigns of six nodes that all lose 3 % from the sixth on, when their
    kernel changed: no peer is worse than another, the group's medians step."""
    db = tmp_path / "r.sqlite"
    with Store.open(db) as st, st.transaction():  # the recorded run, validated once
        for night in range(10):
            tag = f"c{night:02d}"
            _, runs = clusterdata.campaign(6, slow_nodes={f"n{i}": 0.97 for i in range(1, 7)}
                                           if night >= 5 else {}, noise=0.005, tag=tag,
                                           seed=night)
            for r in runs:
                prov = {**r.provenance, "kernel": "Linux 6.9" if night >= 5 else "Linux 6.1"}
                st.insert(replace(r, tag=tag, provenance=prov, created=r.created.replace(
                    "2026-01-01", f"2026-02-{night + 1:02d}")))
    main(["cluster", "report", "c09", "--db", str(db), "--json", str(tmp_path / "r.json")])
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["findings"] == [] and doc["drifted"] == {}  # the group's change, not theirs
    triad = [x for x in doc["group_changes"] if ": DRAM triad, 1 core -" in x]
    assert len(triad) == 1 and "since 2026-02-06 (c05), 6 of 6 nodes moved" in triad[0]
    assert "6 of 6 changed kernel Linux 6.1 -> Linux 6.9" in triad[0]
    assert "History of the groups' campaign medians" in capsys.readouterr().out


def test_cluster_report_json_and_thresholds(stored, capsys):
    assert main(["cluster", "report", "c1", "--db", str(stored), "--json", "--worse", "50%"]) \
        == 0  # 20 % worse is under a 50 % practical threshold
    doc = json.loads(capsys.readouterr().out)
    assert doc["flagged"] is False and doc["thresholds"]["worse"] == 0.5


@pytest.fixture
def kept(tmp_path):
    """A campaign c1 (n5 20 % slow) whose earlier pass ran with --worse 2 % and whose latest
    ran with 50 %."""
    db = tmp_path / "r.sqlite"
    _, runs = clusterdata.campaign(8, slow_nodes={"n5": 0.8}, seed=3)
    with Store.open(db) as st, st.transaction():  # the recorded run, validated once
        for r in runs:
            if verdict.is_campaign_run(r):
                for minute, worse in ((1, 0.02), (2, 0.5)):  # an earlier pass, then the latest
                    info = {**r.provenance[verdict.CAMPAIGN.key],
                            "thresholds": vars(Thresholds(worse=worse))}
                    r = replace(r, run_id=f"{r.run_id[:-1]}{minute}",
                                created=r.created.replace(":01:", f":{minute:02d}:"),
                                provenance={**r.provenance, verdict.CAMPAIGN.key: info})
                    st.insert(r)
            else:
                st.insert(r)
    return db


def test_cluster_report_judges_with_the_thresholds_the_campaign_ran_with(kept, capsys):
    """A campaign run with --worse 50 % is judged at 50 % by a later report, not at the
    default 4 %, unless the report is given its own; its latest pass's thresholds win."""
    db = kept
    assert main(["cluster", "report", "c1", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["thresholds"]["worse"] == 0.5
    assert main(["cluster", "report", "c1", "--db", str(db), "--json", "--worse", "4%"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["thresholds"]["worse"] == 0.04 and ("slow node", "n5") in [
        (f["kind"], f["item"]) for f in doc["findings"]]


class NoNodes:
    """A scheduler whose allocation is empty: `cluster run`'s plan alone is looked at."""

    def nodes(self, partition: str | None, nodelist: str | None) -> list[str]:
        return []

    def cpus(self, nodes: list[str]) -> dict[str, int]:
        return {}


def test_another_pass_under_a_campaigns_tag_keeps_its_thresholds(kept):
    """`cluster run --tag c1` again judges as c1's latest pass did (50 %), unless told
    otherwise; a new tag starts from the defaults."""
    def plan(*extra: str, tag: str = "c1") -> Thresholds:
        a = build_parser().parse_args(["cluster", "run", "--tag", tag, "--db", str(kept),
                                       *extra])
        with Store.open(kept) as st:
            return cluster_cmd._plan(a, NoNodes(), st, tag, kept.parent, [], []).thresholds

    assert plan() == Thresholds(worse=0.5)
    assert plan("--worse", "4%", "--z", "5") == Thresholds(z=5, worse=0.04)
    assert plan(tag="c2") == Thresholds()


@pytest.mark.parametrize("argv, message", [
    (["cluster", "report", "nosuch"], "campaign 'nosuch': no runs with this tag"),
    (["cluster", "report", "c1", "--worse", "2"], "--worse '2': give a fraction between 0 and 1"),
    (["cluster", "report", "c1", "--z", "-1"], "--z '-1': give a number above 0"),
])
def test_cluster_report_bad_input_is_one_line_and_exit_2(stored, capsys, argv, message):
    assert_exit = pytest.raises(SystemExit) if "--worse" in argv or "--z" in argv else None
    if assert_exit:
        with assert_exit as e:
            main([*argv, "--db", str(stored)])
        assert e.value.code == 2
    else:
        assert main([*argv, "--db", str(stored)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# ---------------------------------------------------------------- issue 48 item 6


def _scaled(run, keep, factor: float):
    """`run` with the samples of the metrics `keep(m)` selects `factor` as good."""
    return replace(run, metrics=[replace(m, samples=[clusterdata._worse(x, m.better, factor)
                                                      for x in m.samples]) if keep(m) else m
                                 for m in run.metrics])


def _one_node(runs, host: str, keep, factor: float):
    return [_scaled(r, keep, factor) if r.host == host else r for r in runs]


def test_a_derived_figure_alone_never_flags_a_node():
    """The untouched node of a 5-node campaign confirmed slow on compute.peak_fraction alone
    (-6.9 %, z 7.15): a share of a model is no verdict on its own; measured figures are."""
    _, runs = clusterdata.campaign(8, noise=0.005)
    runs = _one_node(runs, "n4", lambda m: m.name == "peak_fraction", 0.85)
    v = analyse(runs, "c1", ignore=registry.not_joined())
    assert kinds(v) == [] and [f.item for f in v.suspects] == ["n4"]
    assert {d.metric.split()[0] for d in v.suspects[0].evidence} == {"compute.peak_fraction"}
    assert "n4" not in [node for node, _ in views.to_drain(v)]
    # without the families' declarations the same figure would have drained it
    assert kinds(analyse(runs, "c1")) == [(SLOW_NODE, "n4")]


def _first(benchmark: str, name: str):
    """A test on one figure of the template: the first metric of that benchmark and name."""
    t = read_json(clusterdata.TEMPLATE)
    first = next(m for m in t.metrics if (m.benchmark, m.name) == (benchmark, name))
    return lambda m: (m.benchmark, m.name, m.params) == (benchmark, name, first.params)


def test_one_marginal_measured_figure_is_a_suspect_and_two_or_a_large_one_a_slow_node():
    _, runs = clusterdata.campaign(8, noise=0.002)
    clock, latency = _first("frequency", "clock"), _first("latency", "latency")
    one = _one_node(runs, "n2", clock, 0.94)  # 6 % worse
    v = analyse(one, "c1", ignore=registry.not_joined())
    assert kinds(v) == [] and [f.item for f in v.suspects] == ["n2"]
    far = _one_node(runs, "n2", clock, 0.8)  # 20 % worse
    assert kinds(analyse(far, "c1", ignore=registry.not_joined())) == [(SLOW_NODE, "n2")]
    two = _one_node(runs, "n2", lambda m: clock(m) or latency(m), 0.94)
    v = analyse(two, "c1", ignore=registry.not_joined())
    assert kinds(v) == [(SLOW_NODE, "n2")] and not v.suspects


def test_one_measured_figure_barely_past_the_z_score_is_a_suspect_however_far_it_fell():
    """The 5-node campaign's one false drain: n1's DRAM `add` -17.5 % at z 4.0 (its peers
    spread nearly as much), confirmed on re-measure, all its other figures fine. Far past the
    practical threshold, barely past the z-score: a suspect. The same fall among tight peers,
    or one `far` (3x) worse however spread they are, is a slow node."""
    _, runs = clusterdata.campaign(8, noise=0.002)
    clock = _first("frequency", "clock")
    spread = dict(zip(["n1", "n2", "n3", "n4", "n5", "n6", "n7"],
                      [1.0, 0.98, 1.02, 0.97, 1.03, 0.975, 1.025], strict=True))
    apart = [_scaled(r, clock, spread.get(r.host, 0.83)) if r.host != "login" else r
             for r in runs]
    v = analyse(apart, "c1", ignore=registry.not_joined())
    assert kinds(v) == [] and [f.item for f in v.suspects] == ["n8"]
    (d,) = v.suspects[0].evidence
    assert 0.16 < d.worse < 0.18 and 3.5 < d.z < 7.0 and not d.far
    assert "n8" not in [node for node, _ in views.to_drain(v)]
    tight = _one_node(runs, "n8", clock, 0.83)
    assert kinds(analyse(tight, "c1", ignore=registry.not_joined())) == [(SLOW_NODE, "n8")]
    far = [_scaled(r, clock, spread.get(r.host, 0.3)) if r.host != "login" else r
           for r in runs]
    v = analyse(far, "c1", ignore=registry.not_joined())
    assert kinds(v) == [(SLOW_NODE, "n8")] and v.findings[0].evidence[0].far


def test_a_node_measured_again_rests_on_the_figures_flagged_both_times():
    """A campaign's false drain: n3 flagged on two figures, measured again, flagged on one of
    them, 6.7 % worse: what was confirmed is one marginal figure, a suspect. Both again: slow."""
    _, runs = clusterdata.campaign(8, noise=0.002)
    clock, latency = _first("frequency", "clock"), _first("latency", "latency")
    both = _one_node(runs, "n3", lambda m: clock(m) or latency(m), 0.94)
    again = clusterdata.node_run(read_json(clusterdata.TEMPLATE), "n3", 1.0, random.Random(4),
                                 0.002, 5, "c1")
    v = analyse(both + [_scaled(again, clock, 0.94)], "c1", ignore=registry.not_joined())
    assert kinds(v) == [] and [f.item for f in v.suspects] == ["n3"]
    assert {d.metric.split()[0] for d in v.suspects[0].evidence} == {"frequency.clock"}
    v = analyse(both + [_scaled(again, lambda m: clock(m) or latency(m), 0.94)], "c1",
                ignore=registry.not_joined())
    assert kinds(v) == [(SLOW_NODE, "n3")] and v.findings[0].confirmed


def _bandwidths(runs, factor):
    """The campaign's link bandwidths, each `factor(sender, receiver)` as fast."""
    camp = next(r for r in runs if r.host == "login")
    metrics = [replace(m, samples=[x * factor(m.params["from"], m.params["to"])
                                   for x in m.samples])
               if m.name == "bandwidth" and m.benchmark == "links" else m for m in camp.metrics]
    return [replace(r, metrics=metrics) if r is camp else r for r in runs]


def test_a_node_a_little_below_peers_whose_links_scatter_widely_is_no_slow_endpoint():
    """The 5-node fabric's other false drain: its links scatter 4x among themselves, the
    nodes' medians of them agreed within 1 %, and n3's, 20 % below, was a slow endpoint at
    z 11.7. The links' own scatter bounds how close the medians can be told apart: n3 is
    not one; a port at 3 % of its peers still is, and is left out of the others' figures."""
    _, runs = clusterdata.campaign(5, noise=0.0)
    out = {"n1": [0.5, 0.9, 1.1, 2.0], "n2": [0.6, 0.95, 1.05, 1.8], "n3": [0.5, 0.79, 0.81, 0.95],
           "n4": [0.4, 0.98, 1.04, 2.2], "n5": [0.7, 0.97, 1.01, 1.6]}
    nodes = sorted(out)
    factor = {(a, b): out[a][i] for a in nodes for i, b in enumerate(n for n in nodes if n != a)}
    v = analyse(_bandwidths(runs, lambda a, b: factor[(a, b)]), "c1",
                ignore=registry.not_joined())
    assert kinds(v) == []
    v = analyse(_bandwidths(runs, lambda a, b: factor[(a, b)] * (0.03 if b == "n5" else 1)),
                "c1", ignore=registry.not_joined())
    assert kinds(v) == [(SLOW_ENDPOINT, "n5")]


def _spread_links(runs, slow: tuple[str, str], factor: float):
    """The campaign's link bandwidths spread over a factor of 11 between pairs (log-uniform:
    a z-score on the logs does not see 6x, as 123-468 MB/s on the namespace fabric did not),
    one link `factor` as fast as their median."""
    rng = random.Random(3)
    spread: dict[tuple[str, str], float] = {}
    camp = next(r for r in runs if r.host == "login")
    metrics = []
    for m in camp.metrics:
        if m.name == "bandwidth" and m.benchmark == "links":
            k = (m.params["from"], m.params["to"])
            f = factor if k == slow else spread.setdefault(
                k, math.exp(rng.uniform(math.log(0.3), math.log(3.3))))
            m = replace(m, samples=[x * f for x in m.samples])
        metrics.append(m)
    return [replace(r, metrics=metrics) if r is camp else r for r in runs]


def test_a_link_many_times_slower_than_spread_peers_is_flagged():
    _, runs = clusterdata.campaign(6)
    runs = _spread_links(runs, ("n2", "n5"), 1 / 6)
    v = analyse(runs, "c1", ignore=registry.not_joined())
    assert (SLOW_LINK, "n2 - n5") in kinds(v)
    # the far rule is what finds it: a z-score alone does not see it among spread peers
    hidden = analyse(runs, "c1", Thresholds(far=1e9), ignore=registry.not_joined())
    assert (SLOW_LINK, "n2 - n5") not in kinds(hidden)


def test_a_far_slower_link_that_cannot_be_judged_says_why():
    """Its end is a slow node: the link is not judged alone, and not silent either."""
    _, runs = clusterdata.campaign(8, slow_nodes={"n3": 0.5})
    runs = _spread_links(runs, ("n3", "n6"), 1 / 6)
    v = analyse(runs, "c1", ignore=registry.not_joined())
    assert (SLOW_LINK, "n3 - n6") not in kinds(v) and (SLOW_NODE, "n3") in kinds(v)
    said = [u for u in v.unjudged if "n3 -> n6" in u]
    assert said and "worse than the median" in said[0] and "flagged slow" in said[0]


def test_a_derived_figure_a_node_lacks_is_not_a_missing_figure():
    """The roofline's compute ceiling names the peak kernel that was fastest on the node: one
    node's fastest being another kernel is no figure missing (it once drained an untouched
    node of the 5-node campaign)."""
    _, runs = clusterdata.campaign(6)
    runs = [replace(r, metrics=[replace(m, params={**m.params, "op": "fma"})
                                if m.name == "compute_ceiling" else m for m in r.metrics])
            if r.host == "n5" else r for r in runs]
    v = analyse(runs, "c1", ignore=registry.not_joined())
    assert "n5" not in v.missing and not v.flagged
    assert "n5" in analyse(runs, "c1").missing  # without the families' declarations


def test_a_pass_narrowed_to_stale_suspect_failed_or_flagged_nodes():
    """Each node's result stands for its profile's window (quick: a day), or for the window
    given; a new pass takes the nodes that failed, were flagged, are suspects or whose result
    expired, each once, in that order."""
    from datetime import UTC, datetime, timedelta

    _, runs = clusterdata.campaign(8, noise=0.005, failed={"n8": "its job was cancelled"})
    runs = _one_node(runs, "n4", lambda m: m.name == "peak_fraction", 0.85)  # a suspect
    runs = _one_node(runs, "n2", lambda m: True, 0.6)  # slow
    v = analyse(runs, "c1", ignore=registry.not_joined())
    assert kinds(v) == [(SLOW_NODE, "n2")] and [f.item for f in v.suspects] == ["n4"]
    measured = datetime.fromisoformat(next(r.created for r in runs if r.host == "n1"))
    assert v.valid_until("n1") == measured + timedelta(days=1)  # the quick profile's day
    assert v.to_dict()["valid_until"]["n1"] == (measured + timedelta(days=1)).isoformat()
    soon, later = measured + timedelta(hours=2), measured + timedelta(days=2)
    assert v.stale(soon) == [] and v.stale(later) == [f"n{i}" for i in range(1, 8)]
    assert v.stale(soon, valid_s=3600) == v.stale(later)  # --valid-for 1h
    assert v.select(("failed", "flagged", "suspect"), soon) == ["n8", "n2", "n4"]
    assert v.select(("suspect", "stale"), later)[:2] == ["n4", "n1"]
    assert v.select(("stale",), soon) == [] and later.tzinfo == UTC


@pytest.mark.parametrize(("argv", "said"), [
    (["--only", "stale,nosuch"], "'nosuch': give one or more of failed, flagged, suspect, "
                                 "stale"),
    (["--only", "stale", "--valid-for", "soon"], "'soon': give a duration"),
    (["--only", "stale"], "--only stale: name the campaign with --tag")])
def test_a_narrowed_pass_given_wrong_is_one_line(tmp_path, capsys, argv, said):
    """One line, before the scheduler or the store is asked anything."""
    try:
        code = main(["cluster", "run", *argv, "--db", str(tmp_path / "r.sqlite"), "--dry-run"])
    except SystemExit as exc:  # a value argparse refused
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and said in err, err
    assert not (tmp_path / "r.sqlite").exists()


def test_a_slow_link_is_measured_again_with_known_good_partners_of_each_end():
    """Flagged once, a slow link is measured again, and each of its ends with two known-good
    partners (nodes nothing was said of): the link alone slow again confirms the link, both
    ends well with good partners; an end slow with its good partners too is that end."""
    from hpcprobe.cluster import campaign

    nodes, runs = clusterdata.campaign(12, slow_links={("n2", "n7"): 0.5})
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_LINK, "n2 - n7")]
    good = campaign.known_good(v)
    assert "n2" not in good and "n7" not in good and len(good) == 10
    again, links = campaign.to_remeasure(v)
    assert again == [] and {frozenset(k) for k in links} == {
        frozenset(k) for k in (("n2", "n7"), *((e, g) for e in ("n2", "n7") for g in good[:2]))}
    rng = random.Random(5)
    rounds = pairs.matchings(links)
    cable = clusterdata.campaign_run(nodes, rng, 0.01, "c1", 30, {("n2", "n7"): 0.5}, {}, {},
                                     role="re-measure", rounds=rounds)
    v = analyse([*runs, cable], "c1")
    assert kinds(v) == [(SLOW_LINK, "n2 - n7")] and v.findings[0].confirmed
    # a port slow from the first pass: a slow endpoint, measured again with its links and
    # two known-good partners, all slow again: confirmed, the endpoint and not its links
    nodes, runs = clusterdata.campaign(12, slow_endpoints={"n2": 0.6})
    v = analyse(runs, "c1")
    assert kinds(v) == [(SLOW_ENDPOINT, "n2")]
    _, links = campaign.to_remeasure(v)
    assert {frozenset(k) for k in links} >= {frozenset(("n2", g))
                                             for g in campaign.known_good(v)[:2]}
    port = clusterdata.campaign_run(nodes, rng, 0.01, "c1", 30, {}, {"n2": 0.6}, {},
                                    role="re-measure", rounds=pairs.matchings(links))
    v = analyse([*runs, port], "c1")
    assert kinds(v) == [(SLOW_ENDPOINT, "n2")] and v.findings[0].confirmed
