"""The HTML report of one or more runs: one self-contained file (figures as embedded PNG, no
network), every string from hosts, environments or the store escaped; optionally each figure as
a PNG file too."""

from __future__ import annotations

import base64
import io
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import hpcprobe
from hpcprobe.analysis import compare, fingerprint
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.common import files
from hpcprobe.common.errors import OptionError, UserError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import sentinel
from hpcprobe.results.model import Run
from hpcprobe.viewkit.figure import Figures
from hpcprobe.viewkit.table import Block, Lines, View
from hpcprobe.views import verdict as verdict_view

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 80em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.differs td { background: #fff3cd; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; border: 1px solid #eee; }
.warn { color: #8a6d3b; } .err { color: #a94442; }
.verdict { border: 2px solid #444; padding: 0.2em 1em; margin: 1em 0; }
"""
#: Opened in a browser, the report checks that every figure decoded, and says so on the console
#: otherwise (the browser test reads the console).
SELF_CHECK = """
window.addEventListener("load", function () {
  document.querySelectorAll("img.plot").forEach(function (img) {
    if (!img.complete || img.naturalWidth === 0) console.error("plot not drawn: " + img.alt);
  });
});
"""


def _table(head: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="num">{escape(c)}</td>' if c[:1].isdigit() or (c and c[0] in "+-")
            else f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</table>"


def _block(block: Block) -> str:
    """A view toolkit block as HTML: a titled table (with its caption), or text lines."""
    if isinstance(block, Lines):
        text = escape("\n".join(block.lines))
        return f"<pre>{text}</pre>" if block.preformatted else f"<p>{text}</p>"
    head = f"<h3>{escape(block.title)}</h3>"
    foot = f"<p><small>{escape(block.caption)}</small></p>" if block.caption else ""
    return head + _table(block.columns, block.rows) + foot


def _topology(run: Run) -> str:
    t = run.topology
    c = t.get("counts", {})
    caches = ", ".join(f"L{x['level']} {format_bytes(x['size_bytes'])} x{x.get('instances', 1)}"
                       for x in t.get("caches", []))
    return _table(["run", "CPU", "packages", "NUMA", "L3 domains", "cores", "PUs", "caches"],
                  [[run.run_id, str(t.get("cpu_model") or "?"), str(c.get("packages", "?")),
                    str(c.get("numa_nodes", "?")), str(c.get("l3_domains", "?")),
                    str(c.get("cores", "?")), str(c.get("pus", "?")), caches]])


def _png(fig: object) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # type: ignore[attr-defined]
    return buf.getvalue()


def _head(title: str) -> list[str]:
    return [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{escape(title)}"
            f"</title><style>{STYLE}</style><script>{SELF_CHECK}</script></head><body>",
            f"<h1>{escape(title)}</h1>"]


def _foot() -> str:
    """The page's last line: which release made it."""
    return f"<p>Made by hpcprobe {escape(hpcprobe.__version__)}.</p></body></html>\n"


def drawn(items: Sequence[tuple[str, str, Figure]]) -> list[tuple[str, str, bytes]]:
    """Figures drawn: each as its PNG."""
    return [(slug, ftitle, _png(fig)) for slug, ftitle, fig in items]


def _figures(items: Sequence[tuple[str, str, Figure | bytes]], parts: list[str]
             ) -> list[tuple[str, bytes]]:
    """Each figure embedded in the page as a PNG (drawn here, or already: `drawn`); (slug, PNG
    bytes) of each."""
    pngs = []
    for slug, ftitle, fig in items:
        data = fig if isinstance(fig, bytes) else _png(fig)
        pngs.append((slug, data))
        b64 = base64.b64encode(data).decode()
        parts.append(f'<figure id="{escape(slug)}"><img class="plot" alt="{escape(ftitle)}" '
                     f'src="data:image/png;base64,{b64}"><figcaption>{escape(ftitle)}'
                     "</figcaption></figure>")
    return pngs


def page(title: str, blocks: Sequence[Block],
         figures: Sequence[tuple[str, str, Figure | bytes]]) -> str:
    """A page of blocks and figures (a campaign's report)."""
    parts = _head(title) + [_block(b) for b in blocks]
    _figures(figures, parts)
    parts.append(_foot())
    return "\n".join(parts)


def build(runs: list[Run], views: Sequence[View], figures: Sequence[Figures],
          ignore: compare.NotJoined, verdicts: Sequence[Verdict] = ()
          ) -> tuple[str, list[tuple[str, bytes]]]:
    """The report's HTML and each figure as (slug, PNG bytes): each run's verdict first (as
    the terminal shows it), every run's views (the same blocks the terminal shows), the
    families' figures, and with several runs the comparison (metrics joined without the
    params in `ignore`)."""
    title = "hpcprobe report: " + ", ".join(r.tag or r.run_id for r in runs)
    parts = _head(title)
    for r, v in zip(runs, verdicts, strict=False):
        if v.rows:
            parts.append(f'<div class="verdict"><h2>Run {escape(r.tag or r.run_id)} on '
                         f"{escape(r.host)}</h2>"
                         + "".join(_block(b) for b in verdict_view.blocks(v)) + "</div>")
    parts.append(_table(["run", "host", "tag", "created", "profile", "benchmarks", "seconds"],
                        [[r.run_id, r.host, r.tag or "", r.created, r.profile,
                          ",".join(r.benchmarks)
                          + (" (interrupted)" if r.conditions.interrupted else ""),
                          f"{r.duration_s:.1f}"] for r in runs]))
    fps = [fingerprint.fingerprint(r) for r in runs]
    labels = list(dict.fromkeys(k for fp in fps for k in fp))
    differs = {k for k, _ in fingerprint.differences(runs)}
    parts.append("<h2>Configuration</h2>")
    parts.append(_table(["setting", *[r.run_id for r in runs]],
                        [[k, *[fp.get(k, "n/a") for fp in fps]] for k in labels],
                        ["differs" if k in differs else "" for k in labels]))
    parts.append("<h2>Topology</h2>" + "".join(_topology(r) for r in runs))
    parts.append("<h2>Results</h2>")
    for r in runs:
        cut = r.conditions.interrupted
        parts.append(f"<h2>Run {escape(r.tag or r.run_id)}"
                     + (f" (interrupted during {escape(cut.benchmark)})" if cut else "")
                     + "</h2>")
        if (kept := sentinel.line(r.conditions.sentinel)) is not None:
            parts.append(f"<p>{escape(kept)}</p>")
        parts += [_block(block) for view in views for block in view(r)]
    pngs = _figures([item for draw in figures for item in draw(runs)], parts)
    if len(runs) > 1:
        try:
            c = compare.compare(runs, ignore)
        except UserError as exc:
            parts.append(f'<p class="warn">{escape(str(exc))}</p>')
        else:
            parts.append(f"<h2>Comparison against {escape(c.runs[0])}</h2>")
            parts += [f'<p class="warn">{escape(line)}</p>' for line in compare.notes(c)]
            parts.append(_table(
                ["benchmark", "metric", "params", "run", "baseline", "median", "change",
                 "95% CI", "p", ""],
                [[r.benchmark, f"{r.name} ({r.unit})", r.params, r.run,
                  f"{r.baseline_median:.4g}", f"{r.median:.4g}", f"{r.change_pct:+.1f} %",
                  f"[{100 * (r.ratio_ci_low - 1):+.1f} %, {100 * (r.ratio_ci_high - 1):+.1f} %]",
                  f"{r.p_value:.3g}", r.verdict + (" (n<5)" if r.few_samples else "")]
                 for r in c.rows[:200]]))
    for r in runs:
        for w in r.warnings:
            parts.append(f'<p class="warn">{escape(r.run_id)}: warning: {escape(w)}</p>')
        for e in r.errors:
            parts.append(f'<p class="err">{escape(r.run_id)}: error: {escape(e)}</p>')
    parts.append(_foot())
    return "\n".join(parts), pngs


def write(runs: list[Run], out: str | os.PathLike[str], views: Sequence[View],
          figures: Sequence[Figures], ignore: compare.NotJoined, png_dir: str | None = None,
          flag: str = "-o", verdicts: Sequence[Verdict] = ()) -> int:
    """Write the report (atomically) and, with png_dir, each figure; returns the figure count.
    `flag` names the option that gave `out` in errors."""
    target = files.check_writable(out, flag)
    if png_dir is not None:
        try:
            Path(png_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OptionError(f"<png> {png_dir}: cannot create it ({exc.strerror})") from None
        files.check_writable(Path(png_dir) / "x.png", "--png")
    html, pngs = build(runs, views, figures, ignore, verdicts)
    files.atomic_write(target, html.encode(), flag)
    for i, (slug, data) in enumerate(pngs):
        if png_dir is not None:
            files.atomic_write(Path(png_dir) / f"{i + 1:02d}-{slug}.png", data, "--png")
    return len(pngs)
