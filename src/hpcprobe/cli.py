"""The command line: parses, dispatches, prints. No measurement logic lives here."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from hpcprobe import __version__, native, registry
from hpcprobe.common import files, jsondoc
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import (
    ERROR_PREFIX,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    HpcprobeError,
    OptionError,
    UserError,
)
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import gpus, placement, sentinel, sysinfo, topology
from hpcprobe.machine.sizing import thread_ladder
from hpcprobe.measure import options, profiles, scaling
from hpcprobe.measure.family import Family, Flag, RunContext, flags
from hpcprobe.measure.runner import Interrupted, resolve_isa
from hpcprobe.results import export
from hpcprobe.results import model as results
from hpcprobe.results.store import Selection, Store, default_location
from hpcprobe.views import terminal

#: argparse's own messages, which name no value of ours
_ARGPARSE_OWN = ("invalid choice", "expected", "ignored", "not allowed", "one of the arguments")


class _Formatter(argparse.HelpFormatter):
    """Help texts are shown as written: a `%` in one (\"CI target 2 %\") is text, not a format."""

    def _expand_help(self, action: argparse.Action) -> str:
        return action.help or ""


class _Parser(argparse.ArgumentParser):
    """argparse that ends a usage mistake with one line and exit code 2."""

    #: the innermost (sub)command of the parse in progress: where the top level's "unrecognized
    #: arguments" came from, so its message names that command's --help
    _innermost: ClassVar[_Parser | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []  # the arguments parsed last (a subcommand's: its own)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)
        _Parser._innermost = self
        return super().parse_known_args(args, namespace)

    def _unknown_option_before(self, value: str) -> str | None:
        """The unknown option whose value argparse took for a positional (`hpl --hpl-n 5`
        reads 5 as the action), so that the message names the option, not its value."""
        known = [s for a in self._actions for s in a.option_strings]
        for before, tok in zip(self._given, self._given[1:], strict=False):
            name = before.split("=")[0]
            if tok == value and name.startswith("-") and \
                    not any(k.startswith(name) for k in known):
                return name
        return None

    def error(self, message: str) -> NoReturn:
        # "argument --np: 0: give ..." (our value parsers) reads "--np 0: give ..."
        m = re.match(r"^argument ([^:/]+)(?:/\S+)?: (.*)$", message, re.S)
        if m and not m.group(2).startswith(_ARGPARSE_OWN):
            message = f"{m.group(1)} {m.group(2)}"
        choice = re.match(r"^argument [^:]+: invalid choice: '(.*)' \(choose", message)
        unknown = choice and self._unknown_option_before(choice.group(1))
        if unknown:
            message = f"unrecognized arguments: {unknown}"
        where = (_Parser._innermost or self) if message.startswith("unrecognized") else self
        sys.stderr.write(f"{ERROR_PREFIX}{message} (see `{where.prog} --help`)\n")
        sys.exit(EXIT_USAGE)


def _add_run_options(r: argparse.ArgumentParser) -> None:
    """Options of every command that measures: profile, store, JSON, tag, oversubscription."""
    prof = r.add_mutually_exclusive_group()
    prof.add_argument("--profile", default="default",
                      help="time and sample budget: " + "; ".join(
                          f"{p.name} ({p.help})" for p in profiles.PROFILES.values())
                      + " (default: default)")
    prof.add_argument("--quick", action="store_const", dest="profile", const="quick",
                      help="same as --profile quick")
    _add_db(r)
    r.add_argument("--no-store", action="store_true", help="do not store the run")
    r.add_argument("--json", metavar="FILE", help="also write the run as a JSON document (`-`: "
                   "on standard output, the tables then on standard error)")
    r.add_argument("--tag", help="label the run, e.g. a BIOS or tuning configuration")
    r.add_argument("--oversubscribe", action="store_true",
                   help="allow more threads (or ranks) than the placement's CPUs")
    r.add_argument("--dry-run", action="store_true",
                   help="list what would be measured (per benchmark, after the options and the "
                        "profile), measure nothing, store nothing")
    r.add_argument("--input", metavar="FILE.xml",
                   help="with --dry-run: plan for the machine of this hwloc XML file instead")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hpcprobe", description="Characterise what an HPC node really delivers.")
    # the release, and the digest of the kernels it was built from (two installs of one
    # release can measure with other kernels)
    p.add_argument("--version", action="version",
                   version=f"hpcprobe {__version__} (kernels {native.source_id()})",
                   help="show the version and the kernels' digest, and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="measure this node and store the run",
                       description="Measure this node; with no BENCHMARK, run them all.")
    r.add_argument("benchmarks", nargs="*", metavar="BENCHMARK",
                   help="benchmarks to run (" + ", ".join(f.name for f in registry.measuring())
                        + ")")
    _add_run_options(r)
    r.add_argument("--report", metavar="FILE.html",
                   help="also write the HTML report of this run")
    r.add_argument("--isa", help="kernel variant: scalar, avx2, avx512 (default: the best this "
                                 "CPU supports; compute and frequency: every one it supports)")
    _add_family_options(r, registry.measuring())

    for fam in registry.measuring():
        if fam.command is None:
            continue
        fc = sub.add_parser(fam.name, help=fam.command.help,
                            description=fam.command.description)
        for pos in fam.command.positionals:
            fc.add_argument(pos.dest, metavar=pos.metavar, help=pos.help,
                            **({"nargs": "*"} if pos.many else {"type": pos.parse}))
        if not fam.command.positionals:
            fc.add_argument("action", nargs="?", choices=("run", *fam.command.actions),
                            default="run", help="run the tests (default); " + "; ".join(
                                f"{name}: {what}"
                                for name, (what, _) in fam.command.actions.items()))
        _add_family_options(fc, [fam])
        _add_run_options(fc)

    sized = list(registry.sized().values())
    sc = sub.add_parser("scale", help="run a benchmark at 1, 2, 4, ... ranks: weak and strong "
                                      "scaling, speedup and parallel efficiency",
                        description="Run a benchmark that has a problem size at a ladder of "
                                    "rank counts, weak (the size a rank held) and strong (the "
                                    "total held), and report the speedup against the first "
                                    "count with its CI, the parallel efficiency and the ideal.")
    sc.add_argument("family", choices=[f.name for f in sized], metavar="BENCHMARK",
                    help=", ".join(f.name for f in sized))
    sc.add_argument("--ranks", dest="counts", type=options.counts("a rank count", "1,2,4"),
                    metavar="N,N,...",
                    help="the rank counts (default: 1, 2, 4, ... up to the cores)")
    sc.add_argument("--mode", choices=("weak", "strong", "both"), default="both",
                    help="weak, strong or both (default: both; the MPI collectives: weak)")
    sc.add_argument("--isa", help="kernel variant (default: every one the CPU supports)")
    sc.add_argument("--report", metavar="FILE.html", help="also write the HTML report")
    _add_family_options(sc, sized, skip=frozenset({"--ranks"}))
    _add_run_options(sc)

    sw = sub.add_parser("sweep", help="run workloads under each configuration of a TOML file, "
                                      "interleaved, and recommend one per workload",
                        description="Run the sweep file's workloads (hpcprobe families and your "
                                    "applications) under each of its configurations (environment, "
                                    "OpenMP, options, wrapper, sysfs settings and pre/post "
                                    "commands, restored afterwards) in interleaved rounds, adding "
                                    "rounds while a comparison is undecided and the budget "
                                    "allows; compare every configuration with the baseline and "
                                    "write a recommendation per workload. See docs/sweep.md.")
    sw.add_argument("file", metavar="FILE.toml", help="the sweep file")
    sw.add_argument("--boot", metavar="NAME",
                    help="this boot's state (NPS4, SMT off ...): run the configurations that "
                         "name it; the others' runs are joined from the store")
    sw.add_argument("--analyse", action="store_true",
                    help="measure nothing: compare the stored runs of the sweep's "
                         "configurations (after the last boot)")
    sw.add_argument("--dry-run", action="store_true",
                    help="check the file and show what would run, run nothing")
    sw.add_argument("--markdown", metavar="FILE.md", help="write the recommendation as Markdown")
    sw.add_argument("--report", metavar="FILE.html", help="write the HTML report of the sweep")
    sw.add_argument("--json", metavar="FILE.json",
                    help="write the comparison and the recommendations as JSON (`-`: on "
                    "standard output, the tables then on standard error)")
    _add_db(sw)
    sw.add_argument("--no-store", action="store_true",
                    help="do not store the runs (runs of other boots cannot be joined then)")

    c = sub.add_parser("compare", help="compare runs with statistics",
                       description="Compare runs against the first: what differs in their "
                                   "configuration, then every metric they share.")
    c.add_argument("runs", nargs="+", metavar="RUN",
                   help="run id, unique id prefix, tag, host (its latest run), 'latest', or a "
                        "result JSON file; the first is the baseline")
    _add_db(c)
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the comparison as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    c.add_argument("--limit", type=options.at_least(0, "a row count"), default=40,
                   help="rows in the text view (default 40, 0 for all; JSON and CSV have all)")

    rp = sub.add_parser("report", help="write an HTML report of runs, with plots",
                        description="One self-contained HTML file (opens without network) "
                                    "with the runs' tables and plots; with several runs, the "
                                    "comparison and overlaid curves.")
    rp.add_argument("runs", nargs="*", metavar="RUN", default=["latest"],
                    help="run id, prefix, tag, host, 'latest' (default) or a result JSON file")
    rp.add_argument("-o", "--output", required=True, metavar="FILE.html")
    rp.add_argument("--png", metavar="DIR", help="also write each plot as a PNG file there")
    _add_db(rp)

    t = sub.add_parser("topology", help="show the machine's topology")
    t.add_argument("--input", metavar="FILE.xml", help="an hwloc XML file instead of this machine")
    t.add_argument("--json", action="store_true", help="print the model as JSON")

    pl = sub.add_parser("plan", help="show the CPUs a placement yields")
    pl.add_argument("--placement", required=True, help=placement.PLACEMENT_HELP)
    pl.add_argument("--threads", type=options.at_least(1, "a thread count"),
                    help="number of threads (default: all it yields)")
    pl.add_argument("--oversubscribe", action="store_true")
    pl.add_argument("--input", metavar="FILE.xml", help="an hwloc XML file instead of this machine")
    pl.add_argument("--json", action="store_true")

    ls = sub.add_parser("list", help="list stored runs")
    _add_db(ls)
    ls.add_argument("--limit", type=options.at_least(1, "a run count"), default=50,
                    help="most recent runs to list (default 50)")
    ls.add_argument("--json", action="store_true")
    _add_selection(ls)

    pr = sub.add_parser("prune", help="remove old runs from the store",
                        description="Remove the runs created before a date, whole (their "
                                    "metrics and samples too), in one transaction.")
    pr.add_argument("--before", type=_date, metavar="DATE", required=True,
                    help="remove runs created before this UTC date/time (ISO 8601)")
    pr.add_argument("--keep-tagged", action="store_true",
                    help="keep runs that carry a tag (campaigns, configurations)")
    pr.add_argument("--host", help="only runs of this host")
    pr.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    _add_db(pr)

    im = sub.add_parser("import", help="store run documents written with --json",
                        description="Store runs measured elsewhere (a compute node offline, "
                                    "another store): every file is read and checked first; "
                                    "a run stored already is skipped, so importing twice "
                                    "stores it once.")
    im.add_argument("files", nargs="+", metavar="FILE.json")
    _add_db(im)

    ex = sub.add_parser("export", help="write stored runs as JSON lines or CSV",
                        description="Runs, their metrics (with median and 95% CI) or every "
                                    "sample, selected by tag, host and date.")
    ex.add_argument("--what", choices=export.WHAT, default="metrics",
                    help="one row per run, per metric (default) or per sample")
    ex.add_argument("--format", choices=export.FORMATS, default="jsonl")
    _add_selection(ex)
    ex.add_argument("--metric", metavar="BENCHMARK.NAME", type=_metric_name,
                    help="only this metric of each run, e.g. memory.bandwidth (the fleet view)")
    ex.add_argument("--param", type=_param, action="append", metavar="KEY=VALUE",
                    help="with --metric: only figures whose param KEY has this VALUE, e.g. "
                         "kernel=triad (repeat for more)")
    ex.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    _add_db(ex)

    from hpcprobe import cluster_cli

    cluster_cli.add_parser(sub)

    sh = sub.add_parser("show", help="show a stored run")
    sh.add_argument("run", help="run id, unique id prefix, tag, 'latest', or a result JSON file")
    _add_db(sh)
    sh.add_argument("--json", action="store_true", help="print the run document")
    return p


def _date(text: str) -> str:
    """An ISO 8601 date or date and time, as the store's UTC text compares with it."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a date such as 2026-11-01 or "
                                         "2026-11-01T12:00") from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat(timespec="seconds") if "T" in text or " " in text else \
        when.date().isoformat()


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH|URL",
                   help="result store: an SQLite file, or postgresql://USER@HOST[:PORT]/DB "
                        f"(default: $HPCPROBE_DB, else {default_location()})")


def _metric_name(text: str) -> tuple[str, str]:
    benchmark, dot, name = text.partition(".")
    if not (benchmark and dot and name):
        raise argparse.ArgumentTypeError(f"{text!r}: give BENCHMARK.NAME, e.g. memory.bandwidth")
    return benchmark, name


def _param(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not (key and eq):
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE, e.g. kernel=triad")
    return key, value


def _add_selection(p: argparse.ArgumentParser) -> None:
    """Which stored runs: tag, host, time range."""
    p.add_argument("--tag", help="only runs with this tag")
    p.add_argument("--host", help="only runs of this host")
    p.add_argument("--since", type=_date, metavar="DATE",
                   help="only runs created at or after this UTC date/time (ISO 8601)")
    p.add_argument("--until", type=_date, metavar="DATE",
                   help="only runs created before this UTC date/time (ISO 8601)")


def _selection(a: argparse.Namespace) -> Selection:
    return Selection(a.tag, a.host, a.since, a.until)


def _dest(flag: Flag) -> str:
    return flag.flag.lstrip("-").replace("-", "_")


def _add_family_options(p: argparse.ArgumentParser, families: Sequence[Family],
                        skip: frozenset[str] = frozenset()) -> None:
    """Each family's option fields as flags (but those in skip), in one group per family; a
    flag that several families declare is one option, in the group of the first."""
    seen: dict[str, Flag] = {}
    users = _users(families, lambda flag: True)
    for fam in families:
        group = p.add_argument_group(f"narrowing the {fam.name} benchmark")
        for _, flag in flags(fam.options):
            if flag.flag in skip:
                continue
            if flag.flag in seen:
                if (seen[flag.flag].parse, seen[flag.flag].choices) != (flag.parse, flag.choices):
                    raise AssertionError(f"{flag.flag} is declared twice with different types")
                continue
            seen[flag.flag] = flag
            shared = users[flag.flag]
            kw: dict[str, Any] = {"dest": _dest(flag), "help": flag.help + (
                f" [{', '.join(shared)}]" if len(shared) > 1 else "")}
            if flag.switch:
                kw["action"] = "store_true"
            else:
                kw.update(type=flag.parse, choices=flag.choices, metavar=flag.metavar)
                if flag.many:
                    kw["action"] = "append"
            group.add_argument(flag.flag, **kw)


def _users(families: Sequence[Family], keep: Callable[[Flag], bool]) -> dict[str, list[str]]:
    """Flag -> the families that declare it, for the flags kept."""
    users: dict[str, list[str]] = {}
    for fam in families:
        for _, flag in flags(fam.options):
            if keep(flag):
                users.setdefault(flag.flag, []).append(fam.name)
    return users


def _given(a: argparse.Namespace, flag: Flag) -> bool:
    value = getattr(a, _dest(flag), None)
    return value is not None and value is not False


def _family_options(a: argparse.Namespace, fam: Family) -> Any:
    """The family's options dataclass from the flags given (and its command's positionals)."""
    kw = {}
    for name, flag in flags(fam.options):
        if _given(a, flag):
            value = getattr(a, _dest(flag))
            kw[name] = flag.convert(value) if flag.convert else value
    for pos in fam.command.positionals if fam.command and getattr(a, "command", None) == fam.name \
            else ():
        value = getattr(a, pos.dest)
        kw[pos.dest] = tuple(getattr(a, "after_dashes", None) or value) if pos.many else value
    return fam.options(**kw)


def _check_narrowing(a: argparse.Namespace, chosen: Sequence[Family]) -> None:
    """A flag given for families none of which runs is a mistake, said once per flag group."""
    users = _users(registry.measuring(), lambda flag: _given(a, flag))
    names = {f.name for f in chosen}
    idle: dict[tuple[str, ...], list[str]] = {}  # families -> their idle flags
    for flag_name, fams in users.items():
        if not names & set(fams):
            idle.setdefault(tuple(fams), []).append(flag_name)
    for group, flag_names in idle.items():
        which = group[0] if len(group) == 1 else ", ".join(group[:-1]) + " and " + group[-1]
        raise UserError(f"{'/'.join(flag_names)} narrow{'s' if len(flag_names) == 1 else ''} "
                        f"the {which} benchmark{'s' if len(group) > 1 else ''}; add "
                        f"{f'`{group[0]}`' if len(group) == 1 else 'one of them'} to the "
                        "benchmarks")


def _print_json(obj: Any) -> None:
    sys.stdout.write(jsondoc.dumps(obj, indent=1) + "\n")


def _console(stderr: bool = False) -> Any:
    """The console for tables and messages: standard error where the command's document goes
    to standard output (`--json -`, `--report -`), which then holds nothing else."""
    from rich.console import Console

    # tables are wide; a pipe or a file gets them unwrapped
    tty = (sys.stderr if stderr else sys.stdout).isatty()
    return Console(stderr=stderr, width=None if tty else 160)


class _Bar:
    """A rich progress bar on stderr while measurements run, redrawn once a second (its clock
    shows seconds): each redraw takes about 1 ms of a CPU that the kernels use, and rich's 10 a
    second cost 1 % of one CPU and a stall of a thread every 100 ms."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(stderr=True)
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                 transient=True, disable=not console.is_terminal,
                                 refresh_per_second=1)
        self.task: Any = None

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, label: str, total: int) -> None:
        self.task = self.progress.add_task(label, total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label)


