"""`hpcprobe cluster`: run a campaign over a cluster's nodes and links through its batch
scheduler, and report its verdict (terminal, HTML, JSON; exit status 1 when anything is flagged
or failed, for health checks)."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from hpcprobe import registry
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.cluster import bundle, views
from hpcprobe.cluster.campaign import Campaign, Plan, link_rounds, node_counts, this_hpcprobe
from hpcprobe.cluster.verdict import (
    ONLY,
    FleetVerdict,
    analyse,
    campaign_thresholds,
    work_rates,
)
from hpcprobe.commands import family, runargs
from hpcprobe.commands.base import (
    Bar,
    Parser,
    Spec,
    add_against,
    add_db,
    add_details,
    add_dry_run,
    add_json,
    add_output,
    add_profile,
    add_tag,
    console,
    print_json,
    terminate_interrupts,
)
from hpcprobe.common import background, files
from hpcprobe.common.bulk import bulk, kept
from hpcprobe.common.errors import EXIT_FAILURE, EXIT_INTERRUPTED, UserError
from hpcprobe.common.units import duration
from hpcprobe.history import read
from hpcprobe.judge.kept import KeptFigures, KeptHeadlines
from hpcprobe.judge.peers import Fig, Thresholds
from hpcprobe.measure import options
from hpcprobe.measure.family import Peer, Scaling
from hpcprobe.results.model import Run
from hpcprobe.results.store import Selection, Store
from hpcprobe.schedulers import SCHEDULERS, Scheduler
from hpcprobe.viewkit.table import Lines
from hpcprobe.views import history as history_views
from hpcprobe.views import verdict as verdict_views


def _fraction(text: str) -> float:
    try:
        x = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction such as 0.04 or 4%") \
            from None
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction between 0 and 1")
    return x


def _positive(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number") from None
    if x <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return x


def _program(text: str) -> str:
    """The hpcprobe program the node jobs run, or where it is staged: an absolute path (it is
    each node's own)."""
    if not text.startswith("/") or (text.endswith("/") and text != "/"):
        raise argparse.ArgumentTypeError(f"{text!r}: give an absolute path on the nodes, e.g. "
                                         "/opt/hpcprobe/bin/hpcprobe, /tmp")
    return text


def _add_thresholds(p: argparse.ArgumentParser, kept: str) -> None:
    """--z and --worse; their default is `kept` (the campaign's own), else Thresholds'."""
    th = Thresholds()
    p.add_argument("--z", type=_positive, metavar="Z",
                   help=f"flag beyond this many robust z-scores (default: {kept}, else "
                        f"{th.z:g})")
    p.add_argument("--worse", type=_fraction, metavar="FRACTION",
                   help=f"and only when more than this much worse (default: {kept}, else "
                        f"{th.worse:g}, i.e. 4 %)")


def _add_scheduler(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", choices=sorted(SCHEDULERS), default="slurm",
                   help="the batch scheduler (default: slurm)")


def setup(c: argparse.ArgumentParser) -> None:
    csub = c.add_subparsers(dest="cluster_command", required=True, parser_class=Parser)
    _setup_run(csub.add_parser("run", help="run a campaign: the node probe on every node, the "
                               "links between them, and again for what is flagged"))
    _setup_report(csub.add_parser("report", help="the verdict on a campaign: slow nodes, slow "
                                  "links, slow endpoints, failures; exit status 1 when any"))


def _setup_run(r: argparse.ArgumentParser) -> None:

    where = r.add_argument_group("which nodes (default: the current allocation)")
    where.add_argument("--partition", "-p", help="every node of this partition")
    where.add_argument("--nodelist", "-w", help="these nodes (a Slurm node list: n[1-4],gpu7)")
    where.add_argument("--only", type=_only, metavar="WHICH[,WHICH]",
                       help="only the nodes of campaign --tag that " + ", ".join(ONLY[:-1])
                       + " or " + ONLY[-1] + ": failed, were flagged, are suspects, or whose "
                       "last result no longer stands (its profile's window: a day for quick, "
                       "a week for default, a month for thorough; --valid-for)")
    where.add_argument("--valid-for", type=_duration, metavar="DURATION",
                       help="--only stale: how long a node's result stands (e.g. 12h, 7d; "
                       "default: its profile's window)")
    add_tag(r, "the campaign (default: cluster-DATE-TIME); its runs are stored under "
            "it")
    probe = registry.node_probe()
    r.add_argument("--probe", type=options.names, default=probe, metavar="B1,B2",
                   help="benchmarks of the node probe (default: " + ",".join(probe) + ")")
    r.add_argument("--probe-args", default="", metavar="'ARGS'",
                   help="narrowing options of the node probe's `hpcprobe run`, e.g. "
                        "'--threads 1 --isa avx2' (checked here before any job)")
    add_profile(r, "quick", " of the node probe and the links")
    r.add_argument("--concurrency", type=options.at_least(0, "a job count"), default=0,
                   metavar="N", help="node jobs at once (default 0: every node at once)")
    r.add_argument("--gpus-per-node", type=options.at_least(1, "a GPU count"), default=0,
                   metavar="N", help="GPUs each node probe job asks for (sbatch "
                   "--gpus-per-node; needed for GPU benchmarks where Slurm manages GPUs as "
                   "GRES; default: none)")
    r.add_argument("--timeout", type=options.seconds, default=900.0, metavar="SECONDS",
                   help="cancel a node's job running longer (default 900)")
    r.add_argument("--start-timeout", type=options.seconds, default=600.0, metavar="SECONDS",
                   help="cancel a job waiting longer to start (default 600)")
    start = r.add_mutually_exclusive_group()
    start.add_argument("--node-hpcprobe", type=_program, metavar="PATH",
                       help="the hpcprobe the node jobs run: an install on each node's own "
                       "disk (the node image's, e.g. /opt/hpcprobe/bin/hpcprobe: "
                       "docs/check.md), so a thousand jobs start without reading this one's "
                       "thousand files from a shared file system (default: this one, by this "
                       "Python)")
    start.add_argument("--stage", type=_program, metavar="DIR",
                       help="stage this hpcprobe on each node's own disk in DIR first (one "
                       "file: sbcast inside an allocation, else each node's first job copies "
                       "it) and run the node jobs from there (e.g. /tmp; docs/cluster.md)")
    r.add_argument("--workdir", metavar="DIR",
                   help="job scripts, outputs and node documents; on a file system every node "
                        "sees (default: ./hpcprobe-cluster/TAG)")
    links = r.add_argument_group("links")
    links.add_argument("--no-links", action="store_true", help="measure no links")
    links.add_argument("--link-size", type=options.size, default=1 << 20, metavar="BYTES",
                       help="bandwidth message size (default 1 MiB)")
    links.add_argument("--link-parallel", type=options.at_least(0, "a pair count"), default=0,
                       metavar="N", help="pairs of a round measured at once, by the links "
                                         "job and by --pairs (default 0: all, b_eff style)")
    links.add_argument("--ranks-per-node", type=options.at_least(1, "a rank count"),
                       metavar="N", help="ranks per node for the message rate (default: every "
                                         "CPU of the smallest node)")
    links.add_argument("--mpi-plugin", default="pmix", metavar="NAME",
                       help="srun --mpi=NAME for the MPI job (default pmix; '' for the "
                            "site's default)")
    scale = r.add_argument_group("across nodes")
    scale.add_argument("--scale", type=options.names, default=(), metavar="B1,B2",
                       help="also run these benchmarks across 1, 2, 4, ... of the nodes (weak "
                            "scaling; they keep the work per node): " + ", ".join(
                                registry.capable(Scaling)))
    scale.add_argument("--scale-args", default="", metavar="'ARGS'",
                       help="their options, e.g. '--n 20000 --blas openblas' (checked here "
                            "before any job)")
    pairs = r.add_argument_group("between pairs of nodes")
    pairs.add_argument("--pairs", type=options.names, default=(), metavar="B1,B2",
                       help="also run these benchmarks on each pair of the link schedule, the "
                            "first node measuring to the second (their figures are judged as "
                            "links): " + ", ".join(registry.capable(Peer)))
    pairs.add_argument("--pairs-args", default="", metavar="'ARGS'",
                       help="their options, e.g. '--iperf-time 5 --iperf-streams 4'")
    r.add_argument("--no-remeasure", action="store_true",
                   help="do not measure flagged nodes and links again")
    add_dry_run(r, "say what would run; submit nothing")
    _add_thresholds(r, "under the --tag of an earlier campaign, what it last ran with")
    _add_scheduler(r)
    add_db(r)


def _setup_report(rp: argparse.ArgumentParser) -> None:
    rp.add_argument("campaign", metavar="CAMPAIGN", help="the campaign's tag")
    add_json(rp, "the verdict")
    add_output(rp, "FILE.html", "also write the HTML report")
    rp.add_argument("--drain", action="store_true",
                    help="run the suggested scontrol drain commands (default: print them)")
    add_against(rp, "each node's headline figures", "the nodes below it are named (exit status "
                "1); default: each node's own previous runs in the store")
    add_details(rp, "each node's verdict box after the campaign's tables")
    _add_thresholds(rp, "what the campaign last ran with")
    _add_scheduler(rp)
    add_db(rp)


def _thresholds(a: argparse.Namespace, kept: Thresholds | None = None) -> Thresholds:
    """The thresholds given, else those the campaign kept, else the defaults."""
    base = kept or Thresholds()
    return replace(base, z=base.z if a.z is None else a.z,
                   worse=base.worse if a.worse is None else a.worse)


def _scheduler(a: argparse.Namespace) -> Scheduler:
    sched = SCHEDULERS[a.scheduler]()
    why = sched.available()
    if why is not None:
        raise UserError(why)
    return sched


def _read(store: Store, tag: str) -> tuple[list[Run], KeptFigures, dict[str, dict[str, Fig]]]:
    """The campaign's runs, each node run whose figures the campaign kept as a header (its
    metrics not read: a thousand nodes' 180,000 figures), any other whole; and its node runs'
    figures as kept."""
    runs = store.load_all(Selection(tag=tag), metrics=False)
    if not runs:
        raise UserError(f"campaign {tag!r}: no runs with this tag in {store.path}; "
                        "`hpcprobe list` shows the tags")
    figures = KeptFigures(store, registry.not_joined())
    made = figures.read(r.run_id for r in runs if r.kind == "node")
    whole = store.load_ids([r.run_id for r in runs if r.run_id not in made])
    return [whole.get(r.run_id, r) for r in runs], figures, made


def _analysed(runs: list[Run], tag: str, a: argparse.Namespace,
              made: dict[str, dict[str, Fig]]) -> FleetVerdict:
    """The campaign's verdict, judged with the thresholds given or those it ran with (`made`:
    its node runs' figures as kept; those it makes are added)."""
    return analyse(runs, tag, _thresholds(a, campaign_thresholds(runs)), registry.not_joined(),
                   registry.hardware_labels, work_rates(registry.capable(Scaling)), made)


def _load(store: Store, tag: str, a: argparse.Namespace) -> FleetVerdict:
    """The campaign's verdict so far; the figures it made kept (runs the campaign did not
    keep them for: read next time)."""
    runs, figures, made = _read(store, tag)
    v = _analysed(runs, tag, a, made)
    figures.keep(made)
    return v


def _kept(store: Store, tag: str) -> Thresholds | None:
    """The thresholds campaign `tag` last ran with, None for a new tag. A pass saves its
    campaign run after its nodes' runs, so the newest runs are read first, one at a time."""
    for info in store.runs(where=Selection(tag=tag)):
        kept = campaign_thresholds([store.load(info.run_id)])
        if kept is not None:
            return kept
    return None


def _nodes(a: argparse.Namespace, sched: Scheduler, v: FleetVerdict | None
           ) -> tuple[list[str], list[str]]:
    """The nodes to measure, and the nodes measured before that are their link partners
    (`--only`: from the verdict `v` on the campaign so far)."""
    if v is None:
        return sched.nodes(a.partition, a.nodelist), []
    nodes = v.select(a.only, datetime.now(UTC), a.valid_for)
    if not nodes:
        raise UserError(f"--only {','.join(a.only)}: campaign {a.tag} has no such nodes")
    flagged = {n for f in v.findings for n in f.nodes}
    return nodes, [n for n in v.measured if n not in nodes and n not in flagged]


def _only(text: str) -> tuple[str, ...]:
    """--only's list: each of ONLY, once."""
    got = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    wrong = [x for x in got if x not in ONLY]
    if not got or wrong:
        raise argparse.ArgumentTypeError(f"{','.join(wrong) or text!r}: give one or more of "
                                         f"{', '.join(ONLY)}, separated by commas")
    return got


def _duration(text: str) -> float:
    try:
        return duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _args(families: list[str], text: str, option: str) -> list[str]:
    """Narrowing options of `hpcprobe run FAMILIES`, checked here as each node's run will
    check them (its own words, before any job)."""
    try:
        extra = shlex.split(text)
        runargs.check(families, extra)
    except (ValueError, UserError) as exc:  # shlex's, or the run's own words
        raise UserError(f"{option} {text!r}: {exc}") from None
    return extra


def _scale(a: argparse.Namespace) -> list[str]:
    """The families asked to run across nodes (each must declare how), and their options; a
    family that takes values by position (`app NAME ... -- CMD`) runs alone, its own command."""
    known = registry.capable(Scaling)
    for name in a.scale:
        if name not in known:
            raise UserError(f"--scale {name!r}: runs across nodes: {', '.join(known)}")
    own = [f for f in a.scale if registry.families()[f].command_line() == [f]]
    if not own:
        return _args(list(a.scale), a.scale_args, "--scale-args") if a.scale else []
    if len(a.scale) > 1:
        raise UserError(f"--scale {own[0]}: runs alone (its --scale-args are its own: "
                        f"`{own[0]} NAME ... -- COMMAND`); run the others in another pass")
    try:
        extra = shlex.split(a.scale_args)
        family.check(registry.families()[own[0]], extra)
    except (ValueError, UserError) as exc:
        raise UserError(f"--scale-args {a.scale_args!r}: {exc}") from None
    return extra


def _pairs(a: argparse.Namespace) -> list[str]:
    """The families asked to run between pairs (each must name its peer flag), and options."""
    known = registry.capable(Peer)
    for name in a.pairs:
        if name not in known:
            raise UserError(f"--pairs {name!r}: runs between two nodes: "
                            f"{', '.join(known) or 'none'}")
    return _args(list(a.pairs), a.pairs_args, "--pairs-args") if a.pairs else []


def _plan(a: argparse.Namespace, sched: Scheduler, store: Store | None, tag: str,
          workdir: Path, probe_args: list[str], scale_args: list[str]) -> Plan:
    v, kept = None, None
    if a.only is not None:
        assert store is not None
        v = _load(store, a.tag, a)
        kept = v.thresholds
    elif a.tag and store is not None:  # another pass of a campaign keeps its thresholds
        kept = _kept(store, a.tag)
    nodes, peers = _nodes(a, sched, v)
    ranks = a.ranks_per_node or min(sched.cpus(nodes + peers).values(), default=1)
    return Plan(tag, nodes, workdir, list(a.probe), probe_args, a.profile, a.concurrency,
                a.timeout, a.start_timeout, links=not a.no_links and len(nodes) + len(peers) >= 2,
                link_size=a.link_size, link_parallel=a.link_parallel, ranks_per_node=ranks,
                mpi_plugin=a.mpi_plugin, remeasure=not a.no_remeasure,
                thresholds=_thresholds(a, kept), not_joined=registry.not_joined(),
                hardware=registry.hardware_labels, headlines=registry.declared(),
                partition=a.partition, gpus_per_node=a.gpus_per_node, peers=peers,
                scale={f: registry.capable(Scaling)[f] for f in a.scale},
                scale_args=scale_args,
                scale_line={f: registry.families()[f].command_line() for f in a.scale},
                pairs={f: registry.capable(Peer)[f].flag for f in a.pairs},
                pairs_args=_pairs(a),
                program=[a.node_hpcprobe] if a.node_hpcprobe else this_hpcprobe())


def cmd_run(a: argparse.Namespace) -> int:
    if a.only is not None and not a.tag:  # before the scheduler is asked anything
        raise UserError(f"--only {','.join(a.only)}: name the campaign with --tag")
    probe_args = _args(list(a.probe), a.probe_args, "--probe-args")
    scale_args = _scale(a)
    tag = a.tag or datetime.now(UTC).strftime("cluster-%Y%m%d-%H%M%S")
    workdir = Path(a.workdir or Path("hpcprobe-cluster") / tag).resolve()
    sched = _scheduler(a)
    if a.dry_run:  # reads the store only for --only, and creates none
        if a.only is None:
            return _dry_run(_plan(a, sched, None, tag, workdir, probe_args, scale_args), sched,
                            a.stage)
        with Store.open(a.db, create=False) as store:
            return _dry_run(_plan(a, sched, store, tag, workdir, probe_args, scale_args), sched,
                            a.stage)
    with Store.open(a.db) as store:
        store.check_writable()
        plan = _plan(a, sched, store, tag, workdir, probe_args, scale_args)
        try:
            workdir.mkdir(parents=True, exist_ok=True)
            files.check_writable(workdir / "campaign.check", "--workdir")
        except OSError as exc:
            raise UserError(f"--workdir {workdir}: cannot create it ({exc.strerror})") from None
        if a.stage:
            plan.staged = bundle.make(workdir, Path(a.stage))
            plan.program = [str(bundle.launcher(plan.staged, workdir))]
        print(f"Campaign {tag}: {len(plan.nodes)} node(s) through {sched.name}, probe "
              f"{shlex.join(plan.probe + plan.probe_args)} ({plan.profile}); work directory "
              f"{workdir}.")
        try:
            with terminate_interrupts(), Bar() as bar:  # killed, it cancels its jobs too
                verdict = Campaign(sched, store, plan, bar, say=print).execute()
        except KeyboardInterrupt:
            sys.stderr.write(f"hpcprobe: interrupted; queued jobs cancelled; what was measured "
                             f"is stored under tag {tag}\n")
            return EXIT_INTERRUPTED
        print(f"Stored under tag {tag} in {store.path}.")
    return _report(verdict, sched, a, drain=False)


def _dry_run(plan: Plan, sched: Scheduler, stage: str | None) -> int:
    rounds = link_rounds(plan)
    print(f"Campaign {plan.tag} through {sched.name}; nothing submitted (--dry-run):")
    print(f"  node probe: `hpcprobe run {shlex.join(plan.probe + plan.probe_args)} --profile "
          f"{plan.profile}` on "
          f"each of {len(plan.nodes)} node(s), "
          + (f"{plan.concurrency} at a time" if plan.concurrency else "all at once")
          + (f", {plan.gpus_per_node} GPU(s) a node" if plan.gpus_per_node else "")
          + f"; timeout {plan.timeout_s:g} s")
    for node in plan.nodes[:20]:
        print(f"    {node}")
    if len(plan.nodes) > 20:
        print(f"    ... and {len(plan.nodes) - 20} more")
    print("  start-up: " + (f"this hpcprobe staged in {stage} on each node's disk first" if
                            stage else shlex.join(plan.program)))
    if plan.links:
        nodes = {x for r in rounds for pr in r for x in pr}
        print(f"  links: one MPI job of {len(nodes)} node(s) x {plan.ranks_per_node} "
              f"rank(s): {sum(len(r) for r in rounds)} pair(s) in {len(rounds)} round(s), "
              "collectives on 2, 4, ... nodes")
    for fam in plan.pairs:
        print(f"  between pairs: `hpcprobe run {shlex.join([fam, *plan.pairs_args])} "
              f"{plan.pairs[fam]} PEER` on each of {sum(len(r) for r in rounds)} pair(s) "
              f"in {len(rounds)} round(s), a two-node job each, "
              + (f"{plan.link_parallel} at a time" if plan.link_parallel
                 else "a round's pairs at once"))
    for fam in plan.scale:
        line = [*plan.scale_line[fam], "--hosts", "...", *plan.scale_args]
        print(f"  across nodes: `hpcprobe {shlex.join(line)}` on "
              f"{node_counts(len(plan.nodes))} of the nodes that answer, one job each")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    files.check_outputs((a.json, "--json"), (a.output, "-o"))
    against = registry.against(a.against)
    with Store.open(a.db, create=False) as store:
        with bulk():  # the campaign kept to the end before the collector walks it once
            runs, figures, made = _read(store, a.campaign)
            kept()
        # the fleet verdict made, and the page's figures drawn, by a child meanwhile (a second
        # and a half of a 1,000-node report: it reads nothing from the store)
        fleet = background.start(partial(_fleet, runs, a, made))
        newest = _newest(runs)
        # each node against its reference (their headlines and their previous runs' as kept
        # beside them); its history's change points found for all the nodes at once (one
        # query a figure): those of the nodes its peers did not flag are said
        with bulk():  # runs not kept are read whole and dropped before the collector walks them
            judged = against.verdicts(newest, store, keep=True)
        shown = KeptHeadlines(store, against.known).of(newest[:1])  # what its history follows
        drift, moved = read.campaign(store, newest, [h for b in shown.values() for h in b.shown],
                                     {r.host for r in newest}, against.known)
        v, new, drawn = fleet()
        figures.keep(new)  # runs the campaign did not keep them for: read next time
    nodes = {r.host: judged[r.run_id] for r in newest}
    inside = set(v.measured) - {n for f in v.findings for n in f.nodes}
    past = ({h: what for h, what in drift.items() if h in inside},
            [history_views.group_line(label, g) for label, g in moved])
    sched = SCHEDULERS[a.scheduler]()
    status = _report(v, sched, a, drain=a.drain, nodes=nodes, past=past, drawn=drawn)
    return EXIT_FAILURE if any(n.failed for n in nodes.values()) else status


#: A figure drawn: its name, its caption and its PNG
Drawn = tuple[str, str, bytes]


def _fleet(runs: list[Run], a: argparse.Namespace, made: dict[str, dict[str, Fig]]
           ) -> tuple[FleetVerdict, dict[str, dict[str, Fig]], list[Drawn] | None]:
    """The campaign's verdict, the node runs' figures it made (those not kept) and, for a
    page (`-o`), its figures drawn as PNG."""
    held = set(made)
    v = _analysed(runs, a.campaign, a, made)
    new = {run_id: figs for run_id, figs in made.items() if run_id not in held}
    return v, new, _drawn(v) if a.output else None


def _drawn(v: FleetVerdict) -> list[Drawn]:
    """The campaign's figures, each as its PNG."""
    from hpcprobe.views import html

    return html.drawn(views.figures(v))


def _newest(runs: list[Run]) -> list[Run]:
    """Each node's newest node run of the campaign (a node measured again: its last pass)."""
    out: dict[str, Run] = {}
    for r in sorted((r for r in runs if r.kind == "node"), key=lambda r: r.created):
        out[r.host] = r
    return [out[h] for h in sorted(out)]


def _report(v: FleetVerdict, sched: Scheduler, a: argparse.Namespace, drain: bool,
            nodes: dict[str, Verdict] | None = None,
            past: tuple[dict[str, str], list[str]] = ({}, []),
            drawn: list[Drawn] | None = None) -> int:
    """The campaign's verdict (`past`: what its nodes' own history says: those that drifted
    from it, the hardware groups' change points; `drawn`: the page's figures, drawn
    already)."""
    from hpcprobe.views import terminal

    drift, changes = past
    fleet = verdict_views.fleet(nodes or {}, getattr(a, "details", False))
    if changes:
        fleet.append(Lines([f"History of the groups' campaign medians ({len(changes)} recent "
                            "change point(s)):"] + [f"  {line}" for line in changes]))
    if drift:
        fleet.append(Lines([f"Drifted from their own past while inside the fleet's spread "
                            f"({len(drift)}):"] + [f"  {h}: {what}" for h, what in drift.items()]
                           + ["  (`hpcprobe history --host NODE` shows each one's series)"]))
    blocks = fleet + views.blocks(v, sched.drain_argv)
    output, as_json = getattr(a, "output", None), getattr(a, "json", None)
    # the page or the document on standard output: the tables on stderr
    piped = files.is_stdout(output) or files.is_stdout(as_json)
    if as_json:
        print_json({**views.document(v, sched.drain_argv), "drifted": drift,
                    "group_changes": changes}, as_json)
    if not files.is_stdout(as_json):
        terminal.print_blocks(blocks, console(piped))
    if output:
        from hpcprobe.views import html

        text = html.page(f"hpcprobe cluster report: {v.campaign}", blocks,
                         views.figures(v) if drawn is None else drawn)
        files.atomic_write(output, text.encode(), "-o")
        print(f"Wrote {output}.", file=sys.stderr if as_json or piped else sys.stdout)
    if drain:
        for node, reason in views.to_drain(v):
            sched.drain(node, reason)
            print(f"Drained {node}: {reason}", file=sys.stderr)
    return EXIT_FAILURE if v.flagged else 0


def handle(a: argparse.Namespace) -> int:
    return {"run": cmd_run, "report": cmd_report}[a.cluster_command](a)


COMMAND = Spec("cluster", "measure every node and link of a cluster; find the slow ones", setup,
               handle, description="Cluster mode through the batch scheduler: `cluster run` "
                                   "measures, `cluster report` judges. See docs/cluster.md.")
