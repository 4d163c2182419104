"""The terminal summary of a measured run."""

from rich.console import Console

from hpcprobe import native, registry
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.measure import profiles
from hpcprobe.measure.family import NoProgress
from hpcprobe.views import terminal


def test_summary_shows_the_stream_table_with_ci(tiny):
    opts = MemoryOptions(kernels=("copy", "triad"), stores=("regular",), threads=(1,),
                         size_bytes=64 << 10)
    run = registry.execute(tiny, profiles.get("quick"), ["memory"], native.best_isa(),
                         {"memory": opts}, NoProgress())
    console = Console(record=True, width=200)
    terminal.render(run, console, registry.views(), console)
    text = console.export_text()
    assert run.run_id in text and "STREAM" in text
    assert "copy" in text and "triad" in text and "±" in text
    bw = next(m for m in run.metrics if m.name == "bandwidth")
    assert f"{bw.summary.median:.1f}" in text
    # the best sample beside the median, as STREAM and likwid-bench print it
    assert "triad best" in text and f"{max(bw.samples):.1f}" in text
    assert "memcpy" in text  # where a STREAM copy figure comes from


def test_summary_shows_clock_peak_model_scaling_and_roofline(tiny):
    from hpcprobe.families.compute.bench import ComputeOptions
    from hpcprobe.families.frequency.bench import FrequencyOptions

    isa = native.best_isa()
    run = registry.execute(
        tiny, profiles.get("quick"), ["memory", "frequency", "compute"], isa,
        {"memory": MemoryOptions(kernels=("triad",), stores=("regular",), threads=(1,),
                                 size_bytes=64 << 10),
         "frequency": FrequencyOptions(threads=(1,), loads=(isa,)),
         "compute": ComputeOptions(isa=isa, precisions=("dp",), threads=(1,))}, NoProgress())
    assert not run.errors
    console = Console(record=True, width=250)
    terminal.render(run, console, registry.views(), console)
    text = console.export_text()
    assert "Core clock" in text and "Peak compute" in text and "Roofline" in text
    # the headline is the best DP kernel, whichever it is on this CPU (fma+add beats fma where
    # an add pipe sits beside the FMA pipes)
    peak = max((m for m in run.metrics if m.name == "peak"), key=lambda m: m.summary.median)
    assert f"Peak DP: {peak.summary.median:.1f} GFLOP/s" in text
    assert f"{peak.params['isa']} {peak.params['op']}" in text
    assert "% of the model" in text
    ridge = next(m for m in run.metrics if m.name == "ridge_point")
    assert f"{ridge.samples[0]:.2f}" in text


def test_brackets_in_messages_cells_and_tags_are_text_not_markup(tiny, capsys):
    """Rich reads "[madvise]" or "[workloads.pt2pt]" as a style tag and drops it: a warning, a
    cell or a tag that holds one is printed as written."""
    from hpcprobe.analysis.compare import Comparison
    from hpcprobe.viewkit.table import Table

    opts = MemoryOptions(kernels=("triad",), stores=("regular",), threads=(1,),
                         size_bytes=64 << 10)
    run = registry.execute(tiny, profiles.get("quick"), ["memory"], native.best_isa(),
                           {"memory": opts}, NoProgress(), tag="thp[madvise]")
    run.warnings.append("[workloads.pt2pt]: no figure of its runs has the params of its where")
    run.errors.append("[configurations.b] set THP: always [madvise] never")
    console = Console(record=True, width=200)
    terminal.render(run, console, registry.views(), console)
    t = Table("[bold]settings[/bold]")
    t.add_column("[setting]")
    t.add_row("always [madvise] never")
    terminal.print_blocks([t], console)
    terminal.render_comparison(Comparison(["[a]", "[b]"], [], [], {}), console, None)
    text = console.export_text() + capsys.readouterr().err  # warnings and errors: stderr
    for said in ("tag thp[madvise]", "warning: [workloads.pt2pt]: no figure",
                 "error: [configurations.b] set THP: always [madvise] never",
                 "[bold]settings[/bold]", "[setting]", "always [madvise] never",
                 "Baseline: run [a]; compared: [b]"):
        assert said in text, said
