"""The whole product path on every machine the project claims (tests/recorded.py): each family
plans on it, the families that run in this process measure its model through the CLI (the
native core's place taken by the model of the node's figures), and what follows runs as it does
on a real node: derive, validate, store in SQLite and PostgreSQL, the verdict with its
ceilings, `reference make`, `run --against`, `check --against`, `history`, the HTML report, the
Prometheus file, and `cluster report` over a campaign of such nodes. Faults injected into the
model are found by the judgement they belong to; a clean node is not flagged."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

import clusterdata
from gpunodes import DATA as GPU_DATA
from gpunodes import a100_node, vm_node
from hpcprobe import cli, registry
from hpcprobe.common.errors import UserError
from hpcprobe.machine import gpus, topology
from hpcprobe.measure import profiles
from hpcprobe.measure.family import Check, Default, Headlines
from hpcprobe.results import model
from hpcprobe.results.model import Run
from hpcprobe.results.store import Store
from recorded import NODES, Node, recorded, with_figures

#: The families that run in this process on the model (the others start programs: MPI, HPL,
#: CUDA, a user's application; their own tests run them for real on this machine).
MODELLED = ("memory", "latency", "numa", "frequency", "compute")
HEADLINED = tuple(n for n in MODELLED if n in registry.capable(Headlines))
IDS = [n.name for n in NODES]


@dataclass
class Said:
    code: int
    out: str
    err: str


def hp(*args: str | Path) -> Said:
    """The CLI in this process, as the recorded node."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    return Said(code, out.getvalue(), err.getvalue())


def ok(*args: str | Path) -> Said:
    said = hp(*args)
    assert said.code == 0, f"hpcprobe {' '.join(map(str, args))}: exit {said.code}\n{said.err}"
    return said


@contextlib.contextmanager
def as_node(node: Node, root: Path) -> Iterator[None]:
    """This process as `node`: its recorded trees, its model, its GPUs (if any)."""
    with pytest.MonkeyPatch.context() as mp, recorded(node, mp) as topo:
        mp.setattr(topology, "discover", lambda use_hwloc=True: topo)
        inv = _gpus(node, root)
        mp.setattr(gpus, "discover", lambda *a, **k: inv)
        yield


def _gpus(node: Node, root: Path) -> gpus.Inventory:
    """The node's GPUs from its recorded nvidia-smi document and PCIe tree; none without."""
    root.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=root))
    if node.gpus == "a100":
        sysfs, proc = a100_node(root)
        return gpus.from_smi((GPU_DATA / "a100-8gpu-2s.xml").read_text(), sysfs, proc)
    if node.gpus == "h100-vm":
        return gpus.from_smi((GPU_DATA / "h100-vm-580.xml").read_text(), vm_node(root),
                             root / "proc")
    return gpus.Inventory((), none_why="no GPU: no NVIDIA driver (nvidia-smi is not installed)")


@dataclass
class Measured:
    """What the path made on one node: its store, the reference made from its first run, and
    its runs (the second judged against that reference)."""

    node: Node
    db: Path
    ref: Path
    runs: list[Run]
    said: list[Said]


def _measure(node: Node, where: Path) -> Measured:
    db, ref, prom = where / "s.sqlite", where / "ref.toml", where / "node.prom"
    with as_node(node, where / "trees"):
        first = ok("run", *MODELLED, "--quick", "--db", db, "--json", where / "first.json")
        # the health tier's first run: nothing to judge it by yet, which is no failure
        unjudged = hp("check", "--db", db, "--counters", where / "c.json")
        if node.recorded_faults:
            assert unjudged.code == 1 and unjudged.out.startswith("FAIL"), unjudged
        else:
            assert unjudged.code == 3 and unjudged.out.startswith("CANNOT JUDGE"), unjudged
        ok("reference", "make", "--host", node.name, "--db", db, "-o", ref)
        # the headline families again (the NUMA matrix, no headline, ran once above)
        second = ok("run", *HEADLINED, "--quick", "--db", db, "--against", ref,
                    "--prometheus", prom)
    with Store.open(str(db), create=False) as st:
        runs = [st.load(r.run_id) for r in st.runs() if r.profile == "quick"]
    # the first run first: a modelled guest's two runs can share their second of `created`
    first_id = json.loads((where / "first.json").read_text())["run_id"]
    return Measured(node, db, ref, sorted(runs, key=lambda r: r.run_id != first_id),
                    [first, second])


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Measured]:
    """Every recorded node measured once for the module's tests."""
    return {n.name: _measure(n, tmp_path_factory.mktemp(n.name)) for n in NODES}


