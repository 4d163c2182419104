"""The dslash family's views: Grid's per-node summary table (best over the kernel variants and
comms policies), the comparison point under each definition, the robustness, every variant's
figure, the share of time in the halo exchange, and Grid's halo table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprobe.analysis.verdict import Headline, best
from hpcprobe.families.dslash import bench
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

def _columns(figures: list[Metric]) -> list[tuple[str, int, str]]:
    """Wilson, then each domain-wall Ls measured (largest first, as Grid's tables)."""
    dwf = sorted({m.params["ls"] for m in figures if m.params["action"] == "dwf"}, reverse=True)
    out = [("dwf", ls, f"DWF Ls={ls}") for ls in dwf]
    if any(m.params["action"] == "wilson" for m in figures):
        out.insert(0, ("wilson", 1, "Wilson"))
    return out


def _volumes(figures: list[Metric]) -> list[int | str]:
    """The local volumes: L of L^4 in order, then any XxYxZxT."""
    vols = {m.params["l"] for m in figures}
    return sorted(vols, key=lambda v: (isinstance(v, str), v if isinstance(v, int) else 0, v))


def _where(p: dict[str, object]) -> str:
    ranks = p.get("ranks", 1)
    if ranks == 1 and "grid" not in p:
        return f"one rank of {p['threads']} thread(s) in this process, no halo exchange"
    return (f"{ranks} rank(s) x {p['threads']} thread(s) on {p['nodes']} node(s), "
            f"{p['layout']} layout, rank grid {p['grid']}, {p.get('mpi', 'MPI')}; best over "
            "the comms policies too")


def _variant(m: Metric) -> str:
    """A kernel variant, with its comms policy where there is one."""
    policy = m.params.get("policy")
    return f"{m.params['isa']}, {policy}" if policy else str(m.params["isa"])


def _summary(run: Run) -> Table | None:
    figures = run.select("dslash", "dslash")
    if not figures:
        return None
    p = figures[0].params
    t = Table(title=f"Dslash per node, Mflop/s (Grid's Benchmark_ITT count: "
                    f"{p['flops_per_site']} flops per site and slice, single precision), best "
                    f"over the kernel variants, median ±95% CI, {n_range(figures)}; "
                    f"{_where(p)}")
    cols = _columns(figures)
    t.add_column("L", "right")
    for _, _, name in cols:
        t.add_column(name, "right")
    for l in _volumes(figures):  # noqa: E741
        t.add_row(str(l), *(_best_cell(figures, a, l, ls) for a, ls, _ in cols))
    return t


def _best_cell(figures: list[Metric], action: str, l: int | str, ls: int) -> str:  # noqa: E741
    m = bench.best(figures, action, l, ls)
    return "-" if m is None else f"{cell(m, 0)} ({_variant(m)})"


def _variants(run: Run) -> Table | None:
    figures = run.select("dslash", "dslash")
    variants = list(dict.fromkeys(_variant(m) for m in figures))
    if len(variants) < 2:
        return None
    t = Table(title="Dslash per kernel variant" + (" and comms policy" if any(
        "policy" in m.params for m in figures) else "") + ", Mflop/s per node, median ±95% CI")
    for col in ("action", "L", "Ls", *variants, "robustness (worst/best)"):
        t.add_column(col, "left" if col == "action" else "right")
    robust = {(m.params["action"], m.params["l"], m.params["ls"]): m
              for m in run.select("dslash", "robustness")}
    for key in _keys(figures):
        by = {_variant(m): m for m in figures
              if (m.params["action"], m.params["l"], m.params["ls"]) == key}
        r = robust.get(key)
        t.add_row(key[0], str(key[1]), str(key[2]), *(cell(by.get(v), 0) for v in variants),
                  f"{r.summary.median:.2f}" if r else "-")
    return t


def _keys(figures: list[Metric]) -> list[tuple[str, int | str, int]]:
    """(action, L, Ls) of the measured cells in table order."""
    order = {v: i for i, v in enumerate(_volumes(figures))}
    keys = {(m.params["action"], m.params["l"], m.params["ls"]) for m in figures}
    return sorted(keys, key=lambda k: (k[0] != "wilson", order[k[1]], -k[2]))


def _comms(run: Run) -> Table | None:
    shares = run.select("dslash", "comms_share")
    if not shares:
        return None
    variants = list(dict.fromkeys(_variant(m) for m in shares))
    t = Table(title="Share of each application's time projecting faces and waiting for the "
                    "halo (the slowest rank), %, median ±95% CI")
    for col in ("action", "L", "Ls", *variants):
        t.add_column(col, "left" if col == "action" else "right")
    for key in _keys(shares):
        by = {_variant(m): m for m in shares
              if (m.params["action"], m.params["l"], m.params["ls"]) == key}
        t.add_row(key[0], str(key[1]), str(key[2]), *(cell(by.get(v), 1) for v in variants))
    return t


def _halo(run: Run) -> Table | None:
    figures = run.select("dslash", "halo")
    if not figures:
        return None
    bidir = {(m.params["l"], m.params["ls"]): m for m in run.select("dslash", "halo_bidir")}
    p = figures[0].params
    t = Table(title=f"Halo exchange (the MPI family's halo test): faces of L^3 x Ls sites of "
                    f"{p['site_bytes']} B with both neighbours in every split direction, "
                    f"{p['ranks']} ranks on {p['nodes']} node(s), rank grid {p['dims']}; MB/s "
                    "per rank, median ±95% CI")
    for col in ("L", "Ls", "bytes a face", "faces", "MB/s", "MB/s both ways"):
        t.add_column(col, "right")
    for m in sorted(figures, key=lambda m: (m.params["ls"], m.params["l"])):
        t.add_row(str(m.params["l"]), str(m.params["ls"]), str(m.params["size_bytes"]),
                  str(m.params["faces"]), cell(m, 0),
                  cell(bidir.get((m.params["l"], m.params["ls"])), 0))
    return t


def _comparison(run: Run) -> Lines | None:
    if not run.select("dslash", "dslash"):
        return None
    got = {m.params["definition"]: m for m in run.select("dslash", "comparison_point")}
    out = []
    for name, (ls, vols) in bench.DEFINITIONS.items():
        what = f"mean of DWF L={'+'.join(map(str, vols))}, Ls={ls}" if len(vols) > 1 else \
            f"DWF L={vols[0]}, Ls={ls}"
        m = got.get(name)
        out.append(f"Comparison point, {name} ({what}): " + (
            f"{m.summary.median:.0f} Mflop/s per node" if m else
            f"not measured (add --l {','.join(map(str, vols))})"))
    return Lines(out)


def _axpy(run: Run) -> Table | None:
    figures = sorted(run.select("dslash", "axpy"), key=lambda m: str(m.params["l"]).zfill(12))
    if not figures:
        return None
    t = Table(title=f"Memory: a x + y over three fields of L^4 sites x {bench.AXPY_SITE_BYTES} B "
                    "a rank (Grid's memory benchmark; STREAM triad kernel and byte counting), "
                    f"every rank of the node at once, median ±95% CI, {n_range(figures)}")
    for col in ("L", "ranks", "bytes", "GB/s per rank", "GB/s per node"):
        t.add_column(col, "right")
    for m in figures:
        ranks = m.params.get("ranks", 1)
        t.add_row(str(m.params["l"]), str(ranks), str(m.params["size_bytes"]),
                  f"{m.summary.median / ranks:.2f}", cell(m, 2))
    return t


def headlines(run: Run) -> list[Headline]:
    """The domain-wall Dslash (Ls=16) on the largest volume measured, the best kernel variant:
    the figure behind the comparison point (which averages such figures over its volumes)."""
    dwf = [m for m in run.select("dslash", "dslash")
           if m.params["action"] == "dwf" and m.params["ls"] == 16]
    if not dwf:
        return []
    size = max(m.params["l"] for m in dwf)
    got = best([m for m in dwf if m.params["l"] == size])
    assert got is not None
    return [Headline(f"dslash.dwf16_l{size}", f"Dslash DWF Ls=16, {size}^4, {got.params['isa']}",
                     got)]


def tables(run: Run) -> list[Block]:
    return shown(_axpy(run), _summary(run), _comparison(run), _variants(run), _comms(run),
                 _halo(run))


def _best_by_volume(run: Run) -> dict[str, figure.Points]:
    """Per column of the table, the best variant's figure at each L^4 (Mflop/s per node)."""
    figures = run.select("dslash", "dslash")
    out: dict[str, figure.Points] = {}
    for action, ls, name in _columns(figures):
        pts = [(float(v), m) for v in _volumes(figures) if isinstance(v, int)
               if (m := bench.best(figures, action, v, ls)) is not None]
        if pts:
            out[name] = pts
    return out


def volume_curve(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("Dslash per node against the local volume L^4 (best variant)", "L",
                         "Mflop/s per node")
    return fig if figure.draw(ax, runs, _best_by_volume) else None


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("dslash-volume", "Dslash against the local volume",
                         volume_curve(runs)))
