"""What every command module shares: its registration record, the parser that ends a usage
mistake in one line, the options several commands take (the store, run selection, the
measuring options) and the console the tables and messages go to."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from hpcprobe.common import files, jsondoc
from hpcprobe.common.errors import ERROR_PREFIX, EXIT_USAGE, UserError
from hpcprobe.common.secrets import redact
from hpcprobe.measure import profiles
from hpcprobe.results import model as results
from hpcprobe.results.store import Selection, Store, default_location
from hpcprobe.views.verdict import WIDTH


@dataclass(frozen=True)
class Spec:
    """A command: its name and help, `setup(parser)` adds its arguments to its subparser,
    `handle(args)` does it and returns the exit status."""

    name: str
    help: str
    setup: Callable[[argparse.ArgumentParser], None]
    handle: Callable[[argparse.Namespace], int]
    description: str | None = None
    takes_command: bool = False  # what follows `--` is a command it runs (`app NAME -- CMD`)
    own_help: bool = False  # its setup adds its own -h/--help


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A command line's own arguments, and the command that follows `--` (as it is)."""
    given = list(argv)
    after = given.index("--") if "--" in given else len(given)
    return given[:after], given[after + 1:]


#: argparse's own messages, which name no value of ours
_ARGPARSE_OWN = ("invalid choice", "expected", "ignored", "not allowed", "one of the arguments")


class Formatter(argparse.HelpFormatter):
    """Help texts are shown as written: a `%` in one (\"CI target 2 %\") is text, not a format."""

    def _expand_help(self, action: argparse.Action) -> str:
        return action.help or ""


class Parser(argparse.ArgumentParser):
    """argparse that ends a usage mistake with one line and exit code 2."""

    #: the innermost (sub)command of the parse in progress: where the top level's "unrecognized
    #: arguments" came from, so its message names that command's --help
    _innermost: ClassVar[Parser | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []  # the arguments parsed last (a subcommand's: its own)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = list(sys.argv[1:] if args is None else args)
        Parser._innermost = self
        got, rest = super().parse_known_args(args, namespace)
        for action in self._actions:  # `--json ''` is no file, `--tmp ''` no directory
            value = getattr(got, action.dest, None)
            empty = value == "" or (isinstance(value, list) and "" in value)
            if action.option_strings and empty and value != action.default:
                self.error(f"{action.option_strings[-1]}: an empty value; give one, or leave "
                           "the option out")
        return got, rest

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

    def said(self, message: str) -> str:
        """argparse's message as this project says it, naming the --help to read."""
        # "argument --np: 0: give ..." (our value parsers) reads "--np 0: give ..."
        m = re.match(r"^argument ([^:/]+)(?:/\S+)?: (.*)$", message, re.S)
        if m and not m.group(2).startswith(_ARGPARSE_OWN):
            message = f"{m.group(1)} {m.group(2)}"
        choice = re.match(r"^argument [^:]+: invalid choice: '(.*)' \(choose", message)
        unknown = choice and self._unknown_option_before(choice.group(1))
        if unknown:
            message = f"unrecognized arguments: {unknown}"
        where = (Parser._innermost or self) if message.startswith("unrecognized") else self
        return f"{message} (see `{where.prog} --help`)"

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{ERROR_PREFIX}{self.said(message)}\n")
        sys.exit(EXIT_USAGE)


class CheckingParser(Parser):
    """A parser that raises the usage mistake (a UserError) instead of exiting: a nested
    command line checked before it is handed on."""

    def error(self, message: str) -> NoReturn:
        raise UserError(self.said(message))


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH|URL",
                   help="result store: an SQLite file, or postgresql://USER@HOST[:PORT]/DB "
                        f"(default: $HPCPROBE_DB, else {redact(default_location())})")


def add_against(p: Any, what: str = "the headline figures",
                then: str = "default: this host's previous runs in the store") -> None:
    """`--against REF.toml`, declared once: what a command judges against it, and then what
    it does without it (or with it)."""
    p.add_argument("--against", metavar="REF.toml",
                   help=f"judge {what} against this reference file (`hpcprobe reference "
                        f"make`); {then}")


def add_run_options(r: argparse.ArgumentParser) -> None:
    """Options of every command that measures: profile, store, JSON, tag, oversubscription."""
    add_profile(r)
    add_db(r)
    add_no_store(r, "the run")
    add_json(r, "the run", also=True)
    add_tag(r, "the run, e.g. a BIOS or tuning configuration")
    add_prometheus(r)
    add_judging(r)
    add_oversubscribe(r)
    add_dry_run(r, "list what would be measured (per benchmark, after the options and the "
                "profile), measure nothing, store nothing")
    add_input(r, "with --dry-run: plan for ")


# Options several commands share, each declared once here; a command says what it means by
# it (tests/test_layers.py: a flag declared in two places fails).