# -- plans --------------------------------------------------------------------------------------

@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_every_family_plans_on(node: Node, tmp_path: Path) -> None:
    """Every family's plan (the default profile; the default families' in the quick one through
    the CLI): a list of what it measures, or one clear line
    where it needs what the node lacks; never a crash."""
    with as_node(node, tmp_path):
        topo = topology.discover()
        for f in registry.measuring():
            try:
                registry.plan(topo, profiles.get("default"), [f.name], node.isas()[-1],
                              {f.name: f.options()})
            except UserError as exc:
                assert str(exc) and "\n" not in str(exc)
        said = ok("run", "--dry-run", "--quick")
        for f in registry.resolve(None):
            assert f.name in said.out


# -- the measured path --------------------------------------------------------------------------

@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_runs_are_whole_valid_and_stored(node: Node, measured: dict[str, Measured],
                                         tmp_path: Path) -> None:
    m = measured[node.name]
    assert len(m.runs) == 2 and m.runs[0].benchmarks == list(MODELLED)
    first = json.loads((m.db.parent / "first.json").read_text())
    model.validate(first)
    for run in m.runs:
        assert not run.errors, run.errors
        model.validate(run.to_dict())
        # every family that ran left figures, and every figure is one its family declared
        have = {x.benchmark for x in run.metrics}
        for name in run.benchmarks:
            assert name in have or any(d.get("benchmark") == name for d in run.findings)
        for x in run.metrics:
            assert registry.families()[x.benchmark].declares(x), (x.benchmark, x.name)
    # the roofline derives from memory and compute on every row of the tables
    derived = {x.name for x in m.runs[0].metrics if x.benchmark == "roofline"}
    assert {"compute_ceiling", "bandwidth_ceiling", "ridge_point"} <= derived


@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_the_verdict_judges_against_ceiling_and_reference(node: Node,
                                                          measured: dict[str, Measured]) -> None:
    m = measured[node.name]
    second = m.said[1].out
    assert "Verdict:" in second and "BELOW" not in second
    v = registry.judge(m.runs[1], None)
    marks = {r.mark for r in v.rows}
    assert "above ceiling" not in marks, [(r.headline.label, r.headline.ceiling) for r in v.rows]
    ceilings = [r.headline for r in v.rows if r.headline.ceiling is not None]
    if node.smbios:  # the DRAM triad on all cores against channels x MT/s x 8 B
        assert any("DRAM triad" in h.label for h in ceilings)
    # a cache level's figure below its ports' ceiling, wherever the tables give one
    for c in m.runs[1].select("roofline", "port_ceiling"):
        best = max(x.summary.median for x in m.runs[1].select("memory", "bandwidth")
                   if (x.params["level"], x.params["threads"]) ==
                   (c.params["level"], c.params["threads"]))
        assert best <= c.summary.median, c.params
    prom = (m.db.parent / "node.prom").read_text()
    assert f'host="{node.name}"' in prom and "hpcprobe_figure_verdict" in prom


@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_show_report_history_and_export(node: Node, measured: dict[str, Measured]) -> None:
    m = measured[node.name]
    with as_node(node, m.db.parent / "trees"):
        details = ok("show", "latest", "--details", "--db", m.db).out
        assert "Verdict:" in details
        ok("report", "latest", "-o", m.db.parent / "r.html", "--db", m.db)
        assert "<html" in (m.db.parent / "r.html").read_text()[:500].lower()
        ok("history", "--db", m.db)
        lines = ok("export", "--db", m.db).out.splitlines()
        assert len(lines) > sum(len(r.metrics) for r in m.runs)  # and the check runs'
        assert {json.loads(line)["host"] for line in lines} == {node.name}
        exposition = ok("export", "--format", "openmetrics", "--db", m.db).out
        assert f'host="{node.name}"' in exposition and exposition.rstrip().endswith("# EOF")


