"""`hpcprobe reference`: what a hardware configuration is expected to deliver. `make` writes,
from stored runs (named, or selected by tag, host and dates) or run documents, each headline
figure's expected value and tolerance per hardware fingerprint into a TOML file that `run`,
`show` and `cluster report` judge against (`--against`); `show` prints one."""

from __future__ import annotations

import argparse
import os
import sys

from hpcprobe import registry
from hpcprobe.analysis import interchange, reference
from hpcprobe.commands.base import (
    Parser,
    Spec,
    add_db,
    add_output,
    add_selection,
    console,
    load_runs,
    say,
    selection,
)
from hpcprobe.common import files
from hpcprobe.common.errors import UserError
from hpcprobe.results.model import Run
from hpcprobe.results.store import Selection, Store
from hpcprobe.viewkit.table import Table
from hpcprobe.views import verdict as verdict_view
from hpcprobe.views.terminal import rich_table


def setup(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="reference_command", required=True, parser_class=Parser)
    mk = sub.add_parser("make", help="write a reference from runs: per hardware, each headline "
                        "figure's expected value and tolerance")
    mk.add_argument("runs", nargs="*", metavar="RUN",
                    help="run ids, prefixes, tags, hosts or result JSON files (or select "
                         "stored runs with --tag, --host, --since, --until)")
    add_selection(mk)
    add_output(mk, "REF.toml", "the reference file to write (`-`: standard output)", True)
    add_db(mk)
    sh = sub.add_parser("show", help="print a reference file's figures")
    sh.add_argument("file", metavar="REF.toml")
    ex = sub.add_parser("export", help="write a reference file in another tool's format")
    ex.add_argument("file", metavar="REF.toml")
    ex.add_argument("--format", required=True, choices=list(interchange.FORMATS),
                    help="; ".join(f"{k}: {what}" for k, (what, _) in
                                   interchange.FORMATS.items()))
    add_output(ex, "FILE", "where to write it (default: standard output)")
    ex.add_argument("--system", default="*", metavar="SYSTEM:PARTITION",
                    help="reframe: the scope of the references (default: *, every system)")
    ex.add_argument("--hosts", default="*", metavar="PATTERN",
                    help="nhc: the nodes the line applies to (default: *)")


def _runs(a: argparse.Namespace) -> list[Run]:
    chosen = selection(a)
    if a.runs and chosen != Selection():
        raise UserError("name runs or select them (--tag, --host, --since, --until), not both")
    if a.runs:
        return load_runs(a.runs, a.db)
    if chosen == Selection():
        raise UserError("which runs? name them (RUN...) or select them with --tag, --host, "
                        "--since or --until")
    with Store.open(a.db, create=False) as store:
        runs = store.load_all(chosen)
    if not runs:
        raise UserError("no stored run matches the selection")
    return runs


def _make(a: argparse.Namespace) -> int:
    files.check_outputs((a.output, "-o"))
    runs = _runs(a)
    groups = reference.make(runs, registry.pickers(), registry.hardware_labels)
    if not groups:
        raise UserError(f"the {len(runs)} run(s) hold no headline figure (no node run of a "
                        "family the verdict judges): no reference to write")
    reference.write(groups, f"{len(runs)} run(s): " + ", ".join(r.run_id for r in runs[:8])
                    + (" ..." if len(runs) > 8 else ""), a.output)
    shown = console(files.is_stdout(a.output))
    for g in groups:
        say(shown, f"{reference.describe(g.hardware)}, {g.profile} profile: {len(g.figures)} "
                   f"figure(s) from {len(g.runs)} run(s) of {len(g.hosts)} host(s)")
        for line in _caveats(g):
            say(shown, f"  {line}")
    if not files.is_stdout(a.output):
        say(shown, f"Wrote {a.output}; `hpcprobe run --against {a.output}` judges a run by it.")
    return 0


def _caveats(g: reference.Group) -> list[str]:
    """What a reader of the file must know of a group: figures left out as too noisy, figures
    on fewer than MIN_RUNS runs, runs that were interrupted."""
    out = [f"left out, too noisy to be a reference: {k} (its tolerance would be "
           f"{100 * t:.0f} %, from {100 * reference.MAX_TOLERANCE:.0f} % on a figure may "
           "lose half and pass): measure it on a quiet node" for k, t in g.too_noisy.items()]
    if few := g.few_runs():
        out.append(f"{len(few)} figure(s) rest on fewer than {reference.MIN_RUNS} runs "
                   f"({', '.join(few[:4])}{' ...' if len(few) > 4 else ''}): their tolerance "
                   "is a guess; make it from more runs")
    if g.interrupted:
        out.append(f"interrupted run(s) among them: {', '.join(g.interrupted)} (their figures "
                   "are those measured before the interruption)")
    return out


def _show(a: argparse.Namespace) -> int:
    groups = reference.load(a.file, registry.figure_units, a.file)
    out = console()
    for g in groups:
        t = Table(title=f"{reference.describe(g.hardware)}, {g.profile} profile: "
                        f"{len(g.runs)} run(s) of {', '.join(g.hosts) or '?'}")
        for col, just in (("key", "left"), ("figure", "left"), ("expected", "right"),
                          ("tolerance", "right"), ("runs", "right")):
            t.add_column(col, just)
        for e in g.figures.values():
            t.add_row(e.key, e.label, f"{verdict_view.number(e.value)} {e.unit}",
                      f"{'-' if e.better == 'higher' else '+'}{100 * e.tolerance:.1f} %",
                      str(e.runs))
        out.print(rich_table(t))
    return 0


def _export(a: argparse.Namespace) -> int:
    if a.output is not None:
        files.check_outputs((a.output, "-o"))
    groups = reference.load(a.file, registry.figure_units, a.file)
    where = interchange.Where(os.path.abspath(a.file), a.system, a.hosts)
    text = interchange.FORMATS[a.format][1](groups, where)
    if a.output is None or files.is_stdout(a.output):
        sys.stdout.write(text)
        return 0
    files.atomic_write(a.output, text.encode(), "-o")
    say(console(), f"Wrote {a.output} ({a.format}, {len(groups)} hardware group(s)).")
    return 0


def handle(a: argparse.Namespace) -> int:
    return {"make": _make, "show": _show, "export": _export}[a.reference_command](a)


COMMAND = Spec("reference", "write, print or export a reference: the figures a hardware should "
               "give",
               setup, handle,
               description="A reference holds, per hardware fingerprint (CPU model, sockets, "
                           "cores, GPUs), each headline figure's expected value and its "
                           "tolerance from the runs' spread; `run`, `show` and `cluster "
                           "report` judge against it with --against; `export` writes it for "
                           "ReFrame, NHC, ClusterCockpit or as JSON bounds.")
