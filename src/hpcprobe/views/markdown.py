"""A run's views as Markdown (a sweep's recommendation for a ticket or a wiki): the same blocks
the terminal and the HTML report show, tables as pipe tables."""

from __future__ import annotations

from collections.abc import Sequence

from hpcprobe.results.model import Run
from hpcprobe.viewkit.table import Block, Lines, View


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def block(b: Block) -> str:
    if isinstance(b, Lines):
        if b.preformatted:
            return "```\n" + "\n".join(b.lines) + "\n```\n"
        return "\n".join(f"- {ln.strip()}" if ln.startswith("  ") else ln for ln in b.lines) + "\n"
    out = [f"**{_cell(b.title)}**", "", "| " + " | ".join(map(_cell, b.columns)) + " |",
           "|" + "|".join("---:" if j == "right" else "---" for j in b.justify) + "|"]
    out += ["| " + " | ".join(map(_cell, row)) + " |" for row in b.rows]
    if b.caption:
        out += ["", _cell(b.caption)]
    return "\n".join(out) + "\n"


def render(run: Run, views: Sequence[View]) -> str:
    parts = [f"# hpcprobe: {run.tag or run.run_id}", "",
             f"Run {run.run_id} on {run.host}, {run.created}, profile {run.profile}.", ""]
    parts += [block(b) for view in views for b in view(run)]
    parts += [f"- warning: {w}" for w in run.warnings] + [f"- error: {e}" for e in run.errors]
    return "\n".join(parts) + "\n"