@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_the_reference_in_other_tools_formats(node: Node, measured: dict[str, Measured],
                                              tmp_path: Path) -> None:
    """`reference export`: JSON bounds, ReFrame references that ReFrame itself checks a figure
    by, NHC lines, a ClusterCockpit subcluster, each from the node's reference."""
    from reframe.core.exceptions import SanityError
    from reframe.utility import ScopedDict
    from reframe.utility.sanity import assert_reference, evaluate

    ref = measured[node.name].ref
    doc = json.loads(ok("reference", "export", ref, "--format", "json").out)
    names = [g["name"] for g in doc["groups"]]  # the quick runs', the checks'
    i, group = next((i, g) for i, g in enumerate(doc["groups"]) if g["profile"] == "quick")
    assert group["figures"]
    for f in group["figures"]:  # the side that can fail has its bound, the other none
        bound = f["lower"] if f["better"] == "higher" else f["upper"]
        assert bound == pytest.approx(f["value"] * (1 + (-1 if f["better"] == "higher" else 1)
                                                    * f["tolerance"]))
        assert (f["upper"] if f["better"] == "higher" else f["lower"]) is None
    out = tmp_path / "refs.py"
    ok("reference", "export", ref, "--format", "reframe", "--system", "cluster:cpu", "-o", out)
    space: dict[str, object] = {}
    exec(out.read_text(), space)  # a Python file, as a ReFrame test imports it
    refs = space["REFERENCES"]
    assert list(refs) == names  # type: ignore[call-overload]
    scoped = ScopedDict(refs[group["name"]])  # type: ignore[index]
    for f in group["figures"]:
        value, lower, upper, unit = scoped[f"cluster:cpu:{f['name']}"]
        assert (value, unit) == (f["value"], f["unit"])
        assert evaluate(assert_reference(value, value, lower, upper))  # its own value passes
        far = value * (0.4 if f["better"] == "higher" else 2.0)
        with pytest.raises(SanityError):  # and one far on its failing side does not
            evaluate(assert_reference(far, value, lower, upper))
    nhc = ok("reference", "export", ref, "--format", "nhc", "--hosts", "n[001-128]").out
    [line] = [x for x in nhc.splitlines() if not x.startswith("#")]
    assert line.startswith("n[001-128] || check_cmd_status -t 600 -r 0 sh -c ")
    assert f"check --against {ref}" in line and "test $? -ne 1" in line
    cc = json.loads(ok("reference", "export", ref, "--format", "clustercockpit").out)
    assert len(cc["subClusters"]) == len(names)
    sub = cc["subClusters"][i]
    counts = measured[node.name].runs[0].topology["counts"]
    assert (sub["socketsPerNode"], sub["coresPerSocket"] * sub["socketsPerNode"]) == \
        (counts["packages"], counts["cores"])
    for field in ("flopRateSimd", "memoryBandwidth"):
        if field in sub:
            assert set(sub[field]) == {"unit", "value"} and sub[field]["value"] > 0
    assert "flopRateSimd" in sub  # every recorded node measures the DP peak


@pytest.mark.parametrize("node", NODES, ids=IDS)
def test_a_clean_node_passes_its_check(node: Node, measured: dict[str, Measured],
                                       tmp_path: Path) -> None:
    said = _check(node, measured[node.name], tmp_path)
    if node.recorded_faults:  # found by the GPUs' health, each named
        assert said.code == 1 and said.out.startswith("FAIL"), said.out + said.err
        assert all(f in said.out for f in node.recorded_faults), said.out
        return
    assert said.code == 0, said.out + said.err
    assert said.out.startswith("PASS")


def test_both_stores_hold_the_same(measured: dict[str, Measured], pg_url: str) -> None:
    """Every node's first run stored in PostgreSQL reads back as it was, and judges alike."""
    with Store.open(pg_url, create=True) as pg:
        for m in measured.values():
            pg.save(m.runs[0])
    with Store.open(pg_url, create=False) as pg:
        for m in measured.values():
            for run in m.runs[:1]:
                back = pg.load(run.run_id)
                assert back.to_dict() == run.to_dict()
                assert [r.mark for r in registry.judge(back, None).rows] == \
                    [r.mark for r in registry.judge(run, None).rows]


