"""`hpcprobe sweep FILE.toml`: every configuration's state in turn, its workloads in interleaved
rounds, the comparison with the baseline and a recommendation per workload."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprobe import registry
from hpcprobe.commands import output, runargs
from hpcprobe.commands.base import (
    Bar,
    Spec,
    add_db,
    add_dry_run,
    add_json,
    add_no_store,
    add_report,
    open_store,
    terminate_interrupts,
)
from hpcprobe.common.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, UserError
from hpcprobe.machine import topology
from hpcprobe.measure.runner import resolve_isa

if TYPE_CHECKING:  # the driver loads when a sweep runs, not with every command
    from hpcprobe.tuning import config


def setup(sw: argparse.ArgumentParser) -> None:
    sw.add_argument("file", metavar="FILE.toml", help="the sweep file")
    sw.add_argument("--boot", metavar="NAME",
                    help="this boot's state (NPS4, SMT off ...): run the configurations that "
                         "name it; the others' runs are joined from the store")
    sw.add_argument("--analyse", action="store_true",
                    help="measure nothing: compare the stored runs of the sweep's "
                         "configurations (after the last boot)")
    add_dry_run(sw, "check the file and show what would run, run nothing")
    sw.add_argument("--markdown", metavar="FILE.md", help="write the recommendation as Markdown")
    add_report(sw, "the sweep")
    add_json(sw, "the comparison and the recommendations", also=True)
    add_db(sw)
    add_no_store(sw, "the runs", " (runs of other boots cannot be joined then)")


def _check_workloads(s: config.Sweep) -> None:
    """Each workload's `hpcprobe run` under each configuration, checked as the run will check
    it, before any state is switched."""
    from hpcprobe.tuning import sweep

    for c in s.configurations.values():
        for w in s.workloads.values():
            if w.command:  # an application's options were checked with the file
                continue
            try:
                runargs.check([w.family], sweep.run_line(registry.families(), c, w))
            except UserError as exc:
                raise UserError(f"{s.path}: [workloads.{w.name}] under {c.name}: {exc}") \
                    from None


def _check_states(s: config.Sweep, boot: str | None) -> None:
    """Before anything runs (or is shown): the boot names configurations, and each of this
    boot's configurations sets sysfs files that are writable here and runs pre and post
    commands that exist (the values a file refuses, the dry run lists)."""
    from hpcprobe.tuning import state

    if boot is None and s.boots():
        raise UserError(f"{s.path}: its configurations need boots {', '.join(s.boots())}: run "
                        "it once in each with --boot NAME (or --analyse to join what is "
                        "stored)")
    if boot is not None and boot not in s.boots():
        raise UserError(f"--boot {boot}: no configuration of {s.path} names it; boots: "
                        f"{', '.join(s.boots()) or 'none'}")
    for c in s.configurations.values():
        if c.boot != boot:
            continue
        where = f"{s.path}: [configurations.{c.name}]"
        state.check_writable(c.sysfs, where)
        for step, commands in (("pre", c.pre), ("post", c.post)):
            for argv in commands:
                if shutil.which(argv[0]) is None:
                    raise UserError(f"{where} {step} {shlex.join(argv)}: no executable "
                                    f"{argv[0]!r} here (not on PATH, or not executable)")


def handle(a: argparse.Namespace) -> int:
    from hpcprobe.tuning import config, state, sweep

    topo = topology.discover()
    isa = resolve_isa(None)
    s = config.load(a.file, registry.families(), sweep.fingerprint_labels(topo, isa))
    out = output.Outputs.of(a, empty_refused=False, store_again=not a.analyse)
    if not a.analyse:  # what the sweep refuses, its dry run refuses too
        _check_states(s, a.boot)
    if a.dry_run:
        return _plan(s, a.boot)
    if not a.analyse:  # a dry run checks each workload by its child's own dry run
        _check_workloads(s)
        for c in s.configurations.values():
            state.check_settable(c.sysfs, f"{a.file}: [configurations.{c.name}]")
    store = open_store(a.db, a.no_store)
    try:
        with terminate_interrupts(), Bar() as bar:
            runner = sweep.Runner(s, registry.families(), topo, isa, store,
                                  registry.not_joined(), bar, _say, a.boot, a.analyse)
            done = runner.analyse() if a.analyse else runner.execute()
    except KeyboardInterrupt:
        kept = len(runner.parts) if "runner" in locals() else 0
        sys.stderr.write(f"hpcprobe: interrupted; every configuration's state was restored; "
                         f"{kept} run(s) of the sweep stored (tags {s.name}:CONFIGURATION)\n")
        return EXIT_INTERRUPTED
    out.stored = f"{len(done.parts)} workload run(s) stored as they ran, tags " \
        f"{s.name}:CONFIGURATION"
    out.document = lambda path: sweep.write_json(done, path)
    output.keep(done.summary, out, store)
    if done.skipped:
        return EXIT_USAGE
    return EXIT_FAILURE if done.failures else 0


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")


def _plan(s: Any, boot: str | None) -> int:
    """What a sweep would run, in order, and nothing else; each workload checked by its own
    dry run under each configuration (its environment; the machine's state as it is now)."""
    from hpcprobe.tuning import state, sweep

    here = [c for c in s.configurations.values() if c.boot == boot]
    print(f"Sweep {s.name}: baseline {s.baseline}; at least {s.rounds} round(s), at most "
          f"{s.max_rounds}, budget {s.budget_s:g} s; profile {s.profile}; nothing runs "
          "(--dry-run). Each round, in this order:")
    refused = 0
    if not here:
        print(f"  (no configuration for boot {boot or '(none)'}; boots: "
              f"{', '.join(s.boots())})")
    for c in here:
        print(f"  {c.name}" + (f" (boot {c.boot})" if c.boot else "") + ":")
        for pattern, value in c.sysfs.items():
            paths = list(state.files({pattern: value}))
            many = "" if paths == [pattern] else f", {len(paths)} file(s) here"
            print(f"    set {pattern} = {value} (restored after{many})")
            whys = [w for f in paths if (w := state.refused_value(f, value)) is not None]
            if whys:
                refused += 1
                print(f"      refused: {whys[0]}")
        for argv in c.pre:
            print(f"    pre: {shlex.join(argv)}")
        for k, v in c.expect.items():
            print(f"    check: {k} = {v}")
        for w in s.workloads.values():
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in c.env.items())
            argv = sweep.workload_argv(s, registry.families(), c, w, Path("RUN.json"))
            print(f"    {w.name}: {env + ' ' if env else ''}{shlex.join(argv)}")
            if (why := sweep.check(s, registry.families(), c, w)) is not None:
                refused += 1
                print(f"      refused (its dry run, in this machine's state now): {why}")
        for argv in c.post:
            print(f"    post: {shlex.join(argv)}")
    if refused:
        raise UserError(f"{s.path}: {refused} step(s) refused, shown above; fix the sweep file")
    return 0


COMMAND = Spec("sweep", "run workloads under each configuration of a TOML file, interleaved, "
               "and recommend one per workload", setup, handle,
               description="Run the sweep file's workloads (hpcprobe families and your "
                           "applications) under each of its configurations (environment, "
                           "OpenMP, options, wrapper, sysfs settings and pre/post commands, "
                           "restored afterwards) in interleaved rounds, adding rounds while a "
                           "comparison is undecided and the budget allows; compare every "
                           "configuration with the baseline and write a recommendation per "
                           "workload. See docs/sweep.md.")
