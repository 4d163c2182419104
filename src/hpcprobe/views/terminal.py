"""The terminal document: a run (its header, the views of the families that hold figures,
warnings, errors) or a comparison, rendered with rich from the view toolkit's blocks."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from hpcprobe.analysis.compare import Comparison, notes
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.machine import facts, sentinel
from hpcprobe.results.model import Run
from hpcprobe.viewkit.table import Block, Table, View
from hpcprobe.views import verdict as verdict_view


def _header(run: Run) -> str:
    p, node = run.provenance, run.node
    cut = run.conditions.interrupted
    head = (f"Run {run.run_id} on {run.host} ({node.cpu_model or 'unknown CPU'}), "
            f"{run.created}, profile {run.profile}{', tag ' + run.tag if run.tag else ''}, "
            f"{run.duration_s:.1f} s" + (f"\nINTERRUPTED during {cut.benchmark}" if cut
                                         else ""))
    if run.kind != "node":  # a campaign driver's record: it measured no machine
        return f"{head}\nA {run.kind} record: its node list, failures and link figures"
    c = run.topology["counts"]
    return (f"{head}\n"
            f"{c['packages']} package(s), {c['numa_nodes']} NUMA, {c['l3_domains']} L3 "
            f"domain(s), {c['cores']} cores, {c['pus']} PUs; ISA {node.isa}; "
            f"THP {node.thp}; governor {node.governor or 'n/a'}"
            + "".join(f"\n{x}" for x in facts.lines(p))
            + ("" if (kept := sentinel.line(run.conditions.sentinel)) is None else f"\n{kept}"))


def rich_table(table: Table) -> RichTable:
    """A toolkit table as a rich table."""
    out = RichTable(title=Text(table.title) if table.title else None, title_justify="left",
                    caption=Text(table.caption) if table.caption else None,
                    box=box.SIMPLE_HEAD if table.narrow else box.HEAVY_HEAD,
                    pad_edge=not table.narrow)
    for name, justify in zip(table.columns, table.justify, strict=True):
        # a cell too wide for its column folds onto the next line, never cut with an ellipsis
        out.add_column(Text(name), justify="right" if justify == "right" else "left",
                       overflow="fold")
    for row in table.rows:  # as text: a "[madvise]" or "[workloads.x]" in a cell is no markup
        out.add_row(*(Text(cell) for cell in row))
    return out


def print_blocks(blocks: Sequence[Block], console: Console, width: int | None = None) -> None:
    """Blocks on the console, folded to `width` columns where given."""
    for block in blocks:
        if isinstance(block, Table):
            console.print(rich_table(block), width=width)
        else:
            text = "\n".join(block.lines)
            console.print(text, highlight=False, markup=False, width=width)


def render(run: Run, console: Console, views: Sequence[View], stderr: Console,
           verdict: Verdict | None = None, details: bool = True) -> None:
    """The run on `console`: its header, its verdict, and with `details` (or where no figure
    of it is a headline) every family's views in registry order; then on `stderr` (standard
    error) its warnings, folded one line per kind without `details`, and its errors."""
    width = min(console.width, verdict_view.WIDTH)
    console.print(_header(run), markup=False, width=width)
    if verdict is not None:
        print_blocks(verdict_view.blocks(verdict), console, width)
    whole = details or verdict is None or not verdict.rows
    if whole:
        for view in views:
            print_blocks(view(run), console)
    warnings = run.warnings if whole else verdict_view.fold(run.warnings)
    for w in warnings:
        stderr.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    if not whole and run.warnings:
        stderr.print(f"({len(run.warnings)} warning(s) in all; --details shows them whole, with "
                    "the tables)", highlight=False, markup=False)
    for e in run.errors:
        stderr.print(f"[red]error:[/red] {escape(e)}", highlight=False)


def _pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def render_comparison(c: Comparison, console: Console, limit: int | None) -> None:
    """A comparison: what differs between the runs' configurations first,
    then the metrics by effect size."""
    console.print(f"Baseline: run {c.runs[0]}; compared: {', '.join(c.runs[1:])}",
                  highlight=False, markup=False)
    for line in notes(c):
        console.print(line, highlight=False, markup=False)
    if c.differences:
        t = Table(title="What differs (configuration fingerprint)")
        t.add_column("setting")
        for label in c.runs:
            t.add_column(label)
        for what, values in c.differences:
            t.add_row(what, *values)
        console.print(rich_table(t))
    else:
        console.print("The configurations do not differ (same fingerprint).", highlight=False,
                      markup=False)
    rows = c.rows if limit is None else c.rows[:limit]
    shown = f"all {len(rows)}" if len(rows) == len(c.rows) else \
        f"the {len(rows)} largest of {len(c.rows)}, --limit 0 for all"
    t = Table(title=f"Joined metrics by effect size ({shown}; ratio = run / "
                    "baseline median, 95 % bootstrap CI; p: Mann-Whitney U; ~ not significant at "
                    "0.05; ! fewer than 5 samples)")
    for col in ("benchmark", "metric", "params", "run", "baseline", "median", "change [95% CI]",
                "p", ""):
        t.add_column(col, justify="right" if col in ("baseline", "median", "p") else "left")
    for r in rows:
        t.add_row(r.benchmark, f"{r.name} ({r.unit})", r.params, r.run.split(" ")[0],
                  f"{r.baseline_median:.4g}", f"{r.median:.4g}",
                  f"{_pct(r.ratio)} [{_pct(r.ratio_ci_low)}, {_pct(r.ratio_ci_high)}]",
                  f"{r.p_value:.3g}", r.verdict + (" !" if r.few_samples else ""))
    console.print(rich_table(t))
    sig = [r for r in c.rows if r.significant][:3]
    if c.differences and sig:
        what = "; ".join(f"{k} {' -> '.join(v)}" for k, v in c.differences[:2])
        for r in sig:
            console.print(f"{what}: {r.benchmark} {r.name} {r.params}: {_pct(r.ratio)} "
                          f"[{_pct(r.ratio_ci_low)}, {_pct(r.ratio_ci_high)}]", highlight=False,
                          markup=False)
    for run, n in c.only_in.items():
        if n:
            console.print(f"{n} metric(s) of run {run} have no counterpart in the baseline.",
                          highlight=False, markup=False)
