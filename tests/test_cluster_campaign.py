"""`hpcprobe cluster run` on the namespace Slurm cluster (tests/slurmcluster.py), with faults
injected: a clean cluster flags nothing; a node whose slurmd (and every job it starts) runs
under a CPU quota is a slow node and nothing else; a token bucket on a node's port makes it a
slow network endpoint (or its links slow links), never a slow node; a node whose slurmd is
killed mid-campaign is reported failed while the others complete, and `--only failed` measures
it once it is back. The node probe is the compute benchmark (seconds per node); node jobs run
one at a time, as four nodes share this machine's two CPUs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import slurmcluster
from hpcprobe import native
from hpcprobe.judge import kept
from hpcprobe.results.store import Selection, Store

pytestmark = pytest.mark.skipif(slurmcluster.missing() is not None,
                                reason=str(slurmcluster.missing()))

#: The node probe: the compute benchmark on one core, its widest ISA's kernels. The four nodes,
#: the controller and the driver share this machine's two CPUs (on a cluster the driver runs on
#: a login node): an all-core figure here measures the harness too (-37 % on one node of a clean
#: cluster, twice). The scalar mul+add kernels are left out: on a quiet Zen 3 guest they read 54
#: to 97 % of their model from one run to the next (the vector kernels 70-101 %), and a clean
#: campaign once flagged n1 for its scalar SP figure at -50.6 %, confirmed.
PROBE = ["--probe", "compute", "--probe-args", f"--threads 1 --isa {native.best_isa()}",
         "--concurrency", "1", "--ranks-per-node", "1", "--link-parallel", "1"]
#: The practical threshold of the campaigns here: four "nodes" share two CPUs, and their links
#: move by factors. In one campaign the 8 B message rate of the six pairs spanned
#: 130,000-294,000/s and their latency 5.5-11.6 us; a node's links taken together were up to 36 %
#: worse than the others'; n1's bandwidth out of the node was 16-18 % below the others' in two
#: of three campaigns (n1 is the links job's first node, where its batch script and srun run).
#: At 25 % a campaign with n3's port shaped once flagged n1 too, confirmed, in CI. At 50 % two
#: CI runs on a Zen 3 guest flagged n1 for one peak kernel at half its peers' rate (scalar SP
#: mul+add -50.6 %, confirmed; AVX2 SP fma+add -51.3 %): the peak kernels there swing up to 2x
#: from one run to the next. The faults injected below are 75 % worse or more (CPU quota:
#: 75-82 %; shaped port: 98 %), so 60 % lies between the noise and the faults.
WORSE = ["--worse", "0.6"]


def hpcprobe(c: slurmcluster.Cluster, *argv: str, timeout: float = 300
             ) -> subprocess.CompletedProcess[str]:
    """hpcprobe on the cluster's login node (the hub namespace, its slurm.conf). Four nodes on
    two CPUs: idle MPI ranks yield their CPU to the busy ones."""
    return c.client(sys.executable, "-m", "hpcprobe", *argv, timeout=timeout,
                    env={"OMPI_MCA_mpi_yield_when_idle": "1"})


def campaign(c: slurmcluster.Cluster, tmp: Path, tag: str, *extra: str
             ) -> tuple[subprocess.CompletedProcess[str], dict]:
    r = hpcprobe(c, "cluster", "run", "-p", "test", "--tag", tag, "--db", str(tmp / "r.sqlite"),
                 "--workdir", str(tmp / tag), *PROBE, *WORSE, *extra)
    with Store.open(tmp / "r.sqlite") as st:  # the driver kept what its report reads
        nodes = [x.run_id for x in st.load_all(Selection(tag=tag), metrics=False)
                 if x.kind == "node"]
        figures = st.kept(kept.FIGURES, nodes)
        assert figures.keys() == st.kept(kept.HEADLINES, nodes).keys()
        assert figures or r.returncode != 0, r.stdout[-2000:] + r.stderr
    # judged with the thresholds the campaign ran with (WORSE), not given again
    rep = hpcprobe(c, "cluster", "report", tag, "--db", str(tmp / "r.sqlite"), "--json")
    assert rep.returncode in (0, 1), rep.stderr
    return r, json.loads(rep.stdout)


def findings(doc: dict) -> list[tuple[str, str]]:
    return [(f["kind"], f["item"]) for f in doc["findings"]]


@pytest.fixture(scope="module")
def cluster():
    with slurmcluster.cluster(4) as c:
        yield c


@pytest.mark.alone  # judged: a test beside it makes the nodes busy
def test_a_clean_cluster_flags_nothing(cluster, tmp_path):
    # the node jobs run the node's own install (--node-hpcprobe: the node image's), here a
    # program that says on which node it started, then runs this hpcprobe
    started = tmp_path / "started"
    program = tmp_path / "node-hpcprobe"
    program.write_text(f'#!/bin/sh\nhostname >> {started}\nexec {sys.executable} -m hpcprobe '
                       '"$@"\n')
    program.chmod(0o755)
    r, doc = campaign(cluster, tmp_path, "clean", "--node-hpcprobe", str(program))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert sorted(started.read_text().split()) == ["n1", "n2", "n3", "n4"]
    assert findings(doc) == [] and doc["failed"] == {} and doc["flagged"] is False
    assert "Nothing flagged." in r.stdout and "Nothing to drain." in r.stdout
    with Store.open(tmp_path / "r.sqlite") as st:
        runs = st.load_all(Selection(tag="clean"))
    assert {r.host for r in runs if "compute" in r.benchmarks} == {"n1", "n2", "n3", "n4"}
    # every pair measured: latency, bandwidth each way, message rate; collectives on 2, 4
    pairs = {(x["a"], x["b"]) for x in doc["links"]["links.latency size=8"]}
    assert len(pairs) == 6 and len(doc["links"]["links.bandwidth size=1048576"]) == 12
    assert [p["nodes"] for p in doc["scaling"]["allreduce 8 B"]] == [2, 4]
    assert all(x["median"] > 0 for x in doc["links"]["links.latency size=8"])


@pytest.mark.alone  # judged: a test beside it makes the nodes busy
def test_a_node_under_a_cpu_quota_is_a_slow_node_and_nothing_else(cluster, tmp_path):
    with cluster.slow("n2", share=0.2):
        r, doc = campaign(cluster, tmp_path, "slow")
    # the nodes' verdict is the fault's; a link between two untouched nodes was once confirmed
    # slow too (n1 - n3, in CI): four nodes on two CPUs move a pair's figures by 20 % and more,
    # and links are the shaped-port test's to judge
    got = findings(doc)
    assert [f for f in got if f[0] != "slow link"] == [("slow node", "n2")], (
        doc["findings"], doc["transients"])
    assert all("n2" not in item for kind, item in got if kind == "slow link"), got
    assert r.returncode == 1, r.stderr
    assert doc["findings"][0]["confirmed"]  # measured again before it was reported
    assert doc["findings"][0]["evidence"][0]["worse"] > 0.3
    assert "scontrol update NodeName=n2 State=DRAIN" in r.stdout
    # --drain runs it: the node is out of service with the reason, then back
    # judged as the campaign was (its --worse): at the default 4 %, a busy machine's noise
    # once drained n1 too, and the module's later campaigns waited for it
    rep = hpcprobe(cluster, "cluster", "report", "slow", "--db", str(tmp_path / "r.sqlite"),
                   "--drain")
    assert rep.returncode == 1 and "Drained n2: hpcprobe slow: HP401 slow node" in rep.stderr
    state = cluster.client("sinfo", "-h", "-n", "n2", "-o", "%t %E").stdout
    assert state.startswith("drain") and "hpcprobe slow: HP401 slow node" in state, state
    cluster.client("scontrol", "update", "NodeName=n2", "State=RESUME")


@pytest.mark.alone  # judged: a test beside it makes the nodes busy
def test_a_shaped_port_is_a_slow_endpoint_not_a_slow_node(cluster, tmp_path):
    with cluster.shaped("n3", "200mbit"):
        r, doc = campaign(cluster, tmp_path, "shaped")
    got = findings(doc)
    assert r.returncode == 1, (got, doc["transients"], r.stdout[:300], r.stderr)
    assert got and all(kind != "slow node" for kind, _ in got), got
    assert all("n3" in item for _, item in got), got
    into = {(x["a"], x["b"]): x["median"] for x in doc["links"]["links.bandwidth size=1048576"]}
    assert max(v for (a, b), v in into.items() if b == "n3") < 30  # MB/s: 200 Mbit/s
    assert min(v for (a, b), v in into.items() if b != "n3") > 100


def test_links_that_fail_are_said_and_the_node_figures_kept(cluster, tmp_path):
    # without pmix every rank of Debian's Open MPI is a singleton: the MPI program stops
    r, doc = campaign(cluster, tmp_path, "nolinks", "--mpi-plugin", "none", "--probe", "numa",
                      "--probe-args", "")
    assert r.returncode == 1, r.stderr
    assert "ended failed early" in doc["link_errors"][0] and doc["failed"] == {}
    assert "Links not measured: " in r.stdout
    with Store.open(tmp_path / "r.sqlite") as st:
        assert {x.host for x in st.load_all(Selection(tag="nolinks"))} >= {"n1", "n2", "n3",
                                                                          "n4"}


def test_bad_input_is_one_line_and_exit_2(cluster, tmp_path):
    db = str(tmp_path / "r.sqlite")
    for argv, message in (
            (["-p", "gpu"], "--partition 'gpu' does not exist"),
            (["--nodelist", "n[3,9]"], "n9 is not in the cluster"),
            (["-p", "short"], "sbatch refused hpb-bad-n1: "),  # 900 s over its 1-minute limit
            # GPUs asked of a cluster whose slurm.conf has no GRES: sbatch says so
            (["-p", "test", "--gpus-per-node", "1", "--probe", "gpu"],
             "sbatch refused hpb-bad-n1: "),
            (["-p", "test", "--gpus-per-node", "0"], "a GPU count"),
            (["-p", "test", "--probe", "nosuch"], "benchmark 'nosuch' is unknown"),
            (["-p", "test", "--probe-args", "--threads x"], "--threads x: "),
            (["-p", "test", "--db", "postgresql://nobody:secret@127.0.0.1:1/none"],
             "cannot connect"),
            (["--only", "failed", "--tag", "nosuch"], "campaign 'nosuch': no runs"),
            (["--stage", "tmp"], "--stage 'tmp': give an absolute path on the nodes"),
            (["--stage", "/tmp", "--node-hpcprobe", "/x"], "not allowed with argument")):
        r = hpcprobe(cluster, "cluster", "run", "--tag", "bad", "--db", db, "--workdir",
                     str(tmp_path / "w"), *argv, timeout=60)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert message in r.stderr and r.stderr.count("\n") == 1, (argv, r.stderr)
    fresh = tmp_path / "none.sqlite"
    r = hpcprobe(cluster, "cluster", "run", "-p", "test", "--dry-run", "--db", str(fresh))
    assert r.returncode == 0 and "6 pair(s) in 3 round(s)" in r.stdout, r.stdout
    assert not fresh.exists()  # a dry run creates no store
    assert "`hpcprobe run memory latency numa frequency compute --profile quick`" in r.stdout
    assert f"start-up: {sys.executable} -m hpcprobe" in r.stdout
    r = hpcprobe(cluster, "cluster", "run", "-p", "test", "--dry-run", "--probe", "gpu",
                 "--gpus-per-node", "8", "--db", str(fresh), "--stage", "/tmp")
    assert r.returncode == 0 and "all at once, 8 GPU(s) a node;" in r.stdout, r.stdout
    assert "start-up: this hpcprobe staged in /tmp on each node's disk first" in r.stdout
    r = hpcprobe(cluster, "cluster", "run", "-p", "test", "--dry-run", "--pairs", "iperf3",
                 "--link-parallel", "1", "--db", str(fresh))
    assert r.returncode == 0 and "on each of 6 pair(s) in 3 round(s), a two-node job each, " \
        "1 at a time" in r.stdout, r.stdout


def test_a_node_that_never_starts_its_job_fails_and_the_rest_completes(cluster, tmp_path):
    cluster.client("scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=test")
    try:
        r, doc = campaign(cluster, tmp_path, "drained", "--start-timeout", "5", "--no-links",
                          "--no-remeasure", *WORSE)
    finally:
        cluster.client("scontrol", "update", "NodeName=n4", "State=RESUME")
    assert r.returncode == 1, r.stderr
    assert list(doc["failed"]) == ["n4"] and "did not start in 5 s" in doc["failed"]["n4"]
    assert doc["heat"]["nodes"] == ["n1", "n2", "n3"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; kill, a job's end
def test_ctrl_c_cancels_the_jobs_and_keeps_what_was_measured(cluster, tmp_path, sig):
    db = str(tmp_path / "r.sqlite")
    p = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{cluster.hub}", sys.executable, "-m", "hpcprobe",
         "cluster", "run", "-p", "test", "--tag", "int", "--db", db, "--workdir",
         str(tmp_path / "w"), *PROBE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SLURM_CONF": str(cluster.conf)})
    docs = tmp_path / "w" / "nodes"
    deadline = time.monotonic() + 120
    while not (docs.is_dir() and list(docs.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.2)  # the first node is done, the second is running or queued
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "interrupted; queued jobs cancelled" in err, err
    # nothing of it left to run: scancel is asynchronous, and a job that is ending (its
    # processes killed, or done and its epilogue running) stays in the queue as COMPLETING
    # for a moment (CI once saw the first node's job there)
    deadline = time.monotonic() + 60
    while True:
        queue = cluster.client("squeue", "-h", "-o", "%i %j %T").stdout
        live = [line for line in queue.splitlines()
                if "hpb-int" in line and not line.endswith(" COMPLETING")]
        if not live or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not live, queue
    rep = hpcprobe(cluster, "cluster", "report", "int", "--db", db, "--json")
    doc = json.loads(rep.stdout)
    assert doc["heat"]["nodes"] and set(doc["failed"]) == \
        {"n1", "n2", "n3", "n4"} - set(doc["heat"]["nodes"])
    assert all("interrupted" in why for why in doc["failed"].values())


def test_inside_an_allocation_hpcprobe_is_staged_by_sbcast_and_node_jobs_are_steps(cluster,
                                                                                    tmp_path):
    # --stage: hpcprobe broadcast to each node's own disk (cluster.local, which each node sees
    # as its own) and the node jobs started from there; then a step on every node says where
    # that Python reads hpcprobe, numpy and the native core from
    local, w = cluster.local, tmp_path / "w"
    where = ("import os, hpcprobe, numpy; from hpcprobe import native; "
             "print(os.uname().nodename, hpcprobe.__file__, numpy.__file__, native.lib_path())")
    script = (f"{sys.executable} -m hpcprobe cluster run --tag alloc --db {tmp_path}/r.sqlite "
              f"--workdir {w} --no-links --no-remeasure --stage {local} "
              f"{shlex.join([*WORSE, *PROBE])}; rc=$?; b=$(basename {w}/hpcprobe-*.tar .tar); "
              f"srun -N2 --ntasks-per-node 1 env -u HPCPROBE_NATIVE_LIB {local}/$b/bin/python "
              f"-I -c {shlex.quote(where)}; exit $rc")
    r = cluster.client("salloc", "-N2", "-p", "test", "sh", "-c", script, timeout=300)
    # 1: a node flagged, which is noise here (four "nodes" on two CPUs; one's scalar peak once
    # read 0.49 of its peers' while other work ran beside the suite), not what this test is about
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr
    assert "2 measured, 0 failed" in r.stdout
    assert not list((w / "jobs").glob("*.sh"))  # no batch script: steps
    assert f"staged in {local} on each node" in r.stdout
    assert "one sbcast to the allocation's 2 node(s)" in r.stdout
    [tar] = w.glob("hpcprobe-*.tar")
    assert not list(local.iterdir())  # nothing of it here: on each node's own disk
    lines = sorted(x.split() for x in r.stdout.splitlines()
                   if len(x.split()) == 4 and x.split()[1].startswith("/"))
    assert [x[0] for x in lines] == ["n1", "n2"], r.stdout[-2000:]
    for node, *paths in lines:
        assert all(p.startswith(f"{local}/{tar.stem}/lib/") for p in paths), paths
        assert (cluster.disk(node) / tar.stem / "bin" / "python").exists()


def test_iperf3_between_pairs_starts_its_server_on_the_peer_and_judges_links(cluster, tmp_path):
    if not shutil.which("iperf3"):
        pytest.skip("no iperf3 (make system-deps)")
    # the two pairs of each round at once (--link-parallel 0, after PROBE's 1)
    r, doc = campaign(cluster, tmp_path, "iperf", "--no-links", "--probe", "numa",
                      "--probe-args", "", "--pairs", "iperf3", "--pairs-args",
                      "--iperf-time 1 --repeat 2", "--link-parallel", "0")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr
    [name] = [k for k in doc["links"] if k.startswith("iperf3.throughput")]
    pairs = {(x["a"], x["b"]): x["median"] for x in doc["links"][name]}
    said = (pairs, doc["link_errors"], doc["failed"], r.stdout[-3000:], r.stderr[-3000:])
    assert len(pairs) == 6 and min(pairs.values()) > 0.05, said  # Gbit/s through veth
    assert doc["link_errors"] == [] and doc["failed"] == {}, said
    with Store.open(tmp_path / "r.sqlite") as st:
        runs = [x for x in st.load_all(Selection(tag="iperf")) if "iperf3" in x.benchmarks]
    # the campaign's pass measured every pair; a pair that noise flagged is measured again in
    # a re-measure run of its own
    [run] = [x for x in runs if x.provenance["cluster"]["role"] == "campaign"]
    assert len(run.select("iperf3", "throughput")) == 6
    assert all(x.provenance["cluster"]["role"] == "re-measure" for x in runs if x is not run)


def test_a_killed_slurmd_is_a_failed_node_and_the_rest_completes(cluster, tmp_path):
    c = cluster  # n4's slurmd is started again at the end, for the tests after this one
    # a node job here ends in about 3 s; n4's, sent to a node whose slurmd is gone, waits out
    # its 12 s and is cancelled
    p = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{c.hub}", sys.executable, "-m", "hpcprobe",
         "cluster", "run", "-p", "test", "--tag", "kill", "--db", str(tmp_path / "r.sqlite"),
         "--workdir", str(tmp_path / "kill"), "--timeout", "12", "--start-timeout", "12",
         "--no-links", "--no-remeasure", *WORSE, *PROBE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "SLURM_CONF": str(c.conf)})
    c.kill_slurmd("n4")  # before its job: the controller still sends it there
    out, err = p.communicate(timeout=300)
    assert p.returncode == 1, out[-2000:] + err
    rep = hpcprobe(c, "cluster", "report", "kill", "--db", str(tmp_path / "r.sqlite"), "--json")
    doc = json.loads(rep.stdout)
    assert list(doc["failed"]) == ["n4"], doc["failed"]
    assert "cancelled" in doc["failed"]["n4"]
    assert doc["heat"]["nodes"] == ["n1", "n2", "n3"]
    # back in service, the failed node alone is measured again, judged as the campaign was
    # (its --worse, not given again)
    c.start_slurmd("n4")
    c.wait_idle(90)
    r = hpcprobe(c, "cluster", "run", "--only", "failed", "--tag", "kill", "--db",
                 str(tmp_path / "r.sqlite"), "--workdir", str(tmp_path / "kill"),
                 "--no-remeasure", *PROBE)
    assert "Campaign kill: 1 node(s)" in r.stdout, r.stdout[-2000:] + r.stderr
    rep = hpcprobe(c, "cluster", "report", "kill", "--db", str(tmp_path / "r.sqlite"), "--json")
    doc = json.loads(rep.stdout)
    assert doc["failed"] == {} and doc["heat"]["nodes"] == ["n1", "n2", "n3", "n4"]
    assert doc["thresholds"]["worse"] == 0.6  # what the --only pass ran with, and stored
    # its links were measured with the nodes measured before
    pairs = {(x["a"], x["b"]) for x in doc["links"]["links.latency size=8"]}
    assert pairs == {("n1", "n4"), ("n2", "n4"), ("n3", "n4")}, (pairs, doc["link_errors"],
                                                                  r.stdout[-1500:], r.stderr)


def weak_points(doc: dict, figure: str, nodes: tuple[int, ...] = (1, 2, 4)) -> list[dict]:
    """The one weak-scaling curve of a figure, measured on these node counts."""
    [key] = [k for k in doc["weak_scaling"] if k.startswith(figure)]
    pts = doc["weak_scaling"][key]
    assert [p["nodes"] for p in pts] == list(nodes)
    return pts


def test_hpl_across_nodes_gives_weak_scaling(cluster, tmp_path):
    """HPL (hpcc) on 1 and 2 nodes, N = 1000 x sqrt(nodes): Rmax and the parallel efficiency
    per node count; every run's residual check passed. Two nodes, not four: hpcc runs its
    other tests (PTRANS, RandomAccess, FFT, b_eff) before HPL, whatever N, and across four
    namespace nodes on two CPUs that took 55-60 s of the test's 140 (N 500 as long as N 1000);
    the CG test below keeps the ladder to four nodes."""
    if not shutil.which("hpcc"):
        pytest.skip("no hpcc (make system-deps)")
    r, doc = campaign(cluster, tmp_path, "hpl", "--nodelist", "n[1-2]", "--no-links", "--scale",
                      "hpl", "--scale-args", "--n 1000 --layout numa --runs 1")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr  # 1: a node flagged by noise
    assert doc["scaling_errors"] == [] and doc["failed"] == {}
    pts = weak_points(doc, "hpl.rmax", (1, 2))
    assert pts[0]["parallel_efficiency"] == 1.0
    assert all(p["median"] > 0 and p["parallel_efficiency"] > 0 for p in pts)
    assert "Across nodes (the work per node kept" in r.stdout
    with Store.open(tmp_path / "r.sqlite") as st:
        runs = [x for x in st.load_all(Selection(tag="hpl")) if "hpl" in x.benchmarks]
    got = sorted((m.params["nodes"], m.params["n"], m.params["ranks"]) for x in runs
                 for m in x.metrics if m.name == "rmax")
    assert [(k, ranks) for k, _, ranks in got] == [(1, 1), (2, 2)]
    assert got[0][1] == 1000 and got[1][1] >= 1000 * 1.3


def test_cg_across_nodes_runs_its_ranks_on_every_node(cluster, tmp_path):
    """The CG proxy on 1, 2 and 4 nodes (a box a node, one rank a node through srun): the
    check across the ranks passed on every count, the rate and its parallel efficiency."""
    # The 4-node job hung now and then (3 of 246 here, once in CI): rank 0 died of SIGSEGV
    # inside MPI_Init (Open MPI handled a peer's first message before its PML was ready) and
    # srun let the other ranks wait for it. The launches now end a step whose rank dies and
    # run Open MPI's modex in one background fence (mpi/launchers.py), so no retry here.
    r, doc = campaign(cluster, tmp_path, "cg", "--no-links", "--scale", "cg", "--scale-args",
                      "--grid 16x16x16", "--timeout", "90")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr  # 1: a node flagged by noise
    assert doc["scaling_errors"] == [] and doc["failed"] == {}
    pts = weak_points(doc, "cg.gflops")
    assert all(p["median"] > 0 and p["parallel_efficiency"] > 0 for p in pts)
    with Store.open(tmp_path / "r.sqlite") as st:
        runs = [x for x in st.load_all(Selection(tag="cg")) if "cg" in x.benchmarks]
    got = sorted((m.params["nodes"], m.params["global"]) for x in runs for m in x.metrics
                 if m.name == "gflops")
    assert got == [(1, "16x16x16"), (2, "16x16x32"), (4, "16x32x32")]


@pytest.mark.skipif(shutil.which("lmp") is None, reason="LAMMPS not installed (make system-deps)")
def test_an_application_across_nodes_gives_its_work_rate_and_efficiency(cluster, tmp_path):
    """`--scale app`: LAMMPS on 1 and 2 nodes, a rank a node (--layout numa), its atoms grown
    with the ranks ({ranks}): the application's figures per count, its work rate with the
    parallel efficiency, each count stored with the problem it was sized for."""
    example = Path(__file__).resolve().parent.parent / "docs" / "examples" / "lj-melt.lmp"
    r, doc = campaign(cluster, tmp_path, "lmp", "--nodelist", "n[1-2]", "--no-links", "--scale",
                      "app", "--scale-args", f"lammps --layout numa --repeat 2 -- lmp -in "
                      f"{example} -var ranks {{ranks}} -var steps 20 -log none")
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr  # 1: a node flagged by noise
    assert doc["scaling_errors"] == [] and doc["failed"] == {}
    pts = weak_points(doc, "app work rate", (1, 2))
    assert pts[0]["parallel_efficiency"] == 1.0 and pts[1]["parallel_efficiency"] > 0
    assert doc["weak_units"]["app work rate"] == "atom-step/s"
    weak = doc["weak_scaling"]
    assert any("app:lammps" in k and "tau/day" in k for k in weak), weak
    with Store.open(tmp_path / "r.sqlite") as st:
        runs = [x for x in st.load_all(Selection(tag="lmp")) if "app" in x.benchmarks]
    got = sorted({(m.params["nodes"], m.params["ranks"], m.params["problem_ranks"])
                  for x in runs for m in x.metrics})
    assert got == [(1, 1, 1), (2, 2, 2)]


def test_scale_mistakes_are_said_before_any_job(cluster, tmp_path):
    for extra, needle in ((("--scale", "compute"), "runs across nodes: hpl"),
                          (("--scale", "hpl", "--scale-args", "--n 0"), "--n"),
                          (("--scale", "app,cg", "--scale-args", "a -- true"), "runs alone"),
                          (("--scale", "app", "--scale-args", "a"), "COMMAND missing"),
                          (("--node-hpcprobe", "bin/hpcprobe"), "absolute path")):
        r = hpcprobe(cluster, "cluster", "run", "-p", "test", "--db", str(tmp_path / "r.sqlite"),
                     "--workdir", str(tmp_path / "w"), *extra)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