def cmd_run(a: argparse.Namespace) -> int:
    prof = profiles.get(a.profile)
    chosen = registry.resolve(a.benchmarks)
    isa = resolve_isa(a.isa)
    _check_narrowing(a, chosen)
    return _measure(a, prof, chosen, isa, isa_asked=a.isa is not None)


def _measure(a: argparse.Namespace, prof: profiles.Profile, chosen: Sequence[Family], isa: str,
             isa_asked: bool = False, standalone: bool = False) -> int:
    """Run the families, print the run, store it and write its JSON and report as asked."""
    opts = {f.name: _family_options(a, f) for f in chosen}
    if a.input and not a.dry_run:
        raise UserError("--input plans for another machine: add --dry-run (measurements run on "
                        "this one)")
    files.check_outputs((a.json, "--json"), (getattr(a, "report", None), "--report"))
    if a.dry_run:
        return _dry_run(a, prof, chosen, isa, opts, isa_asked, standalone)
    store = None if a.no_store else Store.open(a.db)
    if store is not None:
        store.check_writable()
    topo = topology.discover()
    return _measured(a, store, lambda bar: (registry.execute(
        topo, prof, [f.name for f in chosen], isa, opts, bar, oversubscribe=a.oversubscribe,
        tag=a.tag, isa_asked=isa_asked, standalone=standalone), []))


