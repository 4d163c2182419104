"""A campaign over a cluster: the node probe (`hpcprobe run` of some families) on every node as
a job of its own, each node's document written to a shared work directory and stored under the
campaign tag as it arrives; then the links (one MPI job over the nodes: pairs b_eff style,
message rate, collectives as nodes are added); then what the verdict flags is measured again
(a transient is not a verdict); then the families asked to scale run across 1, 2, 4, ... of
the nodes that answered (one job each, weak scaling). A node whose job fails, never starts or
runs past its timeout is cancelled and reported failed; the rest goes on. Each pass stores a
campaign run: its node list, the failures and the link figures; each scaling job's run is
stored with its node count."""

from __future__ import annotations

import json
import platform
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hpcprobe
from hpcprobe.analysis.compare import NotJoined
from hpcprobe.analysis.reference import Declared
from hpcprobe.cluster import pairs as pairing
from hpcprobe.cluster.bundle import Bundle
from hpcprobe.cluster.verdict import (
    CAMPAIGN,
    SLOW_ENDPOINT,
    SLOW_LINK,
    SLOW_NODE,
    Campaigned,
    FleetVerdict,
    Labels,
    analyse,
    no_labels,
    undirected,
    work_rates,
)
from hpcprobe.common.bulk import bulk, kept_since
from hpcprobe.common.errors import HpcprobeError, UserError
from hpcprobe.common.names import natural
from hpcprobe.judge.kept import KeptFigures, KeptHeadlines
from hpcprobe.judge.peers import Fig, Thresholds
from hpcprobe.measure.family import Progress, Scaling
from hpcprobe.mpi import build, find, launchers, params
from hpcprobe.mpi.program import UNITS
from hpcprobe.results.model import Metric, Run, read_json
from hpcprobe.results.store import Selection, Store
from hpcprobe.schedulers import Job, JobSpec, Scheduler

#: Rounds of measuring again what is flagged and not yet confirmed (a node flagged first as
#: slow hides its links; measured again and fine, its links are judged and may need a round).
REMEASURES = 3
#: Link samples per figure and the share of OSU's iteration counts, per profile.
LINK_SAMPLING = {"quick": (5, 0.1), "default": (7, 0.3), "thorough": (11, 1.0)}


def this_hpcprobe() -> list[str]:
    """How a node job starts the hpcprobe that drives it: by this Python."""
    return [sys.executable, "-m", "hpcprobe"]


@dataclass
class Plan:
    """What a campaign runs, and how patiently."""

    tag: str
    nodes: list[str]
    workdir: Path
    probe: list[str]  # the families of the node probe
    probe_args: list[str]  # and its narrowing options (--threads 1 ...)
    profile: str = "quick"
    concurrency: int = 0  # node jobs at once (0: all)
    timeout_s: float = 900.0  # a node job running longer is cancelled
    start_timeout_s: float = 600.0  # a node job waiting longer to start is cancelled
    links: bool = True
    link_size: int = 1 << 20
    link_parallel: int = 0  # pairs of a round measured at once (0: all)
    random_rounds: int = pairing.RANDOM_ROUNDS
    ranks_per_node: int = 1  # ranks per node of the links job (message rate with all of them)
    mpi_plugin: str = ""  # srun --mpi=...; "" the site's default
    remeasure: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    not_joined: NotJoined = field(default_factory=NotJoined)  # per family (the registry's)
    #: what peers must share besides the CPU's hardware, from a run's provenance (the
    #: registry's: its families' inventories, the GPU models)
    hardware: Labels = no_labels
    #: what a node run's headlines are picked and bounded by (the registry's): kept beside
    #: each node run for the campaign's report (None: not kept, its report makes them)
    headlines: Declared | None = None
    poll_s: float = 1.0
    seed: int = 0
    partition: str | None = None  # submit there (None: the scheduler's default)
    gpus_per_node: int = 0  # GPUs each node probe job asks for (0: none)
    peers: list[str] = field(default_factory=list)  # measured before: link partners of `nodes`
    scale: dict[str, Scaling] = field(default_factory=dict)  # families run across nodes
    scale_args: list[str] = field(default_factory=list)  # and their options (--n 2000 ...)
    #: how a command line runs each of them (`run cg`; `app`, whose values come last)
    scale_line: dict[str, list[str]] = field(default_factory=dict)
    pairs: dict[str, str] = field(default_factory=dict)  # families run between pairs: peer flag
    pairs_args: list[str] = field(default_factory=list)  # and their options
    #: how a node job starts hpcprobe: this one by this Python, or the node's own install
    program: list[str] = field(default_factory=this_hpcprobe)
    #: hpcprobe staged on each node's own disk (`program` its launcher), broadcast first
    staged: Bundle | None = None