def add_profile(p: argparse.ArgumentParser, default: str = "default", of: str = "") -> None:
    """--profile (and --quick): the time and sample budget, of `of` where not of the command's
    own measurements."""
    prof = p.add_mutually_exclusive_group()
    prof.add_argument("--profile", default=default, type=_profile_name,
                      help=f"time and sample budget{of}: " + "; ".join(
                          f"{x.name} ({x.help})" for x in profiles.PROFILES.values())
                      + f" (default: {default})")
    prof.add_argument("--quick", action="store_const", dest="profile", const="quick",
                      help="same as --profile quick")


def _profile_name(text: str) -> str:
    if text not in profiles.PROFILES:
        raise argparse.ArgumentTypeError(f"{text!r} is unknown; profiles: "
                                         f"{', '.join(profiles.PROFILES)}")
    return text


def add_no_store(p: Any, what: str, why: str = "") -> None:
    p.add_argument("--no-store", action="store_true", help=f"do not store {what}{why}")


def add_tag(p: Any, what: str) -> None:
    """--tag as a label given to what a command stores (selecting by tag: add_selection)."""
    p.add_argument("--tag", type=label, help=f"label {what}")


def add_oversubscribe(p: Any) -> None:
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more threads (or ranks) than the placement's CPUs")


def add_dry_run(p: Any, what: str) -> None:
    p.add_argument("--dry-run", action="store_true", help=what)


def add_input(p: Any, when: str = "") -> None:
    """--input FILE.xml: a recorded machine (hwloc XML) instead of this one."""
    p.add_argument("--input", metavar="FILE.xml",
                   help=f"{when or 'plan for '}the machine of this hwloc XML file instead of "
                        "this one")


def add_isa(p: Any, default: str) -> None:
    """--isa: a kernel variant (the native core's; named in the help without loading it)."""
    p.add_argument("--isa", help=f"kernel variant: scalar, avx2, avx512 (default: {default})")


def add_details(p: Any, what: str) -> None:
    p.add_argument("--details", action="store_true", help=what)


def add_report(p: Any, what: str, short: bool = False) -> None:
    """--report FILE.html (-o too where the command has no other output)."""
    p.add_argument(*(("-o",) if short else ()), "--report", metavar="FILE.html",
                   help=f"also write the HTML report of {what}")


def add_output(p: Any, metavar: str, what: str, required: bool = False) -> None:
    """-o/--output: the file a command writes its document to."""
    p.add_argument("-o", "--output", metavar=metavar, required=required, help=what)


def add_figure(p: Any, metric: str, narrow: str = "to narrow further") -> None:
    """--metric BENCHMARK.NAME and --param KEY=VALUE: one figure."""
    p.add_argument("--metric", metavar="BENCHMARK.NAME", type=metric_name, help=metric)
    p.add_argument("--param", type=param, action="append", metavar="KEY=VALUE",
                   help="with --metric: only figures whose param KEY has this VALUE, e.g. "
                        f"kernel=triad (repeat it {narrow})")


def add_prometheus(r: argparse.ArgumentParser) -> None:
    r.add_argument("--prometheus", metavar="FILE.prom",
                   help="also write the headline figures, their ceilings, references and "
                        "verdicts for node_exporter's textfile collector (written atomically)")


