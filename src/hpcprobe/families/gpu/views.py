"""The GPU family's views: BabelStream per kernel at the largest array against the memory's
peak, GEMM per precision against the peak at the measured SM clock, host<->device bandwidth per
NUMA domain (local marked) against the PCIe link, peer copies, with the clocks and throttling
read during each; plots of bandwidth by array size and GEMM rate by precision."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcprobe.analysis.verdict import Headline
from hpcprobe.families.gpu.bench import DIRECTIONS
from hpcprobe.families.gpu.peaks import PRECISIONS
from hpcprobe.results.ceilings import Ceiling
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit import figure
from hpcprobe.viewkit.table import Block, Table, cell, n_range, shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KERNELS = ("copy", "mul", "add", "triad", "dot")


def _env(m: Metric) -> str:
    p = m.params
    if "sm_mhz" not in p:
        return str(p.get("nvml", "-"))
    return (f"SM {p['sm_mhz']} MHz (min {p['sm_mhz_min']}), {p['power_w']:.0f} W, "
            f"{p['temp_c_max']} °C, throttle: {p['throttle']}")


def _by(run: Run, name: str, *keys: str) -> dict[tuple[Any, ...], Metric]:
    """The run's GPU figures of one name, by the values of the params named."""
    return {tuple(m.params[k] for k in keys): m for m in run.select("gpu", name)}


def _stream_table(run: Run) -> Table | None:
    bw = run.select("gpu", "bandwidth")
    if not bw:
        return None
    frac = _by(run, "bandwidth_fraction", "device", "kernel")
    peak = _by(run, "bandwidth_peak", "device")
    t = Table(title=f"GPU memory bandwidth, BabelStream kernels and byte counting (copy/mul 2 "
                    f"arrays, add/triad 3, dot 2), GB/s median ±95% CI, {n_range(bw)}; % of "
                    "the peak from memory clock x bus width")
    for col, just in (("GPU", "left"), ("array", "right"), *((k, "right") for k in KERNELS),
                      ("triad % peak", "right"), ("peak GB/s", "right"),
                      ("during the run", "left")):
        t.add_column(col, just)
    largest: dict[int, int] = {}
    for m in bw:
        d = m.params["device"]
        largest[d] = max(largest.get(d, 0), m.params["array_bytes"])
    for d, size in sorted(largest.items()):
        row = {m.params["kernel"]: m for m in bw
               if m.params["device"] == d and m.params["array_bytes"] == size}
        f = frac.get((d, "triad"))
        p = peak.get((d,))
        any_m = next(iter(row.values()))
        t.add_row(f"GPU{d} {any_m.params['gpu']}", f"{size / 2**20:.0f} MiB",
                  *(cell(row.get(k), 0) for k in KERNELS),
                  "-" if f is None else f"{f.summary.median:.1f}",
                  "-" if p is None else f"{p.summary.median:.0f}", _env(any_m))
    return t


def _gemm_table(run: Run) -> Table | None:
    gemm = run.select("gpu", "gemm")
    if not gemm:
        return None
    key = ("device", "precision", "n")
    models, fractions = _by(run, "gemm_peak", *key), _by(run, "gemm_fraction", *key)
    t = Table(title=f"GPU GEMM through cuBLAS (2 N³ FLOPs), TFLOP/s median ±95% CI, "
                    f"{n_range(gemm)}; % of the peak: FLOP/SM/clock (table) x SMs x the SM "
                    "clock NVML read during the run")
    for col, just in (("GPU", "left"), ("precision", "left"), ("N", "right"),
                      ("TFLOP/s", "right"), ("% peak", "right"), ("peak TFLOP/s", "right"),
                      ("during the run", "left")):
        t.add_column(col, just)
    for m in gemm:
        p = m.params
        at = tuple(p[k] for k in key)
        model, frac = models.get(at), fractions.get(at)
        pct = "-" if frac is None else f"{frac.summary.median:.1f}"
        t.add_row(f"GPU{p['device']}", p["precision"], str(p["n"]), cell(m, 1), pct,
                  "no model" if model is None else f"{model.summary.median:.1f}", _env(m))
    return t


def _copy_table(run: Run) -> Table | None:
    copies = run.select("gpu", "copy")
    if not copies:
        return None
    fractions = _by(run, "copy_fraction", "device", "numa", "bytes", "direction")
    t = Table(title=f"Host<->device, pinned memory, GB/s median ±95% CI, {n_range(copies)}; "
                    "host thread and buffer on each NUMA domain in turn (* local to the GPU); "
                    "% of the PCIe link as NVML read it during the copies")
    for col, just in (("GPU", "left"), ("NUMA", "left"), ("size", "right"), ("h2d", "right"),
                      ("d2h", "right"), ("bidir", "right"), ("% link h2d/d2h/bidir", "right"),
                      ("PCIe link", "left")):
        t.add_column(col, just)
    rows: dict[tuple[int, int, int], dict[str, Metric]] = {}
    for m in copies:
        p = m.params
        rows.setdefault((p["device"], p["numa"], p["bytes"]), {})[p["direction"]] = m
    for (d, node, size), by in sorted(rows.items()):
        any_m = next(iter(by.values()))
        pct = [fractions.get((d, node, size, x)) for x in DIRECTIONS]
        t.add_row(f"GPU{d}", f"{node}{' *' if any_m.params['local'] else ''}",
                  f"{size / 2**20:g} MiB", *(cell(by.get(x), 1) for x in DIRECTIONS),
                  "-" if not any(pct) else
                  "/".join("-" if f is None else f"{f.summary.median:.0f}" for f in pct),
                  _link(any_m.params))
    return t


