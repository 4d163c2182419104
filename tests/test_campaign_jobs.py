"""The campaign's job handling with a scheduler that runs nothing (a stand-in that finishes
each job a few polls after it was submitted, writing the pair's document): the pairs of a
round run at once, `--link-parallel` at most, and a node is never in two jobs at a time; a
job that fails or is refused costs its pair alone; Ctrl-C while a round is being submitted
leaves none of it queued. The real Slurm cluster's campaigns are
tests/test_cluster_campaign.py."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

import clusterdata
from hpcprobe.cluster import pairs as pairing
from hpcprobe.cluster.campaign import Campaign, Plan
from hpcprobe.common.errors import UserError
from hpcprobe.results.model import Metric, read_json, write_json
from hpcprobe.results.store import Store
from hpcprobe.schedulers import Job, JobSpec


class Quiet:
    def start(self, *_: object) -> None: ...

    def advance(self, *_: object) -> None: ...


class StandIn(clusterdata.RunsNothing):
    """Finishes a job on its third poll; its document holds one figure per direction.
    `fail` pairs end without a document, `refuse` pairs are refused at submission, `cut`
    pairs write the document of a run stopped by a signal (a time limit's SIGTERM)."""

    name = "stand-in"
    description = "runs nothing"

    def __init__(self, fail: set[tuple[str, str]] = frozenset(),
                 refuse: set[tuple[str, str]] = frozenset(),
                 cut: set[tuple[str, str]] = frozenset()) -> None:
        super().__init__()
        self.fail, self.refuse, self.cut = fail, refuse, cut
        self.interrupt: tuple[str, str] | None = None  # Ctrl-C while submitting this pair
        self.live: dict[str, Job] = {}
        self.most = 0  # jobs live at once, at most
        self.overlap: list[str] = []  # a node in two live jobs
        self.polls: dict[str, int] = {}
        self.template = read_json(clusterdata.TEMPLATE)

    def submit(self, spec: JobSpec) -> Job:
        pair = (spec.nodes[0], spec.nodes[1])
        if pair in self.refuse:
            raise UserError(f"refused {pair}")
        if pair == self.interrupt:
            raise KeyboardInterrupt
        busy = {n for j in self.live.values() for n in j.spec.nodes}
        self.overlap += [n for n in spec.nodes if n in busy]
        job = Job(spec, str(len(self.polls) + 1), state="RUNNING", started=time.monotonic())
        self.live[job.id] = job
        self.polls[job.id] = 0
        self.most = max(self.most, len(self.live))
        return job

    def poll(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            self.polls[job.id] += 1
            if self.polls[job.id] < 3:
                continue
            a, b = job.spec.nodes
            if (a, b) not in self.fail:
                doc = job.spec.argv[job.spec.argv.index("--json") + 1]
                figures = [Metric("iperf3", "throughput", "Gbit/s", {"from": x, "to": y},
                                  [9.0, 9.1, 9.2], "higher") for x, y in ((a, b), (b, a))]
                prov = {**self.template.provenance, **({"interrupted": {
                    "benchmark": "iperf3", "not_run": []}} if (a, b) in self.cut else {})}
                write_json(replace(self.template, host=a, metrics=figures, provenance=prov,
                                   benchmarks=["iperf3"]), doc)
            job.state = "COMPLETED"
            del self.live[job.id]

    def cancel(self, jobs: Sequence[Job]) -> None:
        super().cancel(jobs)
        for job in jobs:
            self.live.pop(job.id, None)


def pairs_of(n: int) -> list[list[tuple[str, str]]]:
    return [[(f"n{a + 1}", f"n{b + 1}") for a, b in r] for r in pairing.schedule(n)]


def run_pairs(tmp_path, sched: StandIn, rounds, parallel: int = 0
              ) -> tuple[list[Metric], list[str]]:
    plan = Plan("t", [n for r in rounds for pr in r for n in pr], tmp_path, ["iperf3"], [],
                link_parallel=parallel, poll_s=0.0, pairs={"iperf3": "--iperf-peer"})
    (tmp_path / "jobs").mkdir()
    (tmp_path / "nodes").mkdir()
    errors: list[str] = []
    with Store.open(tmp_path / "r.sqlite") as st:
        got = Campaign(sched, st, plan, Quiet()).pair_pass("iperf3", "--iperf-peer", rounds,
                                                            errors)
    return got, errors


@pytest.mark.parametrize("parallel, most", [(0, 4), (1, 1), (3, 3)])
def test_the_pairs_of_a_round_run_at_once_and_no_node_is_in_two_jobs(tmp_path, parallel, most):
    rounds = pairs_of(8)  # 7 rounds of 4 disjoint pairs
    sched = StandIn()
    got, errors = run_pairs(tmp_path, sched, rounds, parallel)
    assert errors == [] and sched.overlap == []
    assert sched.most == most
    assert len(got) == 2 * sum(len(r) for r in rounds) == 56  # from/to of every pair
    assert {(m.params["from"], m.params["to"]) for m in got} == {
        p for r in rounds for a, b in r for p in ((a, b), (b, a))}


def test_a_run_stopped_by_a_signal_is_no_result(tmp_path):
    """A job's time limit (SIGTERM) stops its run, which writes what it had measured: the
    campaign counts that as the job's failure, not as its figures."""
    rounds = pairs_of(4)
    cut = rounds[0][0]
    got, errors = run_pairs(tmp_path, StandIn(cut={cut}), rounds)
    assert len(errors) == 1 and errors[0].startswith(
        f"iperf3 {cut[0]} -> {cut[1]}: it was stopped by a signal (a time limit?) during "
        f"iperf3; what it had measured is in {tmp_path / 'nodes'}/"), errors
    assert cut not in {(m.params["from"], m.params["to"]) for m in got}
    assert len(got) == 2 * (6 - 1)


def test_a_failed_or_refused_pair_costs_itself_alone(tmp_path):
    rounds = pairs_of(4)
    bad, refused = rounds[0][0], rounds[1][1]
    sched = StandIn(fail={bad}, refuse={refused})
    got, errors = run_pairs(tmp_path, sched, rounds)
    assert len(errors) == 2
    assert errors[0].startswith(f"iperf3 {bad[0]} -> {bad[1]}: its job") and \
        "without a result" in errors[0]
    assert errors[1] == f"iperf3 {refused[0]} -> {refused[1]}: refused {refused}"
    measured = {(m.params["from"], m.params["to"]) for m in got}
    assert len(got) == 2 * (6 - 2) and bad not in measured and refused not in measured


def test_a_pair_that_failed_is_said_in_the_verdict_not_left_out(tmp_path):
    """A pass's pairs that gave no figure are recorded with the campaign run and are the
    verdict's links not measured (flagged), as the links job's failure is: the report never
    judges five of six links as if they were all."""
    rounds = pairs_of(4)
    bad = rounds[0][0]
    plan = Plan("t", ["n1", "n2", "n3", "n4"], tmp_path, ["iperf3"], [], poll_s=0.0,
                pairs={"iperf3": "--iperf-peer"})
    with Store.open(tmp_path / "r.sqlite") as st:
        c = Campaign(StandIn(fail={bad}), st, plan, Quiet())
        for d in ("jobs", "nodes"):
            (tmp_path / d).mkdir()
        c._pass("campaign", [], rounds)
        v = c.verdict()
    [said] = v.link_errors
    assert f"(campaign): iperf3 {bad[0]} -> {bad[1]}: its job" in said and v.flagged
    assert len(v.links["iperf3.throughput"]) == 2 * (6 - 1)


def test_pairs_of_a_random_schedule_keep_their_rounds_disjoint(tmp_path):
    """A fleet past the all-pairs size: the ring and random matchings, 5 at a time."""
    rounds = [[(f"n{a + 1}", f"n{b + 1}") for a, b in r]
              for r in pairing.schedule(40, seed=1)]
    sched = StandIn()
    got, errors = run_pairs(tmp_path, sched, rounds, 5)
    assert errors == [] and sched.overlap == [] and sched.most == 5
    assert len(got) == 2 * sum(len(r) for r in rounds)


def test_ctrl_c_while_submitting_a_round_cancels_what_was_submitted(tmp_path):
    rounds = pairs_of(8)
    sched = StandIn()
    sched.interrupt = rounds[2][3]
    with pytest.raises(KeyboardInterrupt):
        run_pairs(tmp_path, sched, rounds)
    assert sched.live == {} and sched.most == 4  # the round's first three, cancelled


#: Python's faulthandler, as hpcprobe prints it on SIGUSR1 (two threads: a progress thread,
#: then the main thread)
STACKS = """Thread 0x00007f15b8e7f6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/opt/x/lib/python3.11/site-packages/hpcprobe/views/terminal.py", line 88 in tick

Current thread 0x00007f15b907fb80 (most recent call first):
  File "/usr/lib/python3.11/subprocess.py", line 1209 in communicate
  File "/opt/x/lib/python3.11/site-packages/hpcprobe/mpi/launch.py", line 91 in run
  File "/opt/x/lib/python3.11/site-packages/hpcprobe/probes/proxy.py", line 103 in run
  File "/opt/x/lib/python3.11/site-packages/hpcprobe/families/cg/bench.py", line 220 in _run_ranks
  File "/opt/x/lib/python3.11/site-packages/hpcprobe/cli.py", line 829 in main
"""


class Hung(StandIn):
    """Runs every job forever; asked for stacks, a job prints them (`prints`) or not."""

    def __init__(self, prints: bool) -> None:
        super().__init__()
        self.prints, self.asked = prints, 0

    def poll(self, jobs: Sequence[Job]) -> None: ...

    def stacks(self, jobs: Sequence[Job]) -> None:
        self.asked += 1
        for job in jobs:
            if self.prints:
                with open(job.spec.output, "a") as out:
                    out.write(STACKS)


@pytest.mark.parametrize("prints", [True, False])
def test_an_overdue_job_is_asked_where_it_stood_before_its_cancel(tmp_path, monkeypatch, prints):
    from hpcprobe.cluster import campaign

    monkeypatch.setattr(campaign, "STACKS_WAIT_S", 0.2)
    sched = Hung(prints)
    plan = Plan("t", ["n1", "n2"], tmp_path, ["iperf3"], [], poll_s=0.0, timeout_s=0.0,
                pairs={"iperf3": "--iperf-peer"})
    (tmp_path / "jobs").mkdir()
    (tmp_path / "nodes").mkdir()
    with Store.open(tmp_path / "r.sqlite") as st:
        c = Campaign(sched, st, plan, Quiet())
        job = sched.submit(JobSpec("j", ["n1", "n2"], ["hpcprobe"], tmp_path / "jobs" / "j.out",
                                   0.0))
        job.spec.output.write_text("cg: STREAM triad\n")
        [why] = c._wait_all([job])
    assert sched.asked == 1 and job.state == "CANCELLED"
    stood = ("it stood in hpcprobe/mpi/launch.py:91 (run), called from "
             "hpcprobe/families/cg/bench.py:220 (_run_ranks) (its stacks end "
             f"{job.spec.output}); ") if prints else ""
    assert why == f"no result after 0 s running (job 1); cancelled; {stood}" \
                  "last output: cg: STREAM triad"


def test_asking_for_stacks_never_fails_the_campaign(tmp_path, monkeypatch):
    """The request for an overdue job's stacks is only a request: a controller that does not
    answer in time (busy, restarting) leaves the job to its cancel,
    where a cancel that does not answer is an error."""
    from hpcprobe.schedulers import SCHEDULERS, slurm

    (tmp_path / "scancel").write_text("#!/bin/sh\nexec sleep 30\n")  # a controller that hangs
    (tmp_path / "scancel").chmod(0o755)
    monkeypatch.setattr(slurm, "STACKS_TIMEOUT_S", 0.3)
    monkeypatch.setattr(slurm, "CLIENT_TIMEOUT_S", 0.3)
    sched = SCHEDULERS["slurm"](env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    job = Job(JobSpec("j", ["n1"], ["hpcprobe"], tmp_path / "j.out", 0.0), "7",
              state="RUNNING")
    sched.stacks([job])
    assert job.state == "RUNNING"
    with pytest.raises(UserError, match="did not answer in 0.3 s"):
        sched.cancel([job])



def test_a_staged_bundle_is_copied_unpacked_once_and_started_isolated(tmp_path):
    # where no allocation broadcasts it (per-node batch jobs), the node job's launcher copies
    # the bundle from the work directory to the node's disk, unpacks it once and starts
    # hpcprobe from there, isolated: not from the user's PYTHONPATH or native core. The
    # bundle here is a stand-in environment whose hpcprobe says where it runs from; the real
    # one is made and broadcast in the Slurm cluster (test_cluster_campaign.py)
    import os
    import shutil
    import subprocess
    import sys
    import tarfile

    from hpcprobe.cluster import bundle

    names = {d.metadata["Name"].lower() for d in bundle.closure()}
    assert {"hpcprobe", "numpy", "rich"} <= names and "pytest" not in names
    work, stage = tmp_path / "w", tmp_path / "disk" / "stage"
    env = tmp_path / "env" / "hpcprobe-0123456789ab"
    site = env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "hpcprobe").mkdir(parents=True)
    (site / "hpcprobe" / "__main__.py").write_text(
        "import os, sys; print(__file__, sys.flags.isolated, "
        "os.environ.get('HPCPROBE_NATIVE_LIB'), *sys.argv[1:])\n")
    base = bundle._interpreter()
    (env / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(base)
    work.mkdir()
    b = bundle.Bundle(work / "hpcprobe-0123456789ab.tar", "0123456789ab", stage)
    with tarfile.open(b.tar, "w") as tf:
        tf.add(env, env.name)
    launcher = bundle.launcher(b, work)
    given = {**os.environ, "PYTHONPATH": str(tmp_path / "nowhere"),
             "HPCPROBE_NATIVE_LIB": str(tmp_path / "no.so")}
    for n in range(2):  # the second start finds it unpacked
        if n:
            b.on_node.unlink()
        r = subprocess.run([str(launcher), "run", "x y"], capture_output=True, text=True,
                           env=given, cwd=tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [f"{stage}/{b.name}/{site.relative_to(env)}/hpcprobe/"
                                    "__main__.py", "1", "None", "run", "x", "y"]
    assert not list(stage.glob(f".{b.name}.*"))  # no unpacking left behind
    # what another user made first in a shared directory is never run (nor a link to it)
    shutil.rmtree(stage / b.name)
    (stage / b.name).symlink_to(env)
    r = subprocess.run([str(launcher), "run"], capture_output=True, text=True, env=given,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == "" and "is not this user's: not used" in r.stderr
    if os.geteuid() == 0:
        (stage / b.name).unlink()
        (stage / b.name).mkdir()
        os.chown(stage / b.name, 65534, 65534)
        r = subprocess.run([str(launcher), "run"], capture_output=True, text=True, env=given,
                           timeout=60)
        assert r.returncode == 2 and "is not this user's" in r.stderr, r.stderr


def test_an_editable_install_is_not_staged(monkeypatch, tmp_path):
    # its files are a pointer to the checkout, which the nodes would then read
    from hpcprobe.cluster import bundle

    class Editable:
        metadata = {"Name": "hpcprobe"}

        def read_text(self, name: str) -> str | None:
            return '{"url": "file:///src", "dir_info": {"editable": true}}' \
                if name == "direct_url.json" else None

    monkeypatch.setattr(bundle, "closure", lambda: [Editable()])
    with pytest.raises(UserError, match="hpcprobe: an editable install"):
        bundle.make(tmp_path, tmp_path / "stage")
    assert not list(tmp_path.iterdir())