def _measured(a: argparse.Namespace, store: Store | None,
              work: Callable[[_Bar], tuple[results.Run, Sequence[results.Run]]]) -> int:
    """Measure with a progress bar (`work`: the run and the runs it summarises), then show,
    write and store it. Ctrl-C or SIGTERM keeps what was measured before it, marked as such."""
    with _terminate_interrupts():
        try:
            with _Bar() as bar:
                run, parts = work(bar)
        except Interrupted as stop:  # what was measured before it is not lost
            _keep(a, stop.run, store, stop.parts)
            sys.stderr.write("hpcprobe: interrupted; the figures measured before it are "
                             f"{'kept above' if store is None else 'stored'}, marked as such\n")
            return EXIT_INTERRUPTED
    _keep(a, run, store, parts)
    return EXIT_FAILURE if run.errors else 0


@contextlib.contextmanager
def _terminate_interrupts() -> Iterator[None]:
    """SIGTERM (kill, scancel, a job's time limit) stops the work as Ctrl-C does, so that what
    ends it (a run so far kept, a configuration's state restored) happens on both."""

    def term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _keep(a: argparse.Namespace, run: results.Run, store: Store | None,
          parts: Sequence[results.Run] = ()) -> None:
    """Show the run; write its JSON, store it (after the runs it summarises, `parts`) and write
    its report, as asked. A run that measured nothing and failed nothing (every benchmark
    skipped: `run gpu` without a GPU, `run mpi` without an MPI) is no result: it is shown and
    written, then refused as a user's mistake, not stored."""
    piped = files.is_stdout(a.json)
    console = _console(piped or files.is_stdout(getattr(a, "report", None)))
    terminal.render(run, console, registry.views())
    unwritten: HpcprobeError | None = None  # the document, where the store keeps the run
    if a.json:  # first: if the store fails now, the figures are in the document
        try:
            results.write_json(run, a.json)
        except HpcprobeError as exc:
            if store is None:
                raise
            unwritten = exc
        else:
            if not piped:
                console.print(f"Wrote {a.json}.", highlight=False, markup=False)
    if not run.metrics and not run.errors:
        if store is not None:
            store.close()
        if unwritten is not None:
            raise unwritten
        raise UserError("nothing was measured: every benchmark asked for was skipped (the "
                        "warnings above say why); the run is not stored")
    if store is not None:
        try:
            for part in parts:
                store.save(part)
            store.save(run)
        except HpcprobeError as exc:
            kept = f"; the run is in {'the document on standard output' if piped else a.json} " \
                "(`hpcprobe import` can store it later)" if a.json and not unwritten else ""
            raise HpcprobeError(f"{exc}{kept}") from None
        finally:
            store.close()
        also = f" (and the {len(parts)} run(s) it summarises)" if parts else ""
        console.print(f"Stored as run {run.run_id} in {store.path} "
                      f"({len(run.metrics)} metrics){also}; `hpcprobe show {run.run_id}` reads "
                      "it back.", highlight=False, markup=False)
    if getattr(a, "report", None):
        from hpcprobe.views import html as report

        n = report.write([run], a.report, registry.views(), registry.figures(),
                         registry.not_joined(), flag="--report")
        console.print(f"Wrote the report {a.report} ({n} plots).", highlight=False, markup=False)
    else:
        ref = run.run_id if store is not None else None if piped else a.json
        console.print(f"Its report: `hpcprobe report {ref} -o report.html`; compare it with "
                      f"another run: `hpcprobe compare {ref} OTHER`." if ref else
                      "Not stored: add --report FILE.html or --json FILE to keep this run's "
                      "figures for a report.", highlight=False, markup=False)
    if unwritten is not None:
        raise type(unwritten)(f"{unwritten}; the run is stored as {run.run_id} "
                              f"(`hpcprobe show {run.run_id} --json` prints its document)")


