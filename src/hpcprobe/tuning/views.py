"""A sweep's views: the recommendation per workload figure; every configuration against the
baseline (gain with its bootstrap 95 % CI, Holm-adjusted p, verdict, samples); the order the
steps ran in (interleaved rounds), the state switched and restored, and what was skipped; a plot
of each figure's gain per configuration with its CI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcprobe.analysis import recommend
from hpcprobe.measure.summary import Summary
from hpcprobe.results.model import Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Lines, Table, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BENCHMARK = "sweep"


def info(run: Run) -> dict[str, Any] | None:
    got = run.provenance.get(BENCHMARK)
    return got if BENCHMARK in run.benchmarks and isinstance(got, dict) else None


def rows(run: Run) -> list[recommend.Row]:
    """The comparison, from the summary's pooled samples (what the sweep decided on)."""
    s = info(run)
    if s is None:
        return []
    figs = [recommend.Figure(m.params["workload"], m.params["figure"], m.unit, m.better,
                             m.params["configuration"], m.samples)
            for m in run.metrics if m.benchmark == BENCHMARK]
    return recommend.rows(figs, s["baseline"], s["alpha"], s["resolution"])


def tables(run: Run) -> list[Block]:
    s = info(run)
    if s is None:
        return []
    rs = rows(run)
    recs = recommend.recommend(rs, s["baseline"], s["rounds"])
    head = Lines([f"Sweep {s['name']} ({s['file']}): {len(s['configurations'])} configurations, "
                  f"{len(s['workloads'])} workload(s), {s['rounds']} interleaved round(s); "
                  f"{s['stopped']}. Baseline {s['baseline']}; a difference counts at p < "
                  f"{s['alpha']:g} (Holm over the configurations of a figure) or is none when "
                  f"its 95% CI lies within ±{s['resolution']:.0%}.",
                  "Recommendations:", *[f"  {r.text}" for r in recs]])
    t = Table(title=f"Every configuration against {s['baseline']}: gain (positive: better, "
                    "whichever direction is better) with its bootstrap 95% CI")
    for col, just in (("workload", "left"), ("figure", "left"), ("configuration", "left"),
                      ("baseline", "right"), ("median", "right"), ("unit", "left"),
                      ("gain", "right"), ("95% CI", "right"), ("p (Holm)", "right"),
                      ("verdict", "left"), ("n", "right")):
        t.add_column(col, just)
    for r in rs:
        lo, hi = r.gain_ci
        t.add_row(r.workload, r.figure, r.configuration, f"{r.baseline_median:.4g}",
                  f"{r.median:.4g}", r.unit, f"{r.gain:+.1%}", f"[{lo:+.1%}, {hi:+.1%}]",
                  f"{r.p:.3g}", r.verdict, f"{r.n_baseline}/{r.n}")
    order: dict[int, list[str]] = {}
    for step in s["order"]:
        names = order.setdefault(step["round"], [])
        if step["configuration"] not in names:
            names.append(step["configuration"])
    log = Lines(["Order (configurations per round): " + " | ".join(
        f"{k}: {' '.join(v)}" for k, v in order.items())]
        + _state(s["hooks"])
        + [f"Skipped: {c}: {why}" for c, why in s["skipped"].items()]
        + ([f"Joined from the store (other boots, or --analyse): "
            f"{len(s['joined_from_store'])} run(s)"] if s.get("joined_from_store") else []))
    return shown(head, t if rs else None, log)


def _state(hooks: list[dict[str, Any]]) -> list[str]:
    """Each configuration's state steps once, with how many visits took them."""
    seen: dict[str, int] = {}
    for h in hooks:
        line = (f"State: {h['configuration']}: {h['step']} {h['what']}"
                + (f" = {h['value']}" if "value" in h else "")
                + (f" (was {h['before']})" if "before" in h else "")
                + (f" -> exit {h['code']}" if h.get("code") not in (None, 0) else ""))
        seen[line] = seen.get(line, 0) + 1
    return [f"{line} (x{n})" if n > 1 else line for line, n in seen.items()]


def gain_plot(runs: list[Run]) -> Figure | None:
    items = [r for run in runs for r in rows(run)]
    if not items:
        return None
    fig, ax = figure.new("Gain against the baseline per workload figure, with its 95% CI", "",
                         "gain (%)")
    labels = []
    for i, r in enumerate(items):
        lo, hi = r.gain_ci
        ax.errorbar([i], [100 * r.gain], yerr=[[100 * (r.gain - lo)], [100 * (hi - r.gain)]],
                    marker="o", capsize=3, color="C0" if r.verdict != "worse" else "C3")
        labels.append(f"{r.workload}: {r.configuration}")
    ax.axhline(0, color="grey", linestyle=":")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
    return fig


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("sweep-gain", "Gain against the baseline", gain_plot(runs)))


#: The sweep's summary run as the registry shows it (declared beside its views, so that showing
#: a stored sweep loads no part of the driver)
SUMMARY = Summary(BENCHMARK, (tables,), (figures,), frozenset({"figure"}))
