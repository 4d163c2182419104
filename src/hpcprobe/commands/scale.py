"""`hpcprobe scale`: a family that declares a problem size at a ladder of rank counts, weak and
strong: every count's run and the summary with the speedup and the parallel efficiency."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hpcprobe import registry
from hpcprobe.commands import output, runargs
from hpcprobe.commands.base import Spec, add_isa, add_report, add_run_options, open_store
from hpcprobe.common.errors import UserError
from hpcprobe.machine import topology
from hpcprobe.measure import options, scaling
from hpcprobe.measure.family import RunContext, Sized
from hpcprobe.measure.runner import resolve_isa


def setup(sc: argparse.ArgumentParser) -> None:
    sized = [f for f, _ in registry.having(Sized).values()]
    sc.add_argument("family", choices=[f.name for f in sized], metavar="BENCHMARK",
                    help=", ".join(f.name for f in sized))
    sc.add_argument("values", nargs="*", metavar="VALUE",
                    help="the benchmark's values by position: app NAME, then -- COMMAND ARGS... "
                         "(its `{ranks}` and `{nodes}` replaced by the counts in weak mode)")
    sc.add_argument("--ranks", dest="counts", type=options.counts("a rank count", "1,2,4"),
                    metavar="N,N,...",
                    help="the rank counts (default: 1, 2, 4, ... up to the cores)")
    sc.add_argument("--mode", choices=("weak", "strong", "both"), default="both",
                    help="weak, strong or both (default: both; the MPI collectives: weak)")
    add_isa(sc, "every one the CPU supports")
    add_report(sc, "the scaling runs")
    runargs.add_family_options(sc, sized, skip=frozenset({"--ranks"}))
    add_run_options(sc)


def handle(a: argparse.Namespace) -> int:
    fam, _ = registry.having(Sized)[a.family]
    c = runargs.checked(a, [fam])
    opts = replace(c.options[fam.name], **runargs.by_position(fam, a.values, a.after_dashes))
    isa = resolve_isa(a.isa)
    modes = scaling.chosen_modes(fam, a.mode, opts)
    topo = topology.load(a.input)
    counts = scaling.ladder(topo, fam, a.counts)
    out = output.Outputs.of(a)
    if a.dry_run:
        ctx = RunContext(topo, c.profile, isa, a.oversubscribe, isa_asked=a.isa is not None,
                         standalone=True)
        for mode, k, o in scaling.steps(ctx, fam, opts, counts, modes):
            assert fam.plan is not None
            print(f"{fam.name}, {mode}, {k} rank(s):")
            for line in fam.plan(ctx, o):
                print(f"  {line}")
        return 0
    if a.input:
        raise UserError("--input plans for another machine: add --dry-run (measurements run on "
                        "this one)")
    store = open_store(a.db, a.no_store)
    return output.measured(out, store, lambda bar: scaling.execute(
        topo, c.profile, fam, isa, opts, counts, modes, bar, a.oversubscribe, a.tag,
        a.isa is not None))


COMMAND = Spec("scale", "run a benchmark or an application at 1, 2, 4, ... ranks: weak and "
               "strong scaling, speedup and parallel efficiency", setup, handle,
               takes_command=True,
               description="Run a benchmark that has a problem size, or a user's MPI application "
                           "(`scale app NAME -- CMD`), at a ladder of rank counts, "
                           "weak (the size a rank held) and strong (the total held), and report "
                           "the speedup against the first count with its CI, the parallel "
                           "efficiency and the ideal.")
