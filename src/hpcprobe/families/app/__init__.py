"""User applications as benchmarks (`hpcprobe app NAME -- CMD ARGS...`): a command run as
given (no shell), repeated, its figure of merit taken from its output by a pattern, or its wall
time, each repetition a sample of the metric `app:NAME`."""

from __future__ import annotations

from hpcprobe.families.app import bench, views
from hpcprobe.measure.family import Command, Family, Metrics

FAMILY = Family(
    "app", "a user's application: its figure of merit (a pattern in its output) or wall time",
    bench.AppOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    metrics=Metrics(open_prefix=bench.PREFIX), views=(views.tables,),
    capabilities=(Command(
        "run a user's application as a benchmark: its figure of merit or wall time",
        "Run COMMAND (no shell) --repeat times and store each repetition's figure of merit, "
        "taken from its output by --fom (a regular expression whose first group is the "
        "number), or its wall time, as samples of the metric app:NAME; compare and report it "
        "like any figure. A failed repetition (non-zero exit, timeout, pattern not found) is "
        "reported with its last lines and never counted.", positionals=bench.POSITIONALS),))