@pytest.mark.parametrize("node", NODES[:3] + NODES[-1:], ids=IDS[:3] + IDS[-1:])
def test_a_campaign_of_such_nodes_finds_the_slow_one(node: Node, measured: dict[str, Measured],
                                                     tmp_path: Path) -> None:
    template = measured[node.name].runs[0]
    nodes, runs = clusterdata.campaign(6, slow_nodes={"n4": 0.85}, template=template,
                                       noise=0.003)
    db = tmp_path / "c.sqlite"
    with Store.open(str(db), create=True) as st:
        for r in runs:
            st.save(r)
    said = hp("cluster", "report", "c1", "--db", db)
    assert said.code == 1, said.out + said.err  # a slow node: exit 1
    flagged = [line for line in said.out.splitlines() if "slow" in line.lower()]
    assert any("n4" in line for line in flagged), said.out
    assert not any(f"n{i}" in line for line in flagged for i in (1, 2, 3, 5, 6))


# -- faults: found by the judgement they belong to ----------------------------------------------

def _check(node: Node, m: Measured, where: Path, *extra: str) -> Said:
    with as_node(node, where / "trees"):
        return hp("check", "--against", m.ref, "--db", m.db, "--counters", where / "c.json",
                  *extra)


def test_a_missing_dimm_fails_the_check_and_names_the_channel(measured: dict[str, Measured],
                                                              tmp_path: Path) -> None:
    clean = NODES[0]
    assert clean.smbios == "epyc-7763-2s-full"
    faulty = replace(with_figures(clean, dram_socket_gbs=clean.figures.dram_socket_gbs * 7 / 8),
                     smbios="epyc-7763-2s-one-missing")
    said = _check(faulty, measured[clean.name], tmp_path)
    assert said.code == 1 and said.out.startswith("FAIL"), said.out + said.err
    assert "DIMM" in said.out or "channel" in said.out, said.out


def test_one_slow_core_fails_the_check(measured: dict[str, Measured], tmp_path: Path) -> None:
    clean = NODES[0]
    slow = with_figures(clean, slow_cpus={17: 0.7})
    said = _check(slow, measured[clean.name], tmp_path)
    assert said.code == 1 and said.out.startswith("FAIL"), said.out + said.err


def test_a_port_at_half_its_rate_fails_the_check(measured: dict[str, Measured],
                                                 tmp_path: Path) -> None:
    clean = NODES[0]
    degraded = replace(clean, links="hdr-node-degraded")
    said = _check(degraded, measured[clean.name], tmp_path, "--state-only")
    assert said.code == 1 and said.out.startswith("FAIL"), said.out + said.err


def test_a_gpu_gone_fails_the_check(measured: dict[str, Measured], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    node = next(n for n in NODES if n.gpus and not n.recorded_faults)
    m = measured[node.name]
    with as_node(node, tmp_path / "trees"):
        monkeypatch.setattr(gpus, "discover", lambda *a, **k: gpus.Inventory(
            (), none_why="no GPU: nvidia-smi lists none"))
        said = hp("check", "--against", m.ref, "--db", m.db, "--counters", tmp_path / "c.json",
                  "--state-only")
    assert said.code == 1 and said.out.startswith("FAIL"), said.out + said.err
    assert "GPU" in said.out


def test_the_checking_families_are_modelled() -> None:
    """The check measures what the model stands in for: a family that joins the health tier
    or the node probe must join MODELLED (or bring its own stand-in) in the same change."""
    assert set(registry.capable(Check)) <= set(MODELLED)
    assert {n for n, d in registry.capable(Default).items() if d.probe} <= set(MODELLED)


def test_a_run_the_store_refuses_says_so_and_claims_nothing(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """What lost every run on AMD EPYC (a figure the schema refused): the verdict is shown, the
    refusal said in one line, and nothing claims that later runs are judged against it."""
    node = NODES[-1]
    refusal = "result: not an hpcprobe result at metrics/611/name: 'port_ceiling' is not one of"
    real = model.validate

    def stale(doc: dict, source: str = "result") -> None:
        if any(m["name"] == "port_ceiling" or m["benchmark"] == "memory" for m in doc["metrics"]):
            raise UserError(refusal)
        real(doc, source)

    monkeypatch.setattr(model, "validate", stale)
    db = tmp_path / "s.sqlite"
    with as_node(node, tmp_path / "trees"):
        said = hp("run", "memory", "--quick", "--db", db)
    assert said.code == 1
    assert "Verdict:" in said.out and "judged against this one" not in said.out
    assert "not stored" in said.out and refusal in said.err
    assert not db.exists()