def _dry_run(a: argparse.Namespace, prof: profiles.Profile, chosen: Sequence[Family], isa: str,
             opts: dict[str, Any], isa_asked: bool, standalone: bool) -> int:
    """What the run would measure (and refuse), and nothing else."""
    topo = topology.load(a.input)
    todo = registry.plan(topo, prof, [f.name for f in chosen], isa, opts, a.oversubscribe,
                         isa_asked, standalone)
    # an hwloc XML states no instruction set: the kernels listed are those this machine runs
    where = f"{a.input} (ISA and kernel variants: this machine's)" if a.input else "this machine"
    print(f"Profile {prof.name}, ISA {isa}, on {topo.counts()['cores']} core(s) of {where}; "
          "nothing measured or stored (--dry-run):")
    for name, lines in todo:
        print(f"{name}: {len(lines)} measurement(s)")
        for line in lines:
            print(f"  {line}")
    with contextlib.suppress(HpcprobeError):  # a machine it cannot read: its run says why
        p = sentinel.probe(topo).describe()
        print(f"and around them the node sentinel: a DRAM triad on CPUs {p['cpus']}, "
              f"{format_bytes(p['size_bytes'])}, before the first benchmark and after each")
    return 0


def cmd_family(a: argparse.Namespace) -> int:
    """A family's own command: one of its actions, or the family alone."""
    [fam] = [f for f in registry.measuring() if f.name == a.command]
    assert fam.command is not None
    if getattr(a, "action", None) in fam.command.actions:
        return fam.command.actions[a.action][1](_family_options(a, fam))
    prof = profiles.get(a.profile)
    return _measure(a, prof, [fam], resolve_isa(None), standalone=True)


