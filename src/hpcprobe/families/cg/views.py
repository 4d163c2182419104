"""The cg family's view: the CG proxy's rate, its implied bandwidth against the STREAM triad of
the same run, and where its time goes."""

from __future__ import annotations

from hpcprobe.analysis.verdict import Headline
from hpcprobe.families.cg import solver
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Block, Table, cell, n_range, shown


def _table(run: Run) -> Table | None:
    rate = run.select("cg", "gflops")
    if not rate:
        return None

    def key(m: Metric) -> tuple[str, int]:
        return m.params["grid"], m.params.get("ranks", 1)

    bw = {key(m): m for m in run.select("cg", "bandwidth")}
    frac = {key(m): m for m in run.select("cg", "bandwidth_fraction")}
    share = {(key(m), m.params["phase"]): m for m in run.select("cg", "phase_share")}
    triad = run.select("cg", "triad")
    phases = ("spmv", "dot", "update", *(("halo",) if any(p == "halo" for _, p in share) else ()))
    t = Table(title=f"CG proxy: HPCG's 27-point problem, unpreconditioned CG; GFLOP/s (2 per "
                    f"non-zero + {solver.VECTOR_FLOPS_PER_ROW} per row an iteration), median "
                    f"±95% CI, {n_range(rate)}; bandwidth from {solver.BYTES_PER_ROW} B per row "
                    "an iteration, against the STREAM triad of this run"
                    + (f" ({cell(triad[0])} GB/s a node)" if triad else "")
                    + " (STREAM counts no write-allocate traffic: a kernel that writes less can "
                      "pass 100 %)")
    for col in ("grid a rank", "ranks x threads", "GFLOP/s", "GB/s implied", "% of triad",
                *(f"{p} %" for p in phases)):
        t.add_column(col, "left" if col == "grid a rank" else "right")
    for m in rate:
        k = key(m)
        t.add_row(k[0], f"{k[1]} x {m.params['threads']}", cell(m, 2), cell(bw.get(k)),
                  f"{frac[k].summary.median:.1f}" if k in frac else "-",
                  *(f"{share[(k, p)].summary.median:.0f}" if (k, p) in share else "-"
                    for p in phases))
    return t


def headlines(run: Run) -> list[Headline]:
    """The CG solver's rate on the largest grid measured."""
    cg = run.select("cg", "gflops")
    if not cg:
        return []
    got = max(cg, key=lambda m: m.params["nonzeros"])
    return [Headline(f"cg.gflops_{got.params['grid']}", f"CG {got.params['grid']}", got)]


def tables(run: Run) -> list[Block]:
    return shown(_table(run))
