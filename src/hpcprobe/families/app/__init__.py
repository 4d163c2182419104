"""User applications as benchmarks (`hpcprobe app NAME -- CMD ARGS...`): a command run as
given (no shell), repeated, its figure of merit taken from its output by a pattern, or its wall
time, each repetition a sample of the metric `app:NAME`."""

from __future__ import annotations

from hpcprobe.families.app import bench, views
from hpcprobe.measure.family import (
    ENERGY,
    POWER,
    Command,
    Family,
    Headlines,
    Keeps,
    Metrics,
    MetricSpec,
    Params,
    Scaling,
    Sized,
)

FAMILY = Family(
    "app", "a user's application: its figure of merit (a pattern in its output, or known: "
    "LAMMPS) or wall time, in this process or across MPI ranks",
    bench.AppOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    # beside its figures where the energy counters are read: each repetition's power and
    # joules, and each rate per watt (app:NAME_per_watt, under the open prefix)
    metrics=Metrics((MetricSpec(POWER, "W", "lower"), MetricSpec(ENERGY, "J", "lower")),
                    not_joined=bench.LAUNCH, open_prefix=bench.PREFIX,
                    params=(Params(("app", "domains"), (POWER, ENERGY)),)),
    views=(views.tables,),
    capabilities=(Headlines(views.headlines), Keeps((bench.APPS,)),
                  Sized(bench.scaled, bench.rate, "its work rate", modes=("strong", "weak"),
                        unit_of=bench.rate_unit, modes_for=bench.modes),
                  # across nodes (`cluster run --scale app`): the problem the command sizes
                  # with `{ranks}` or `{nodes}` grows with the count, or stays (strong)
                  Scaling((), vary=("problem_ranks",), prefix=bench.PREFIX,
                          rate=bench.work_rate), Command(
        "run a user's application as a benchmark: its figure of merit or wall time",
        "Run COMMAND (no shell) --repeat times and store each repetition's figure of merit, "
        "taken from its output by --fom (a regular expression whose first group is the "
        "number), from the output of an application hpcprobe knows (LAMMPS: its Performance "
        "line), or its wall time, as samples of the metric app:NAME; compare and report it "
        "like any figure. With --ranks (or --layout, --hosts) the launcher starts it on MPI "
        "ranks, each bound and read back. A failed repetition (non-zero exit, timeout, pattern "
        "not found) is reported with its last lines and never counted.",
        positionals=bench.POSITIONALS),))