def cmd_scale(a: argparse.Namespace) -> int:
    """A family at a ladder of rank counts, weak and strong: every count's run and the summary
    with the speedup and the parallel efficiency."""
    prof = profiles.get(a.profile)
    fam = registry.sized()[a.family]
    _check_narrowing(a, [fam])
    opts = _family_options(a, fam)
    isa = resolve_isa(a.isa)
    assert fam.sized is not None
    modes = fam.sized.modes if a.mode == "both" else (a.mode,)
    topo = topology.load(a.input)
    ladder = [k for k in thread_ladder(topo.counts()["cores"]) if k >= fam.sized.least]
    counts = list(a.counts or ladder or [fam.sized.least])
    files.check_outputs((a.json, "--json"), (a.report, "--report"))
    if a.dry_run:
        ctx = RunContext(topo, prof, isa, a.oversubscribe, isa_asked=a.isa is not None,
                         standalone=True)
        for mode, k, o in scaling.steps(ctx, fam, opts, counts, modes):
            assert fam.plan is not None
            print(f"{fam.name}, {mode}, {k} rank(s):")
            for line in fam.plan(ctx, o):
                print(f"  {line}")
        return 0
    if a.input:
        raise UserError("--input plans for another machine: add --dry-run (measurements run on "
                        "this one)")
    store = None if a.no_store else Store.open(a.db)
    if store is not None:
        store.check_writable()
    return _measured(a, store, lambda bar: scaling.execute(
        topo, prof, fam, isa, opts, counts, modes, bar, a.oversubscribe, a.tag,
        a.isa is not None))


