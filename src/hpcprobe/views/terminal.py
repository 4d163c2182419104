"""The terminal view of a run: header, sweep, cache-level checks, STREAM table, warnings."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

from hpcprobe.analysis.compare import Comparison
from hpcprobe.common.units import format_bytes
from hpcprobe.machine.flopmodel import ABOVE_MODEL, efficiency_label
from hpcprobe.native.kernels import KERNELS
from hpcprobe.results.model import Metric, Run


def _cell(m: Metric | None, digits: int = 1) -> str:
    if m is None:
        return "-"
    s = m.summary
    return f"{s.median:.{digits}f} ±{100 * s.rel_ci_halfwidth:.1f}%"


def _n_range(metrics: list[Metric]) -> str:
    ns = [len(m.samples) for m in metrics]
    return f"n={min(ns)}" if min(ns) == max(ns) else f"n={min(ns)}-{max(ns)}"


def _header(run: Run) -> str:
    p = run.provenance
    c = run.topology["counts"]
    return (f"Run {run.run_id} on {run.host} ({p.get('cpu_model') or 'unknown CPU'}), "
            f"{run.created}, profile {run.profile}{', tag ' + run.tag if run.tag else ''}, "
            f"{run.duration_s:.1f} s\n"
            f"{c['packages']} package(s), {c['numa_nodes']} NUMA, {c['l3_domains']} L3 "
            f"domain(s), {c['cores']} cores, {c['pus']} PUs; ISA {p.get('isa')}; "
            f"THP {p.get('thp')}; governor {p.get('governor') or 'n/a'}")


def _sweep_table(bw: list[Metric]) -> Table | None:
    sweep = [m for m in bw if m.params.get("in_sweep")]
    if not sweep:
        return None
    threads = sorted({m.params["threads"] for m in sweep})
    kernels = sorted({m.params["kernel"] for m in sweep}, key=list(KERNELS).index)
    cells: dict[tuple[int, int, str], Metric] = {}
    level: dict[tuple[int, int], str] = {}
    for m in sweep:
        ws, t = m.params["size_per_thread_bytes"], m.params["threads"]
        cells[(ws, t, m.params["kernel"])] = m
        level[(ws, t)] = m.params["level"]
    t = Table(title=f"Working-set sweep, GB/s (STREAM counting), median ±95% CI, {_n_range(sweep)}",
              title_justify="left")
    t.add_column("size/thread", justify="right")
    for n in threads:
        t.add_column(f"level {n}T")
        for k in kernels:
            t.add_column(f"{k} {n}T", justify="right")
    for ws in sorted({key[0] for key in cells}):
        row = [format_bytes(ws)]
        for n in threads:
            row.append(level.get((ws, n), ""))
            row += [_cell(cells.get((ws, n, k))) for k in kernels]
        t.add_row(*row)
    return t


def _stream_table(bw: list[Metric]) -> Table | None:
    stream = [m for m in bw if m.params.get("phase") != "sweep"]
    if not stream:
        return None
    kernels = [k for k in KERNELS if any(m.params["kernel"] == k for m in stream)]
    rows: dict[tuple[Any, ...], dict[str, Metric]] = defaultdict(dict)
    for m in stream:
        p = m.params
        key = (p["placement"], p["threads"], p["cpus"], p["stores"], p["size_bytes"]
               if p["phase"] == "single" else None, p["level"])
        rows[key][p["kernel"]] = m
    t = Table(title=f"STREAM, GB/s (STREAM counting; write-allocate corrected in the stored "
                    f"bandwidth_write_allocate), median ±95% CI and best (the figure STREAM and "
                    f"likwid-bench print), {_n_range(stream)}", title_justify="left")
    for col in ("placement", "threads", "CPUs", "stores", "level"):
        t.add_column(col)
    for k in kernels:
        t.add_column(f"{k} median", justify="right")
        t.add_column(f"{k} best", justify="right")
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[3])):
        placement, threads, cpus, stores, size, lvl = key
        label = lvl if size is None else f"{lvl} {format_bytes(size)}"
        cells: list[str] = []
        for k in kernels:
            cell = rows[key].get(k)
            cells += [_cell(cell), "-" if cell is None else f"{cell.summary.max:.1f}"]
        t.add_row(placement, str(threads), cpus, "nt (streaming)" if stores == "nt" else
                  "regular", label, *cells)
    t.caption = ("Every kernel, copy included, ran with the store type of its row: `regular` "
                 "stores allocate each line written, `nt` bypass the caches. McCalpin STREAM "
                 "built with gcc at -O2/-O3 turns copy into memcpy, which streams (nt) at DRAM "
                 "sizes: compare its copy with the nt row.")
    return t


def _levels_table(run: Run) -> Table | None:
    rows = [f for f in run.findings if f.get("kind") == "cache_level"]
    if not rows:
        return None
    t = Table(title="Cache levels seen by the sweeps, against the topology",
              title_justify="left")
    for col in ("benchmark", "kernel", "threads", "level", "capacity/thread", "plateau",
                "edge seen", "verdict"):
        t.add_column(col)
    for f in rows:
        verdict = {True: "agrees", False: "DISAGREES", None: "n/a"}[f["agrees"]]
        t.add_row(f["benchmark"], f["kernel"], str(f["threads"]), f["level"],
                  format_bytes(f["nominal_bytes"]),
                  "-" if f["plateau"] is None else f"{f['plateau']:.1f} {f['unit']}",
                  "-" if f["edge_bytes"] is None else format_bytes(f["edge_bytes"]), verdict)
    return t


def _page_order(label: str) -> tuple[int, int]:
    """Base pages first, then larger ones, 'mixed' last."""
    if label == "mixed":
        return (1, 0)
    return (0, int(label[:-3]) << (20 if label.endswith("MiB") else 10))


def _latency_table(run: Run) -> Table | None:
    lat = run.select("latency", "latency")
    if not lat:
        return None
    pages = sorted({m.params["page_size"] for m in lat}, key=_page_order)
    rows: dict[int, dict[str, Metric]] = defaultdict(dict)
    level: dict[int, str] = {}
    for m in lat:
        rows[m.params["size_bytes"]][m.params["page_size"]] = m
        level[m.params["size_bytes"]] = m.params["level"]
    cpu = lat[0].params["cpu"]
    t = Table(title=f"Memory latency, ns per dependent load (pointer chase, 64 B lines) on CPU "
                    f"{cpu}, median ±95% CI, {_n_range(lat)}; pages as granted",
              title_justify="left")
    t.add_column("working set", justify="right")
    t.add_column("level")
    for pg in pages:
        t.add_column(f"{pg} pages", justify="right")
    for size in sorted(rows):
        t.add_row(format_bytes(size), level[size], *[_cell(rows[size].get(pg)) for pg in pages])
    return t


def _loaded_table(run: Run) -> Table | None:
    lat = {m.params["load_threads"]: m for m in run.metrics
           if m.benchmark == "latency" and m.name == "loaded_latency"}
    bw = {m.params["load_threads"]: m for m in run.metrics
          if m.benchmark == "latency" and m.name == "loaded_bandwidth"}
    if not lat:
        return None
    t = Table(title=f"Loaded latency: DRAM ring on one core while k cores read, median ±95% CI, "
                    f"{_n_range(list(lat.values()))}", title_justify="left")
    for col in ("k streaming", "CPUs", "latency ns", "their bandwidth GB/s"):
        t.add_column(col, justify="right")
    for k in sorted(lat):
        t.add_row(str(k), lat[k].params["load_cpus"] or "-", _cell(lat[k]),
                  _cell(bw.get(k)) if k else "-")
    return t


def _numa_tables(run: Run) -> list[Table]:
    out = []
    for name, what in (("latency", "latency, ns per load (one thread)"),
                       ("bandwidth", "read bandwidth, GB/s (all cores of the domain)")):
        cells = {(m.params["cpu_domain"], m.params["memory_domain"]): m for m in run.metrics
                 if m.benchmark == "numa" and m.name == name}
        if not cells:
            continue
        mems = sorted({j for _, j in cells})
        t = Table(title=f"NUMA {what}: CPU domain (rows), memory bound to domain (columns), "
                        f"median ±95% CI, {_n_range(list(cells.values()))}", title_justify="left")
        t.add_column("CPU domain")
        for j in mems:
            t.add_column(f"mem {j}", justify="right")
        for i in sorted({i for i, _ in cells}):
            t.add_row(str(i), *[_cell(cells.get((i, j))) for j in mems])
        out.append(t)
    return out


def _c2c_table(run: Run) -> Table | None:
    cells = {(m.params["cpu_a"], m.params["cpu_b"]): m for m in run.metrics
             if m.benchmark == "latency" and m.name == "core_to_core"}
    if not cells:
        return None
    rows = sorted({a for a, _ in cells})
    cols = sorted({b for _, b in cells})
    t = Table(title=f"Core-to-core latency, ns one way (a cache line bounced), median ±95% CI, "
                    f"{_n_range(list(cells.values()))}", title_justify="left")
    t.add_column("CPU")
    for b in cols:
        t.add_column(str(b), justify="right")
    for a in rows:
        t.add_row(str(a), *[_cell(cells.get((a, b))) for b in cols])
    relations = sorted({(m.params["relation"], a, b) for (a, b), m in cells.items()})
    t.caption = "; ".join(f"{a}-{b}: {r}" for r, a, b in relations[:12]) + \
        (" ..." if len(relations) > 12 else "")
    return t


def _kernel_key(p: dict[str, Any]) -> tuple[str, str, str]:
    return p["isa"], p["precision"], p["op"]


def _compute_table(run: Run) -> Table | None:
    peaks = run.select("compute", "peak")
    table = [m for m in peaks if m.params["phase"] == "peak"]
    if not table:
        return None
    models = {(_kernel_key(m.params), m.params["threads"]): m
              for m in run.select("compute", "peak_model")}
    counts = sorted({m.params["threads"] for m in table})
    t = Table(title=f"Peak compute, GFLOP/s (FMA = 2 FLOPs), median ±95% CI, {_n_range(table)}; "
                    "% of the model: FLOP/cycle/core x cores x the clock measured under the "
                    "same ISA load", title_justify="left")
    for col in ("ISA", "precision", "kernel"):
        t.add_column(col)
    for n in counts:
        t.add_column(f"{n}T GFLOP/s", justify="right")
        t.add_column(f"{n}T % model", justify="right")
    t.add_column("model FLOP/cycle/core")
    rows: dict[tuple[str, str, str], dict[int, Metric]] = defaultdict(dict)
    for m in table:
        rows[_kernel_key(m.params)][m.params["threads"]] = m
    for key, by_n in rows.items():
        cells: list[str] = []
        source = "-"
        for n in counts:
            got, model = by_n.get(n), models.get((key, n))
            cells.append(_cell(got))
            cells.append("-" if got is None or model is None else
                         efficiency_label(percent_of(got, model)))
            if model is not None:
                p = model.params
                source = f"{p['flops_per_cycle']:g} ({p['model_source']}: {p['microarch']})"
        t.add_row(*key, *cells, source)
    return t


def percent_of(m: Metric, model: Metric) -> float:
    return 100.0 * m.summary.median / model.summary.median


def _peak_lines(run: Run) -> list[str]:
    """The headline: the best all-core peak per precision against its model."""
    peaks = run.select("compute", "peak")
    if not peaks:
        return []
    models = {(_kernel_key(m.params), m.params["threads"]): m
              for m in run.select("compute", "peak_model")}
    top = max(m.params["threads"] for m in peaks)
    out = []
    for precision in ("dp", "sp"):
        cand = [m for m in peaks if m.params["precision"] == precision
                and m.params["threads"] == top]
        if not cand:
            continue
        best = max(cand, key=lambda m: m.summary.median)
        p = best.params
        line = (f"Peak {precision.upper()}: {best.summary.median:.1f} GFLOP/s on {top} core(s), "
                f"{p['isa']} {p['op']}")
        model = models.get((_kernel_key(p), top))
        if model is not None:
            mp = model.params
            ghz = model.summary.median / (mp["flops_per_cycle"] * top)
            pct = percent_of(best, model)
            line += (f" = {pct:.1f} % of the model {model.summary.median:.1f}"
                     if pct <= ABOVE_MODEL else
                     f", ABOVE its model {model.summary.median:.1f} ({pct:.1f} %: the model's "
                     "clock read low; see the warnings, not an efficiency)")
            line += (f" ({mp['flops_per_cycle']:g} FLOP/cycle x {top} core(s) x {ghz:.2f} GHz "
                     f"measured under {mp['clock_load']} load; {mp['model_source']} model, "
                     f"{mp['microarch']})")
        out.append(line)
    return out


def _scaling_table(run: Run) -> Table | None:
    scaling = {m.params["threads"]: m for m in run.select("compute", "peak")
               if m.params.get("scaling")}
    if len(scaling) < 2:
        return None
    triad = {m.params["threads"]: m for m in run.select("memory", "bandwidth")
             if m.params["kernel"] == "triad" and m.params["stores"] == "regular"
             and m.params["level"] == "DRAM" and m.params["placement"] == "one-per-core"}
    first = scaling[min(scaling)]
    label = " ".join(_kernel_key(first.params))
    t = Table(title=f"Core scaling: peak {label} and DRAM triad (regular stores, one per core) "
                    "by threads, median ±95% CI" + ("" if triad else
                                                    "; run `memory` too for the triad curve"),
              title_justify="left")
    for col in ("threads", "GFLOP/s", "per core", "speedup", "triad GB/s"):
        t.add_column(col, justify="right")
    base = first.summary.median / min(scaling)
    for n in sorted(scaling):
        med = scaling[n].summary.median
        t.add_row(str(n), _cell(scaling[n]), f"{med / n:.1f}", f"{med / base:.2f}",
                  _cell(triad.get(n)))
    return t


def _clock_table(run: Run) -> Table | None:
    clocks = run.select("frequency", "clock")
    if not clocks:
        return None
    loads = list(dict.fromkeys(m.params["load"] for m in clocks))
    cells = {(m.params["active_cores"], m.params["load"]): m for m in clocks}
    cur = {(m.params["active_cores"], m.params["load"]): m
           for m in run.select("frequency", "scaling_cur_freq")}
    t = Table(title=f"Core clock, GHz (dependent add chains; scalar: the chain alone, avx2/avx512:"
                    f" with FMAs of that width in flight), median ±95% CI, {_n_range(clocks)}; "
                    f"cores in the order of placement {clocks[0].params['placement']}",
              title_justify="left")
    t.add_column("active cores", justify="right")
    for load in loads:
        t.add_column(f"{load} load", justify="right")
        if any(key[1] == load for key in cur):
            t.add_column(f"{load} cpufreq says", justify="right")
    for k in sorted({key[0] for key in cells}):
        row = [str(k)]
        for load in loads:
            row.append(_cell(cells.get((k, load)), 3))
            if any(key[1] == load for key in cur):
                row.append(_cell(cur.get((k, load)), 3))
        t.add_row(*row)
    return t


def _roofline_table(run: Run) -> Table | None:
    ceilings = run.select("roofline", "bandwidth_ceiling")
    compute = {m.params["precision"]: m for m in run.select("roofline", "compute_ceiling")}
    if not ceilings or not compute:
        return None
    ridge = {(m.params["precision"], m.params["level"]): m
             for m in run.select("roofline", "ridge_point")}
    tops = ", ".join(f"{p.upper()} {m.summary.median:.1f} GFLOP/s ({m.params['isa']} "
                     f"{m.params['op']})" for p, m in compute.items())
    t = Table(title=f"Roofline on {ceilings[0].params['threads']} core(s): compute ceilings {tops};"
                    " ridge point = peak / bandwidth (FLOP/B, STREAM byte counting)",
              title_justify="left")
    for col in ("level", "bandwidth GB/s", "kernel", *[f"ridge {p.upper()} FLOP/B"
                                                         for p in compute]):
        t.add_column(col, justify="right")
    for m in ceilings:
        lvl = m.params["level"]
        t.add_row(lvl, _cell(m), f"{m.params['kernel']} {m.params['stores']}",
                  *[f"{ridge[(p, lvl)].summary.median:.2f}" if (p, lvl) in ridge else "-"
                    for p in compute])
    return t


def render(run: Run, console: Console) -> None:
    console.print(_header(run))
    bw = run.select("memory", "bandwidth")
    for table in (_sweep_table(bw), _stream_table(bw), _latency_table(run), _loaded_table(run),
                  *_numa_tables(run), _c2c_table(run), _levels_table(run), _clock_table(run),
                  _compute_table(run), _scaling_table(run), _roofline_table(run)):
        if table is not None:
            console.print(table)
    for line in _peak_lines(run):
        console.print(line, highlight=False)
    if any(m.benchmark == "mpi" for m in run.metrics):
        from hpcprobe.families.mpi import views as osu

        console.print(osu.render(run.metrics), highlight=False, markup=False)
    for w in run.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    for e in run.errors:
        console.print(f"[red]error:[/red] {e}", highlight=False)


def _pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def render_comparison(c: Comparison, console: Console, limit: int | None) -> None:
    """A comparison: what differs between the runs' configurations first,
    then the metrics by effect size."""
    console.print(f"Baseline: run {c.runs[0]}; compared: {', '.join(c.runs[1:])}",
                  highlight=False)
    if c.differences:
        t = Table(title="What differs (configuration fingerprint)", title_justify="left")
        t.add_column("setting")
        for label in c.runs:
            t.add_column(label)
        for what, values in c.differences:
            t.add_row(what, *values)
        console.print(t)
    else:
        console.print("The configurations do not differ (same fingerprint).", highlight=False)
    rows = c.rows if limit is None else c.rows[:limit]
    t = Table(title=f"Metrics by effect size ({len(rows)} of {len(c.rows)} joined; ratio = run / "
                    "baseline median, 95 % bootstrap CI; p: Mann-Whitney U; ~ not significant at "
                    "0.05; ! fewer than 5 samples)", title_justify="left")
    for col in ("benchmark", "metric", "params", "run", "baseline", "median", "change [95% CI]",
                "p", ""):
        t.add_column(col, justify="right" if col in ("baseline", "median", "p") else "left")
    for r in rows:
        t.add_row(r.benchmark, f"{r.name} ({r.unit})", r.params, r.run.split(" ")[0],
                  f"{r.baseline_median:.4g}", f"{r.median:.4g}",
                  f"{_pct(r.ratio)} [{_pct(r.ratio_ci_low)}, {_pct(r.ratio_ci_high)}]",
                  f"{r.p_value:.3g}", r.verdict + (" !" if r.few_samples else ""))
    console.print(t)
    sig = [r for r in c.rows if r.significant][:3]
    if c.differences and sig:
        what = "; ".join(f"{k} {' -> '.join(v)}" for k, v in c.differences[:2])
        for r in sig:
            console.print(f"{what}: {r.benchmark} {r.name} {r.params}: {_pct(r.ratio)} "
                          f"[{_pct(r.ratio_ci_low)}, {_pct(r.ratio_ci_high)}]", highlight=False)
    for run, n in c.only_in.items():
        if n:
            console.print(f"{n} metric(s) of run {run} have no counterpart in the baseline.",
                          highlight=False)