def _link(p: dict[str, Any]) -> str:
    """The PCIe link NVML read during a copy, and what it could have been where lower."""
    if "pcie_gen" not in p:
        return "-"
    ran = f"gen{p['pcie_gen']} x{p['pcie_width']}"
    best = f"gen{p['pcie_gen_max']} x{p['pcie_width_max']}"
    return ran if ran == best else f"{ran} (of {best})"


def _p2p_table(run: Run) -> Table | None:
    p2p = run.select("gpu", "p2p")
    if not p2p:
        return None
    t = Table(title=f"GPU to GPU copies, GB/s median ±95% CI, {n_range(p2p)}")
    for col, just in (("from", "left"), ("to", "left"), ("link", "left"), ("size", "right"),
                      ("peer access", "left"), ("GB/s", "right")):
        t.add_column(col, just)
    for m in p2p:
        p = m.params
        t.add_row(f"GPU{p['device']}", p["peer_bus_id"], p.get("link", "?"),
                  f"{p['bytes'] / 2**20:g} MiB",
                  "yes" if p["peer_access"] else "no (through the host)", cell(m, 1))
    return t


def _gpu_headlines(run: Run, d: int) -> list[Headline]:
    """One GPU's triad at its largest array (its memory's peak bounds it), and its GEMM (FP64
    where measured, else the first precision measured; the peak at its SM clock bounds it)."""
    out = []
    triad = [m for m in run.select("gpu", "bandwidth")
             if m.params["device"] == d and m.params["kernel"] == "triad"]
    if triad:
        m = max(triad, key=lambda m: m.params["array_bytes"])
        out.append(Headline(f"gpu.{d}.hbm_triad", f"GPU{d} memory triad", m))
    gemm = [m for m in run.select("gpu", "gemm") if m.params["device"] == d]
    if gemm:
        prec = min({m.params["precision"] for m in gemm}, key=PRECISIONS.index)
        m = max((m for m in gemm if m.params["precision"] == prec),
                key=lambda m: m.summary.median)
        out.append(Headline(f"gpu.{d}.gemm_{prec}", f"GPU{d} GEMM {prec}, N={m.params['n']}",
                            m))
    return out


def memory_ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """A GPU memory figure's ceiling: its memory's peak (clock x bus width)."""
    peak = _by(run, "bandwidth_peak", "device").get((metric.params["device"],))
    return None if peak is None else Ceiling(peak.summary.median, "memory clock x bus width")


def copy_ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """A host<->device copy's ceiling: its PCIe link as NVML read it during the copy."""
    peak = next((q for q in run.select("gpu", "copy_peak")
                 if metric.params.items() <= q.params.items()), None)
    return None if peak is None else Ceiling(peak.summary.median, str(peak.params.get(
        "model_source", "the PCIe link")))


def gemm_ceiling(run: Run, metric: Metric) -> Ceiling | None:
    """A GEMM figure's ceiling: the GPU's peak for its precision at its SM clock."""
    p = metric.params
    peak = next((q for q in run.select("gpu", "gemm_peak")
                 if (q.params["device"], q.params["precision"], q.params["n"]) ==
                 (p["device"], p["precision"], p["n"])), None)
    return None if peak is None else Ceiling(peak.summary.median,
                                             "FLOP per SM clock x SMs x the SM clock read")


def headlines(run: Run) -> list[Headline]:
    devices = sorted({m.params["device"] for m in run.metrics if m.benchmark == "gpu"
                      and "device" in m.params})
    return [h for d in devices for h in _gpu_headlines(run, d)]


def tables(run: Run) -> list[Block]:
    return shown(_stream_table(run), _gemm_table(run), _copy_table(run), _p2p_table(run))


def _by_size(runs: list[Run]) -> Figure | None:
    fig, ax = figure.new("GPU memory bandwidth by array size (BabelStream)", "array bytes",
                         "GB/s", logx=True)
    drawn = figure.draw(ax, runs, lambda r: figure.grouped(
        r.select("gpu", "bandwidth"),
        lambda m: f"GPU{m.params['device']} {m.params['kernel']}",
        lambda m: float(m.params["array_bytes"])))
    return fig if drawn else None


def _by_precision(runs: list[Run]) -> Figure | None:
    """GEMM rate per precision, one bar group per run and GPU."""
    bars = [(f"{r.tag or r.run_id} GPU{m.params['device']}" if len(runs) > 1 else
             f"GPU{m.params['device']}", m) for r in runs for m in r.select("gpu", "gemm")]
    if not bars:
        return None
    fig, ax = figure.new("GEMM rate by precision (cuBLAS)", "precision", "TFLOP/s", logy=True)
    groups = sorted({g for g, _ in bars})
    precs = list(dict.fromkeys(m.params["precision"] for _, m in bars))
    width = 0.8 / len(groups)
    for i, g in enumerate(groups):
        best: dict[str, float] = {}
        for gg, m in bars:
            if gg == g:
                p = m.params["precision"]
                best[p] = max(best.get(p, 0.0), m.summary.median)
        xs = [precs.index(p) + i * width for p in best]
        ax.bar(xs, list(best.values()), width=width, label=g)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(precs))], precs)
    ax.legend(fontsize=8)
    return fig


def figures(runs: list[Run]) -> list[tuple[str, str, Figure]]:
    return figure.named(("gpu-bandwidth", "GPU memory bandwidth by array size", _by_size(runs)),
                        ("gpu-gemm", "GEMM rate by precision", _by_precision(runs)))