def link_rounds(p: Plan) -> list[list[tuple[str, str]]]:
    """The pair schedule of the plan's nodes; nodes measured again (their `peers` known good)
    also meet three of the peers each."""
    idx = pairing.schedule(len(p.nodes), p.random_rounds, seed=p.seed)
    rounds = [[(p.nodes[a], p.nodes[b]) for a, b in r] for r in idx]
    if p.peers:
        rounds += pairing.matchings([(n, p.peers[(i + j) % len(p.peers)])
                                     for j in range(min(3, len(p.peers)))
                                     for i, n in enumerate(p.nodes)])
    return rounds


def node_counts(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n."""
    return sorted({*(1 << i for i in range(n.bit_length()) if 1 << i <= n), n}) if n else []


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


#: Seconds an overdue job is given to print its stacks (SIGUSR1) before it is cancelled.
STACKS_WAIT_S = 3.0


def _output(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(text: str, lines: int = 3) -> str:
    """The last lines of a job's output worth quoting."""
    keep = [ln.strip() for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("{") and set(ln.strip()) != {"-"}]
    return " | ".join(keep[-lines:])[-400:] or "no output"


def _stood(stacks: str) -> str:
    """Where hpcprobe stood in the stacks it printed on SIGUSR1 (Python's faulthandler, a
    block a thread, the innermost call first): the main thread's innermost call in
    hpcprobe's code, and the family's call it came from; "" where no such stack was printed."""
    main = [b for b in stacks.split("\n\n") if "(most recent call first)" in b
            and '/hpcprobe/cli.py"' in b]
    calls = []
    for line in (main[0] if main else "").splitlines():
        if '/hpcprobe/' in line and line.strip().startswith("File "):
            path, _, rest = line.strip()[len('File "'):].partition('", line ')
            where, _, fn = rest.partition(" in ")
            calls.append(f"{path[path.rindex('/hpcprobe/') + 1:]}:{where} ({fn})")
    family = next((c for c in calls if c.startswith("hpcprobe/families/")), None)
    return "" if not calls else calls[0] + (
        f", called from {family}" if family not in (None, calls[0]) else "")


#: Known-good partners each end of a slow link, and a slow endpoint, is measured with again
GOOD_PARTNERS = 2


def known_good(v: FleetVerdict) -> list[str]:
    """The measured nodes nothing is said of: in no finding, suspect or transient, not
    failed, missing nothing, healthy."""
    doubt = {n for f in v.findings + v.suspects + v.transients for n in f.nodes}
    doubt |= set(v.failed) | set(v.missing) | set(v.unhealthy)
    return [n for n in v.measured if n not in doubt]


def to_remeasure(v: FleetVerdict) -> tuple[list[str], list[tuple[str, str]]]:
    """What a campaign measures again of what it flagged once: the slow nodes; a slow link
    itself, and each of its ends with known-good partners; a slow endpoint's links, and it
    with known-good partners: a link is two ends and a cable, and the partners say which
    (an end slow with good partners too is the endpoint, never the link alone)."""
    nodes = [f.item for f in v.findings if f.kind == SLOW_NODE and not f.confirmed]
    good = known_good(v)
    links: set[tuple[str, str]] = set()

    def partners(node: str, besides: tuple[str, ...]) -> set[tuple[str, str]]:
        return {(node, g) for g in [g for g in good if g not in besides][:GOOD_PARTNERS]}

    for f in v.findings:
        if f.confirmed:
            continue
        if f.kind == SLOW_LINK:
            links.add((f.nodes[0], f.nodes[1]))
            for end in f.nodes:
                links |= partners(end, f.nodes)
        elif f.kind == SLOW_ENDPOINT:
            links |= {k for pairs in v.links.values() for k in pairs if f.item in k}
            links |= partners(f.item, (f.item,))
    return nodes, sorted({undirected(k) for k in links})


class Campaign:
    """One `hpcprobe cluster run`: the passes, their jobs, their stored runs."""

    def __init__(self, sched: Scheduler, store: Store, plan: Plan, progress: Progress,
                 say: Any = print) -> None:
        self.sched, self.store, self.plan, self.progress, self.say = sched, store, plan, \
            progress, say
        self.mpi: find.Mpi | None = None
        self.exe: Path | None = None
        #: the campaign's runs: those of the tag in the store (another `cluster run`'s passes),
        #: read when the campaign starts or at its first verdict, then those this one stores
        #: added as it does (a thousand nodes' figures are not read back from the store)
        self._runs: list[Run] | None = None
        #: each node run's figures, made at its first verdict (judged again after re-measures)
        self._figures: dict[str, dict[str, Fig]] = {}
        #: and kept in the store, for its report and the campaign's next pass
        self._kept = KeptFigures(store, plan.not_joined)
        #: each node run's headlines, kept for the report with its figures
        self._headlines = None if plan.headlines is None else KeptHeadlines(store, plan.headlines)

    # -- the whole campaign

    def execute(self) -> FleetVerdict:
        p = self.plan
        for d in ("nodes", "jobs"):
            (p.workdir / d).mkdir(parents=True, exist_ok=True)
        if p.links and len(p.nodes) + len(p.peers) >= 2:  # no MPI: said before any job runs
            self.mpi = find.find()
            self.exe = build.build(self.mpi)
        if p.staged is not None:
            self.stage(p.staged)
        self._load()
        done = self._pass("campaign", p.nodes, link_rounds(p))
        for family, scaling in p.scale.items():
            self.scale_pass(family, scaling, sorted(done, key=natural))
        verdict = self.verdict()
        for _ in range(REMEASURES if p.remeasure else 0):
            nodes, links = to_remeasure(verdict)
            if not (nodes or links):
                break
            self.say(f"Measuring again what was flagged: {len(nodes)} node(s), "
                     f"{len(links)} link(s).")
            self._pass("re-measure", nodes, pairing.matchings(links), scaling=False)
            verdict = self.verdict()
        return verdict

    def stage(self, b: Bundle) -> None:
        """The bundle broadcast to every node at once where the scheduler can (inside an
        allocation: Slurm's sbcast); else each node job copies it from the work directory."""
        p = self.plan
        size = b.tar.stat().st_size / 2**20
        how = self.sched.broadcast(b.tar, b.on_node, [*p.nodes, *p.peers])
        self.say(f"hpcprobe staged in {b.stage} on each node ({size:.0f} MiB, {how}).")

    def verdict(self) -> FleetVerdict:
        p = self.plan
        runs = self._load() if self._runs is None else self._runs
        v = analyse(list(runs), p.tag, p.thresholds, p.not_joined, p.hardware,
                    work_rates(p.scale), self._figures)
        new = {run_id for run_id in self._figures if run_id not in self._kept.held}
        self._kept.keep(self._figures)
        if self._headlines is not None:  # made from the runs at hand (their summaries made)
            self._headlines.of([r for r in runs if r.run_id in new], keep=True)
        return v

    def _load(self) -> list[Run]:
        """The campaign's runs in the store so far, and their figures as kept there."""
        self._runs = self.store.load_all(Selection(tag=self.plan.tag))
        self._figures.update(self._kept.read(r.run_id for r in self._runs if r.kind == "node"))
        return self._runs

    def _save(self, runs: list[Run], checked: bool = False) -> None:
        """Runs stored under the campaign's tag (`checked`: as `read_json` made them), and kept
        for its next verdict."""
        skipped = set(self.store.save_all(runs, checked))  # stored before: among those read already
        if self._runs is not None:
            self._runs.extend(r for r in runs if r.run_id not in skipped)

    def _pass(self, role: str, nodes: list[str], pairing_rounds: list[list[tuple[str, str]]],
              scaling: bool = True) -> list[str]:
        """The node probes, then the links among the nodes that answered; one campaign run.
        The nodes that answered."""
        start = time.monotonic()
        done: list[str] = []
        failed: dict[str, str] = {}
        try:
            if nodes:
                self.node_pass(nodes, done, failed)
        except KeyboardInterrupt:  # the jobs are cancelled; what answered is kept on record
            failed.update({n: "interrupted (Ctrl-C) before its result" for n in nodes
                           if n not in done and n not in failed})
            self._save_campaign(role, nodes, done, failed, [], ["interrupted"], None,
                                time.monotonic() - start)
            raise
        metrics: list[Metric] = []
        errors = [f"{n}: {why}" for n, why in failed.items()]
        link_error = None
        # answered now, or measured before and not run again
        up = set(done) | (set(self.plan.nodes) - set(nodes)) | set(self.plan.peers)
        rounds = [[pr for pr in r if set(pr) <= up] for r in pairing_rounds]
        rounds = [r for r in rounds if r]
        if self.plan.links and self.exe is not None and rounds:
            try:
                metrics, link_error = self.link_pass(rounds, scaling)
            except HpcprobeError as exc:  # refused by the scheduler
                link_error = str(exc)
            if link_error:
                errors.append(f"links: {link_error}")
        pairs_failed: list[str] = []
        for family, flag in self.plan.pairs.items():
            metrics += self.pair_pass(family, flag, rounds, pairs_failed)
        self._save_campaign(role, nodes, done, failed, metrics, errors + pairs_failed,
                            link_error, time.monotonic() - start,
                            Campaigned(pairs_failed=pairs_failed))
        return done

    # -- node probes

    def _probe_spec(self, node: str, attempt: int) -> JobSpec:
        p = self.plan
        output = p.workdir / "jobs" / f"{node}.{attempt}.out"
        argv = [*p.program, "run", *p.probe, *p.probe_args,
                "--profile", p.profile, "--tag", p.tag, "--no-store", "--json",
                str(self._doc(output))]
        return JobSpec(f"hpb-{p.tag}-{node}"[:64], [node], argv, output, p.timeout_s,
                       partition=p.partition, gpus_per_node=p.gpus_per_node)

    def _doc(self, output: Path) -> Path:
        """Where the node job with this output writes its document."""
        return self.plan.workdir / "nodes" / f"{output.stem}.json"

    def node_pass(self, nodes: list[str], done: list[str], failed: dict[str, str]) -> None:
        """Run the probe on each node, `concurrency` at a time, adding each to `done` or to
        `failed` (with why) as it ends. A refusal of the first submission is the user's to fix
        and stops it all."""
        p = self.plan
        queue = list(nodes)
        active: dict[str, Job] = {}
        # attempts so far (an earlier pass, or an earlier `cluster run` of this campaign)
        tried = Counter(o.name.split(".")[0] for o in (p.workdir / "jobs").glob("*.out"))
        self.progress.start(self._status(queue, active, done, failed), len(nodes))
        try:
            while queue or active:
                while queue and (p.concurrency <= 0 or len(active) < p.concurrency):
                    node = queue.pop(0)
                    tried[node] += 1
                    try:
                        active[node] = self.sched.submit(self._probe_spec(node, tried[node]))
                    except UserError as exc:
                        if not (done or failed or active):
                            raise
                        failed[node] = str(exc)
                # a thousand jobs: a query every 5 s, not every second
                time.sleep(max(p.poll_s, len(active) / 200))
                self.sched.poll(list(active.values()))
                for node, why in self._settle(active, bool(done or failed)):
                    del active[node]
                    if why is None:
                        done.append(node)
                    else:
                        failed[node] = why
                    self.progress.advance(self._status(queue, active, done, failed))
        except KeyboardInterrupt:  # a document written since the last poll is kept too
            ended = {n: j for n, j in active.items() if self._doc(j.spec.output).is_file()}
            done.extend(n for n, why in self._collect(ended) if why is None)
            raise
        finally:
            self.sched.cancel(list(active.values()))

    def _overdue(self, job: Job, now: float) -> str | None:
        """Why a job still queued or running is to be cancelled (it never will start, has not
        started in time, or has run too long), or None."""
        p = self.plan
        if job.never:
            return f"{self.sched.name} will never start its job {job.id}: {job.reason}"
        if job.started is None and now - job.submitted > p.start_timeout_s:
            return (f"its job {job.id} did not start in {p.start_timeout_s:g} s"
                    + (f" ({job.reason})" if job.reason else "") + "; cancelled")
        if job.started is None or now - job.started <= p.timeout_s:
            return None
        if job.stacks_asked is None:  # first, where it stands: its stacks into its output
            job.stacks_asked = (now, len(_output(job.spec.output)))
            self.sched.stacks([job])
            return None
        asked, size = job.stacks_asked
        text = _output(job.spec.output)
        stood = _stood(text[size:])
        if not stood and now - asked < STACKS_WAIT_S:
            return None
        return (f"no result after {p.timeout_s:g} s running (job {job.id}); cancelled; "
                + (f"it stood in {stood} (its stacks end {job.spec.output}); " if stood else "")
                + f"last output: {_tail(text[:size])}")

    @staticmethod
    def _status(queue: list[str], active: dict[str, Job], done: list[str],
                failed: dict[str, str]) -> str:
        running = sum(1 for j in active.values() if j.started is not None)
        return (f"nodes: {len(queue) + len(active) - running} waiting, {running} running, "
                f"{len(done)} done, {len(failed)} failed")

    def _settle(self, active: dict[str, Job], begun: bool) -> list[tuple[str, str | None]]:
        """The nodes whose jobs ended (their documents stored) or are to be cancelled (and
        are), each with None or why it failed. A job the scheduler will never start, before
        any node answered, is the request's fault and stops it all."""
        now = time.monotonic()
        out = self._collect({n: j for n, j in active.items() if j.finished})
        for node, job in active.items():
            if job.finished or (why := self._overdue(job, now)) is None:
                continue
            self.sched.cancel([job])
            if job.never and not (begun or out):
                raise UserError(f"{why} (a limit or a permission of the request: partition, "
                                "time, account, QOS); cancelled")
            out.append((node, why))
        return out

    def _collect(self, ended: dict[str, Job]) -> list[tuple[str, str | None]]:
        """Store the documents of the nodes whose jobs ended, in one transaction: each node
        with None, or why it failed."""
        if not ended:
            return []
        with bulk():  # the runs kept to the campaign's end: walked by the collector once
            out = self._store_ended(ended)
        kept_since()
        return out

    def _store_ended(self, ended: dict[str, Job]) -> list[tuple[str, str | None]]:
        """`_collect`'s work, the collector paused."""
        out: list[tuple[str, str | None]] = []
        runs = []
        for node, job in ended.items():
            # Slurm's name for it as its host; the node's own is in the provenance
            run = self._no_result(job) or self._read(job.spec.output, node)
            if isinstance(run, str):
                out.append((node, run))
                continue
            runs.append(run)
            out.append((node, None))
        try:
            self._save(runs, checked=True)  # as read: checked then, not changed since
        except HpcprobeError as exc:
            raise HpcprobeError(f"{exc}; the nodes' documents stay in "
                                f"{self.plan.workdir / 'nodes'} (`hpcprobe import` stores "
                                "them)") from None
        return out

    # -- links

    def link_pass(self, rounds: list[list[tuple[str, str]]], scaling: bool
                  ) -> tuple[list[Metric], str | None]:
        """The links job: its figures, and why it ended early (None: it did not)."""
        p = self.plan
        assert self.exe is not None
        n = len(list((p.workdir / "jobs").glob("links.*.out"))) + 1
        pairs_file = p.workdir / "jobs" / f"links.{n}.pairs"
        pairing.write(rounds, pairs_file)
        nodes = sorted({x for r in rounds for pr in r for x in pr}, key=natural)
        reps, scale = LINK_SAMPLING.get(p.profile, LINK_SAMPLING["default"])
        argv = [str(self.exe), "--tests", "links,scaling" if scaling else "links",
                "--pairs", str(pairs_file), "--reps", str(reps), "--min-reps", str(reps),
                "--iter-scale", str(scale), "--link-size", str(p.link_size),
                "--link-parallel", str(p.link_parallel), "--coll-max-size", "65536"]
        spec = JobSpec(f"hpb-{p.tag}-links"[:64], nodes, argv,
                       p.workdir / "jobs" / f"links.{n}.out", p.timeout_s,
                       tasks_per_node=p.ranks_per_node, mpi=p.mpi_plugin,
                       partition=p.partition, env=launchers.srun_env({}))
        job = self.sched.submit(spec)
        total = len(rounds) + (len(nodes).bit_length() if scaling else 0)
        self.progress.start(f"links: {len(nodes)} nodes, {len(rounds)} rounds", total)
        seen, error = 0, None
        last = time.monotonic()  # when the last round or node count began
        try:
            while not job.finished:
                time.sleep(p.poll_s)
                self.sched.poll([job])
                now = time.monotonic()
                begun = _count_begins(spec.output)
                for _ in range(seen, begun):
                    self.progress.advance(f"links: {len(nodes)} nodes")
                    last = now
                seen = max(seen, begun)
                if job.started is None and now - job.submitted > p.start_timeout_s:
                    error = (f"its job {job.id} did not start in {p.start_timeout_s:g} s "
                             f"({job.reason or 'pending'}); cancelled")
                    break
                if job.started is not None and now - max(last, job.submitted) > p.timeout_s:
                    error = (f"job {job.id} made no progress for {p.timeout_s:g} s; cancelled; "
                             f"last output: {_tail(_output(spec.output))}")
                    break
        finally:
            self.sched.cancel([job])
        metrics, done = parse_links(spec.output)
        if error is None and not done:
            error = f"job {job.id} ended {job.state.lower()} early: {_tail(_output(spec.output))}"
        if error is not None and metrics:
            error += "; the figures it printed are kept"
        return metrics, error

    # -- a family between two nodes

    def pair_pass(self, family: str, flag: str, rounds: list[list[tuple[str, str]]],
                  errors: list[str]) -> list[Metric]:
        """The family on each pair of the schedule as a two-node job (run on the first node,
        the peer named by its flag); a round's pairs (disjoint) at once, `link_parallel` at
        most, as the links job measures them. Its figures between the two (from/to), judged
        as links; a pair that gave none, with why, added to `errors`."""
        p = self.plan
        out: list[Metric] = []
        total = sum(len(r) for r in rounds)
        self.progress.start(f"{family}: {total} pair(s)", total)
        batches = [r[i:i + (p.link_parallel or len(r))]
                   for r in rounds for i in range(0, len(r), p.link_parallel or len(r))]
        for batch in batches:
            jobs: list[tuple[str, str, Job]] = []
            try:
                for a, b in batch:
                    spec = self._pair_spec(family, flag, a, b)
                    try:
                        jobs.append((a, b, self.sched.submit(spec)))
                    except HpcprobeError as exc:  # refused by the scheduler
                        errors.append(f"{family} {a} -> {b}: {exc}")
                        self.progress.advance(f"{family}: {a} -> {b}")
            except BaseException:  # Ctrl-C while submitting: none of the batch left behind
                self.sched.cancel([job for _, _, job in jobs])
                raise
            whys = self._wait_all([job for _, _, job in jobs],
                                  lambda job: self.progress.advance(
                                      f"{family}: {' -> '.join(job.spec.nodes)}"))
            for (a, b, job), why in zip(jobs, whys, strict=True):
                run = why or self._read(job.spec.output)
                if not isinstance(run, str):
                    out += [m for m in run.metrics if "from" in m.params and "to" in m.params]
                failed = run if isinstance(run, str) else "; ".join(run.errors)
                if failed:
                    errors.append(f"{family} {a} -> {b}: {failed}")
        return out

    def _pair_spec(self, family: str, flag: str, a: str, b: str) -> JobSpec:
        """The family run on node a, its peer b named by `flag`."""
        p = self.plan
        output = p.workdir / "jobs" / f"{family}-{a}-{b}.{time.time_ns()}.out"
        argv = [*p.program, "run", family, flag, b, *p.pairs_args,
                "--profile", p.profile, "--tag", p.tag, "--no-store", "--json",
                str(self._doc(output))]
        return JobSpec(f"hpb-{p.tag}-{family}-{a}-{b}"[:64], [a, b], argv, output, p.timeout_s,
                       partition=p.partition)

    # -- a family across nodes

    def scale_pass(self, family: str, scaling: Scaling, nodes: list[str]) -> None:
        """The family on the first 1, 2, 4, ... of `nodes` (its --hosts), one job at a time;
        each job's run stored with its node count, or a campaign run with why it failed."""
        p = self.plan
        counts = node_counts(len(nodes))
        self.progress.start(f"{family} across nodes: {counts}", len(counts))
        for k in counts:
            hosts = nodes[:k]
            output = p.workdir / "jobs" / f"{family}-{k}nodes.{time.time_ns()}.out"
            argv = [*p.program, *p.scale_line[family], "--hosts",
                    ",".join(hosts), "--profile", p.profile, "--tag", p.tag, "--no-store",
                    "--json", str(self._doc(output)), *p.scale_args]
            spec = JobSpec(f"hpb-{p.tag}-{family}-{k}"[:64], hosts, argv, output, p.timeout_s,
                           tasks_per_node=p.ranks_per_node, partition=p.partition,
                           env={"SLURM_MPI_TYPE": p.mpi_plugin} if p.mpi_plugin else {})
            info = Campaigned("scaling", hosts, family=family, count=k,
                              metrics=list(scaling.metrics), grow=list(scaling.grow),
                              vary=list(scaling.vary), prefix=scaling.prefix)
            start = time.monotonic()
            try:
                [why] = self._wait_all([self.sched.submit(spec)])
            except HpcprobeError as exc:  # refused by the scheduler
                why = str(exc)
            run = why or self._read(spec.output)
            if isinstance(run, str):
                self._save_campaign("scaling", hosts, [], {}, [], [run], None,
                                    time.monotonic() - start, info)
            else:
                CAMPAIGN.put(run.provenance, info)
                run.host = hosts[0]
                self._save([run])
            self.progress.advance(f"{family} across nodes: {k} done")

    def _wait_all(self, jobs: list[Job], ended: Callable[[Job], None] | None = None
                  ) -> list[str | None]:
        """Follow jobs to their end (start and run timeouts as for node jobs, `ended` called
        as each ends); for each, None or why it failed."""
        why: dict[int, str | None] = {}
        try:
            while len(why) < len(jobs):
                time.sleep(max(self.plan.poll_s, (len(jobs) - len(why)) / 200))
                self.sched.poll([j for i, j in enumerate(jobs) if i not in why])
                now = time.monotonic()
                for i, job in enumerate(jobs):
                    if i in why:
                        continue
                    if job.finished:
                        why[i] = self._no_result(job)
                    elif (late := self._overdue(job, now)) is not None:
                        self.sched.cancel([job])
                        why[i] = late
                    else:
                        continue
                    if ended is not None:
                        ended(job)
        finally:
            self.sched.cancel([j for i, j in enumerate(jobs) if i not in why])
        return [why[i] for i in range(len(jobs))]

    def _no_result(self, job: Job) -> str | None:
        """Why a finished job left no document, or None."""
        if self._doc(job.spec.output).is_file():
            return None
        state = job.state.lower().replace("_", " ") + (f" ({job.reason})" if job.reason else "")
        return (f"its job {job.id} ended {state} without a result: "
                f"{_tail(_output(job.spec.output))}")

    def _read(self, output: Path, host: str | None = None) -> Run | str:
        """A job's document (its host `host` where given), or why it is unreadable or not a
        result: a run stopped by a signal (a time limit's SIGTERM) keeps what it had measured,
        but did not finish."""
        try:
            run = read_json(self._doc(output), host)
        except UserError as exc:
            return f"its result is unreadable: {exc}"
        if (cut := run.conditions.interrupted) is not None:
            return (f"it was stopped by a signal (a time limit?) during {cut.benchmark}; "
                    f"what it had measured is in {self._doc(output)}")
        return run

    # -- the campaign's own record

    def _save_campaign(self, role: str, nodes: list[str], done: list[str],
                       failed: dict[str, str], metrics: list[Metric], errors: list[str],
                       link_error: str | None, duration: float,
                       part: Campaigned | None = None) -> None:
        """A pass's campaign run; `part`: what the pass records beyond what every pass does
        (a scaling run's family and count, the pairs that failed)."""
        p = self.plan
        mpi = self.mpi
        prov: dict[str, Any] = {
            "host": socket.gethostname(), "cpu_model": None,
            "kernel": f"{platform.system()} {platform.release()}",
            "hpcprobe_version": hpcprobe.__version__, "compiler": mpi.mpicc if mpi else "",
            "isa_supported": [], "environment": {}, "python": platform.python_version(),
        }
        if mpi is not None:
            params.MPI.put(prov, params.MpiUsed.of(mpi))
        CAMPAIGN.put(prov, replace(
            part or Campaigned(), role=role,
            nodes=p.nodes if role == "campaign" else nodes, measured=nodes, done=done,
            failed=failed, link_error=link_error, scheduler=self.sched.name,
            probe=p.probe + p.probe_args, workdir=str(p.workdir),
            thresholds=vars(p.thresholds)))
        run = Run(uuid.uuid4().hex[:12], _now(), socket.gethostname(), p.profile,
                  sorted({m.benchmark for m in metrics}), prov, {}, metrics, errors=errors,
                  tag=p.tag, duration_s=duration, kind="campaign")
        self._save([run])


def _count_begins(path: Path) -> int:
    try:
        return path.read_text(errors="replace").count('"type":"begin"')
    except OSError:
        return 0


def parse_links(path: Path) -> tuple[list[Metric], bool]:
    """The link and scaling figures of a links job's output (node indices named by their
    hosts), and whether the program said it was done."""
    hosts: dict[int, str] = {}
    groups: dict[tuple[Any, ...], list[float]] = {}
    done = False
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return [], False
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "node":
            hosts[rec["index"]] = rec["host"]
        elif kind == "done":
            done = True
        elif kind == "sample":
            if "a" in rec:
                key: tuple[Any, ...] = ("links", rec["test"], rec["a"], rec["b"], rec["size"],
                                        rec.get("pairs"))
            elif "nodes" in rec:
                key = ("scaling", rec["test"], rec["nodes"], rec["size"])
            else:
                continue
            groups.setdefault(key, []).append(float(rec["value"]))
    out = []
    for key, samples in groups.items():
        bench, test = key[0], key[1]
        unit, better = UNITS[test]
        if bench == "links":
            a, b = hosts.get(key[2], str(key[2])), hosts.get(key[3], str(key[3]))
            params: dict[str, Any] = ({"from": a, "to": b} if test == "bandwidth"
                                      else {"a": a, "b": b})
            params["size"] = key[4]
            if key[5] is not None:
                params["pairs"] = key[5]
        else:
            params = {"nodes": key[2], "size": key[3]}
        out.append(Metric(bench, test, unit, params, samples, better))
    return out, done