def label(text: str) -> str:
    """A run's tag: something to find it by (`--tag ''` from an unset variable is a mistake),
    printable on one line (it is shown, stored, and handed to the node jobs of a campaign)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give a tag, e.g. bios-2.4")
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r}: a tag is printable, on one line (no "
                                         "newline, tab or control character)")
    return text


def add_judging(r: argparse.ArgumentParser) -> None:
    """How a run is shown and judged: its verdict first, the tables with --details."""
    add_details(r, "after the verdict, every table and every warning in full")
    add_against(r)


def date(text: str) -> str:
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


def add_selection(p: argparse.ArgumentParser) -> None:
    """Which stored runs: tag, host, time range."""
    p.add_argument("--tag", help="only runs with this tag")
    add_host(p)
    p.add_argument("--since", type=date, metavar="DATE",
                   help="only runs created at or after this UTC date/time (ISO 8601)")
    p.add_argument("--until", type=date, metavar="DATE",
                   help="only runs created before this UTC date/time (ISO 8601)")


def add_host(p: Any) -> None:
    p.add_argument("--host", help="only runs of this host")


def selection(a: argparse.Namespace) -> Selection:
    return Selection(a.tag, a.host, a.since, a.until)


def add_json(p: Any, what: str, also: bool = False) -> None:
    """`--json [FILE]`: the command's document in a file, or on standard output (`-`, or
    `--json` alone); `also` (a command that prints its own tables): FILE is required, and `-`
    sends the tables to standard error."""
    if also:
        p.add_argument("--json", metavar="FILE", help=f"also write {what} as a JSON document "
                       "(`-`: on standard output, the tables then on standard error)")
    else:
        p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                       help=f"write {what} as JSON to FILE (`-` or none: standard output)")


def print_json(obj: Any, path: str = "-") -> None:
    """A document on standard output, or written atomically to `path`."""
    text = jsondoc.dumps(obj, indent=1) + "\n"
    if files.is_stdout(path):
        sys.stdout.write(text)
    else:
        files.atomic_write(path, text.encode(), "--json")
        print(f"Wrote {path}.")


def console(stderr: bool = False) -> Any:
    """The console for tables and messages: standard error where the command's document goes
    to standard output (`--json -`, `--report -`), which then holds nothing else."""
    # a terminal's own width (rich folds a wider table's cells); a pipe or a file gets the
    # 100 columns of the answer's screen
    tty = (sys.stderr if stderr else sys.stdout).isatty()
    return _plain_console()(stderr=stderr, width=None if tty else WIDTH)


#: Control characters a shown text may not carry (all but tab and newline; DEL; C1): a stored
#: string from a document received from elsewhere could clear the screen or hide a line
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@functools.cache
def _plain_console() -> Any:
    """rich's Console whose rendered text carries no control character of its own (rich's
    own styles and cursor moves are kept)."""
    from rich.console import Console
    from rich.segment import Segment

    class Plain(Console):
        def render(self, renderable: Any, options: Any = None) -> Any:
            for seg in super().render(renderable, options):
                yield seg if seg.control or not CONTROL.search(seg.text) else \
                    Segment(CONTROL.sub("", seg.text), seg.style)

    return Plain


class Lines:
    """A console of plain lines, without rich (a command that shows no table: `check`, in
    every job's prolog, imports nothing it does not use). As `console`'s: control characters
    dropped, `say` folds at 100 columns (a narrower terminal at its own width)."""

    def __init__(self, stderr: bool = False):
        import shutil

        self.file = sys.stderr if stderr else sys.stdout
        self.width = shutil.get_terminal_size().columns if self.file.isatty() else WIDTH

    def print(self, text: str, width: int | None = None, **_: Any) -> None:
        import textwrap

        width = width or self.width
        for line in CONTROL.sub("", text).split("\n"):
            folded = textwrap.wrap(line, width, break_on_hyphens=False) if len(line) > width \
                else [line.rstrip()]
            self.file.write("\n".join(folded) + "\n")


def say(console: Any, text: str) -> None:
    """A message as written (no markup, no highlighting), folded at 100 columns."""
    console.print(text, highlight=False, markup=False, width=min(console.width, WIDTH))


class Bar:
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

    def __enter__(self) -> Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, label: str, total: int) -> None:
        self.task = self.progress.add_task(label, total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label)


@contextlib.contextmanager
def terminate_interrupts() -> Iterator[None]:
    """SIGTERM (kill, scancel, a job's time limit) stops the work as Ctrl-C does, so that what
    ends it (a run so far kept, a configuration's state restored) happens on both."""

    def term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def ignoring_interrupts() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored for the block: what the first interruption keeps (a run
    stored, a state restored) is kept whole when a second one follows it (a user pressing
    Ctrl-C twice, scancel's SIGTERM after a time limit's)."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def open_store(db: str | None, no_store: bool = False) -> Store | None:
    """The store a measuring command writes to, checked writable before anything is measured;
    None with --no-store."""
    if no_store:
        return None
    store = Store.open(db)
    store.check_writable()
    return store


def load_runs(refs: Sequence[str], db: str | None) -> list[results.Run]:
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


def metric_name(text: str) -> tuple[str, str]:
    """BENCHMARK.NAME, e.g. memory.bandwidth."""
    benchmark, dot, name = text.partition(".")
    if not (benchmark and dot and name):
        raise argparse.ArgumentTypeError(f"{text!r}: give BENCHMARK.NAME, e.g. memory.bandwidth")
    return benchmark, name


def param(text: str) -> tuple[str, str]:
    """KEY=VALUE, e.g. kernel=triad."""
    key, eq, value = text.partition("=")
    if not (key and eq):
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE, e.g. kernel=triad")
    return key, value


def check_metric(benchmark: str, name: str) -> None:
    """A benchmark that is neither a family nor a series, or a metric its family does not
    declare (a typo), is refused with the ones there are; a series' metrics are not judged."""
    from hpcprobe import registry

    fam = registry.families().get(benchmark)
    series = [s.benchmark for s in registry.SUMMARIES]
    if fam is None and benchmark not in series:
        raise UserError(f"--metric {benchmark}.{name}: no benchmark {benchmark!r}; benchmarks: "
                        f"{', '.join([*registry.families(), *series])}")
    if fam is None or not fam.metrics.specs or fam.metrics.open_prefix is not None:
        return
    names = fam.metrics.names()
    if name not in names:
        raise UserError(f"--metric {benchmark}.{name}: {benchmark} has no metric {name!r}; its "
                        f"metrics: {', '.join(names)}")