def cmd_sweep(a: argparse.Namespace) -> int:
    """A tuning sweep: every configuration's state in turn, its workloads, the comparison with
    the baseline and a recommendation per workload."""
    from hpcprobe.tuning import config, state, sweep

    topo = topology.discover()
    isa = resolve_isa(None)
    s = config.load(a.file, registry.families(), sweep.fingerprint_labels(topo, isa))
    files.check_outputs((a.json, "--json"), (a.report, "--report"), (a.markdown, "--markdown"))
    if a.dry_run:
        return _sweep_plan(s, a.boot)
    if not a.analyse:
        for c in s.configurations.values():
            for path, value in c.sysfs.items():
                if not os.access(path, os.W_OK):
                    raise UserError(f"{a.file}: [configurations.{c.name}] set {path}: not "
                                    "writable here (no such file, or not root)")
                if (why := state.refused_value(path, value)) is not None:
                    raise UserError(f"{a.file}: [configurations.{c.name}] {why}")
    store = None if a.no_store else Store.open(a.db)
    if store is not None:
        store.check_writable()
    piped = files.is_stdout(a.json)
    console = _console(any(files.is_stdout(p) for p in (a.json, a.report, a.markdown)))

    def say(text: str) -> None:
        sys.stderr.write(text + "\n")

    try:
        with _terminate_interrupts(), _Bar() as bar:
            runner = sweep.Runner(s, registry.families(), topo, isa, store,
                                  registry.not_joined(), bar, say, a.boot, a.analyse)
            out = runner.analyse() if a.analyse else runner.execute()
    except KeyboardInterrupt:
        kept = len(runner.parts) if "runner" in locals() else 0
        sys.stderr.write(f"hpcprobe: interrupted; every configuration's state was restored; "
                         f"{kept} run(s) of the sweep stored (tags {s.name}:CONFIGURATION)\n")
        return EXIT_INTERRUPTED
    terminal.render(out.summary, console, registry.views())
    if store is not None:  # first: a file that cannot be written then loses nothing
        with store:
            if not a.analyse or not store.has(out.summary.run_id):
                store.save(out.summary)
        console.print(f"Stored the sweep as run {out.summary.run_id} ({len(out.parts)} "
                      f"workload run(s) stored as they ran, tags {s.name}:CONFIGURATION); "
                      f"`hpcprobe show {out.summary.run_id}` reads it back.", highlight=False,
                      markup=False)
    if a.json:
        sweep.write_json(out, a.json)
        if not piped:
            console.print(f"Wrote {a.json}.", highlight=False, markup=False)
    if a.markdown:
        from hpcprobe.views import markdown

        files.atomic_write(a.markdown, markdown.render(out.summary, registry.views()).encode(),
                           "--markdown")
        console.print(f"Wrote {a.markdown}.", highlight=False, markup=False)
    if a.report:
        from hpcprobe.views import html as report

        n = report.write([out.summary], a.report, registry.views(), registry.figures(),
                         registry.not_joined(), flag="--report")
        console.print(f"Wrote the report {a.report} ({n} plots).", highlight=False, markup=False)
    if out.skipped:
        return EXIT_USAGE
    return EXIT_FAILURE if out.failures else 0


