"""The cg family's view: the CG proxy's rate, its implied bandwidth against the STREAM triad of
the same run, and where its time goes."""

from __future__ import annotations

from hpcprobe.families.cg import solver
from hpcprobe.results.model import Run
from hpcprobe.views.table import Block, Table, cell, n_range, shown


def _table(run: Run) -> Table | None:
    rate = run.select("cg", "gflops")
    if not rate:
        return None
    bw = {m.params["grid"]: m for m in run.select("cg", "bandwidth")}
    frac = {m.params["grid"]: m for m in run.select("cg", "bandwidth_fraction")}
    share = {(m.params["grid"], m.params["phase"]): m for m in run.select("cg", "phase_share")}
    triad = run.select("cg", "triad")
    t = Table(title=f"CG proxy: HPCG's 27-point problem, unpreconditioned CG, one rank; "
                    f"GFLOP/s (2 per non-zero + {solver.VECTOR_FLOPS_PER_ROW} per row an "
                    f"iteration), median ±95% CI, {n_range(rate)}; bandwidth from "
                    f"{solver.BYTES_PER_ROW} B per row an iteration, against the STREAM triad "
                    "of this run"
                    + (f" ({cell(triad[0])} GB/s)" if triad else ""))
    for col in ("grid", "threads", "GFLOP/s", "GB/s implied", "% of triad", "SpMV %", "dot %",
                "updates %"):
        t.add_column(col, "left" if col == "grid" else "right")
    for m in rate:
        g = m.params["grid"]
        t.add_row(g, str(m.params["threads"]), cell(m, 2), cell(bw.get(g)),
                  f"{frac[g].summary.median:.1f}" if g in frac else "-",
                  *(f"{share[(g, p)].summary.median:.0f}" if (g, p) in share else "-"
                    for p in ("spmv", "dot", "update")))
    return t


def tables(run: Run) -> list[Block]:
    return shown(_table(run))