def _sweep_plan(s: Any, boot: str | None) -> int:
    """What a sweep would run, in order, and nothing else; each workload checked by its own
    dry run under each configuration (its environment; the machine's state as it is now)."""
    from hpcprobe.tuning import state, sweep

    here = [c for c in s.configurations.values() if c.boot == boot]
    print(f"Sweep {s.name}: baseline {s.baseline}; at least {s.rounds} round(s), at most "
          f"{s.max_rounds}, budget {s.budget_s:g} s; profile {s.profile}; nothing runs "
          "(--dry-run). Each round, in this order:")
    refused = 0
    if not here:
        print(f"  (no configuration for boot {boot or '(none)'}; boots: "
              f"{', '.join(s.boots())})")
    for c in here:
        print(f"  {c.name}" + (f" (boot {c.boot})" if c.boot else "") + ":")
        for path, value in c.sysfs.items():
            print(f"    set {path} = {value} (restored after)")
            if (why := state.refused_value(path, value)) is not None:
                refused += 1
                print(f"      refused: {why}")
        for argv in c.pre:
            print(f"    pre: {shlex.join(argv)}")
        for k, v in c.expect.items():
            print(f"    check: {k} = {v}")
        for w in s.workloads.values():
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in c.env.items())
            argv = sweep.workload_argv(s, registry.families(), c, w, Path("RUN.json"))
            print(f"    {w.name}: {env + ' ' if env else ''}{shlex.join(argv)}")
            if (why := sweep.check(s, registry.families(), c, w)) is not None:
                refused += 1
                print(f"      refused (its dry run, in this machine's state now): {why}")
        for argv in c.post:
            print(f"    post: {shlex.join(argv)}")
    if refused:
        raise UserError(f"{s.path}: {refused} step(s) refused, shown above; fix the sweep file")
    return 0


def cmd_topology(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    # this node's GPUs and what is near them (a recorded node: `gpu info --gpu-smi`)
    inv = gpus.discover() if a.input is None else None
    if a.json:
        _print_json({**topo.to_dict(), **({"gpus": inv.to_dict()} if inv and inv.gpus else {})})
    else:
        print(topology.render(topo))
        if a.input is None and (lim := sysinfo.cgroup_memory_limit()) is not None:
            print(f"Memory limit: {format_bytes(lim.limit)} for this process's cgroup "
                  f"({lim.where}), {format_bytes(lim.headroom)} of it free: plans are sized "
                  "within it")
        if inv and inv.gpus:
            print(gpus.render(inv))
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    pl = placement.plan(topo, a.placement, a.threads, a.oversubscribe)
    if a.json:
        _print_json(pl.to_dict())
    else:
        print(f"placement {pl.placement}: {len(pl.cpus)} thread(s) on CPUs "
              f"{','.join(map(str, pl.cpus))} ({format_cpulist(pl.cpus)})"
              + (" [oversubscribed]" if pl.oversubscribed else ""))
        for i, cpu in enumerate(pl.cpus):
            pu = topo.pu(cpu)
            print(f"  thread {i:4d} -> CPU {cpu:4d}  package {pu.package}  NUMA {pu.numa}  "
                  f"L3 {'-' if pu.l3 is None else pu.l3}  core {pu.core}")
    return 0


def cmd_list(a: argparse.Namespace) -> int:
    with Store.open(a.db, create=False) as st:
        rows = st.runs(a.limit, _selection(a))
        where = st.path
    if a.json:
        _print_json([r.__dict__ for r in rows])
        return 0
    from rich.table import Table

    t = Table(title=f"Runs in {where}", title_justify="left")
    for col in ("run", "created", "host", "tag", "profile", "benchmarks", "metrics", "seconds"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.run_id, r.created, r.host, r.tag or "", r.profile, ",".join(r.benchmarks)
                  + (" (interrupted)" if r.interrupted else ""), str(r.metrics),
                  f"{r.duration_s:.1f}")
    _console().print(t)
    return 0


def _load_runs(refs: Sequence[str], db: str | None) -> list[results.Run]:
    """Runs named by a result JSON file (a name ending in .json or holding a directory), or by
    id, prefix, tag, host or 'latest' in the store; one run named twice is refused (report and
    compare set the runs against each other)."""
    out = []
    store: Store | None = None
    try:
        for ref in refs:
            a_path = ref.endswith(".json") or os.sep in ref
            if a_path and Path(ref).exists():
                out.append(results.read_json(ref))
                continue
            try:
                store = store or Store.open(db, create=False)
                out.append(store.load(ref))
            except UserError:
                if not a_path:
                    raise
                raise UserError(f"{ref}: no such file, and no stored run has that name") \
                    from None
    finally:
        if store is not None:
            store.close()
    named: dict[str, str] = {}
    for ref, run in zip(refs, out, strict=True):
        if run.run_id in named:
            raise UserError(f"{named[run.run_id]} and {ref} are the same run ({run.run_id}): "
                            "its samples compared with themselves say nothing; name another")
        named[run.run_id] = ref
    return out


def cmd_report(a: argparse.Namespace) -> int:
    from hpcprobe.views import html as report

    files.check_writable(a.output, "-o")
    runs = _load_runs(a.runs, a.db)
    n = report.write(runs, a.output, registry.views(), registry.figures(),
                     registry.not_joined(), a.png)
    print(f"Wrote {a.output} ({n} plots" + (f", PNGs in {a.png}" if a.png else "") + ").",
          file=sys.stderr if files.is_stdout(a.output) else sys.stdout)
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    from hpcprobe.analysis import compare

    c = compare.compare(_load_runs(a.runs, a.db), registry.not_joined())
    if a.json:
        _print_json(compare.to_json(c))
    elif a.csv:
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=compare.CSV_COLUMNS, extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for r in c.rows:
            w.writerow(r.to_dict())
    else:
        terminal.render_comparison(c, _console(), a.limit if a.limit > 0 else None)
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    [run] = _load_runs([a.run], a.db)
    if a.json:
        _print_json(run.to_dict())
    else:
        terminal.render(run, _console(), registry.views())
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    runs = [results.read_json(f) for f in a.files]  # all checked before any is stored
    with Store.open(a.db) as st:
        stored, skipped = export.import_runs(st, runs)
        where = st.path
    print(f"Imported {len(stored)} run(s) into {where}"
          + (f"; {len(skipped)} stored already, skipped: {', '.join(skipped)}" if skipped
             else "") + ".")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    if a.output:
        files.check_writable(a.output, "-o")
    if a.metric:
        _check_metric(*a.metric)
    with Store.open(a.db, create=False) as st:
        if a.param and not a.metric:
            raise UserError("--param selects figures of one metric: add --metric")
        records = list(export.rows(st, a.what, _selection(a), a.metric, dict(a.param or [])))
        if a.param and not records and a.what != "runs":
            _check_params(st, a)
        text = export.render(iter(records), a.what, a.format)
    if a.output:
        files.atomic_write(a.output, text.encode(), "-o")
    else:
        sys.stdout.write(text)
    return 0


def _check_metric(benchmark: str, name: str) -> None:
    """A metric its family does not declare (a typo) is refused with the ones it does; a
    benchmark that is no family here (a series, another version's) is not judged."""
    fam = registry.families().get(benchmark)
    if fam is None or not fam.metrics or fam.open_metrics:
        return
    names = [m.name for m in fam.metrics]
    if name not in names:
        raise UserError(f"--metric {benchmark}.{name}: {benchmark} has no metric {name!r}; its "
                        f"metrics: {', '.join(names)}")


def _check_params(st: Store, a: argparse.Namespace) -> None:
    """--param that matched no figure of a metric the selected runs have: the params they have
    (a typo in a key or a value), refused; where none has the metric, an empty export."""
    benchmark, name = a.metric
    figs = st.metric_across(benchmark, name, _selection(a))
    if figs:
        have: dict[str, set[str]] = {}
        for _, m in figs:
            for k, v in m.params.items():
                have.setdefault(k, set()).add(str(v))
        said = "; ".join(f"{k}: {', '.join(sorted(v)[:6])}" + (" ..." if len(v) > 6 else "")
                         for k, v in sorted(have.items()))
        raise UserError(f"--param {' '.join(f'{k}={v}' for k, v in a.param)}: no figure of "
                        f"{'.'.join(a.metric)} in the runs selected has it; their params: {said}")


def cmd_prune(a: argparse.Namespace) -> int:
    with Store.open(a.db, create=False) as st:
        old = [r for r in st.runs(where=Selection(host=a.host, until=a.before))
               if not (a.keep_tagged and r.tag)]
        if a.dry_run:
            print(f"Would remove {len(old)} run(s) created before {a.before} from {st.path}"
                  + (f": {', '.join(r.run_id for r in old[:20])}" if old else "")
                  + (" ..." if len(old) > 20 else "") + ".")
            return 0
        gone = st.delete([r.run_id for r in old])
        print(f"Removed {gone} run(s) created before {a.before} from {st.path}"
              + (" (tagged runs kept)" if a.keep_tagged else "") + ".")
    return 0


def cmd_cluster(a: argparse.Namespace) -> int:
    from hpcprobe import cluster_cli

    return cluster_cli.command(a)


COMMANDS = {"run": cmd_run, "compare": cmd_compare, "report": cmd_report, "import": cmd_import,
            "export": cmd_export, "prune": cmd_prune, "topology": cmd_topology, "plan": cmd_plan,
            "list": cmd_list, "show": cmd_show, "cluster": cmd_cluster, "scale": cmd_scale,
            "sweep": cmd_sweep}


def _stacks_on_usr1() -> None:
    """`kill -USR1 PID` prints every thread's stack to stderr: a run that seems hung says
    where it is (`cluster run` asks so of a job before it cancels it for its time)."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__ or 2, all_threads=True)
    except (AttributeError, ValueError, OSError, RuntimeError):  # no SIGUSR1, stderr closed
        pass


def main(argv: Sequence[str] | None = None) -> int:
    _stacks_on_usr1()
    given = list(sys.argv[1:] if argv is None else argv)
    # `hpcprobe app NAME [OPTIONS] -- COMMAND ARGS...`: what follows -- is the command, as is
    after = given.index("--") if "--" in given else len(given)
    parser = build_parser()
    args = parser.parse_args(given[:after])
    args.after_dashes = given[after + 1:]
    takes_command = {f.name for f in registry.measuring() if f.command is not None
                     and any(pos.many for pos in f.command.positionals)}
    if "--" in given and args.command not in takes_command:
        parser.error(f"`--` and what follows it: only {', '.join(sorted(takes_command))} take "
                     "a command after --")
    try:
        return COMMANDS.get(args.command, cmd_family)(args)
    except OptionError as exc:  # options named as flags
        sys.stderr.write(f"{ERROR_PREFIX}{exc.render(registry.option_names())}\n")
        return exc.exit_code
    except HpcprobeError as exc:
        sys.stderr.write(f"{ERROR_PREFIX}{exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("hpcprobe: interrupted; nothing of this run was stored\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hpcprobe compare ... --csv | head`: the reader has enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
