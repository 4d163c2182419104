"""`hpcprobe run`: measure this node (the families named, else the default ones), show the run,
store it."""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
from collections.abc import Sequence

from hpcprobe import registry
from hpcprobe.commands import output, runargs
from hpcprobe.commands.base import Spec, open_store
from hpcprobe.common.errors import HpcprobeError, UserError
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import sentinel, topology
from hpcprobe.measure.runner import resolve_isa
from hpcprobe.results.store import Selection, Store


def handle(a: argparse.Namespace) -> int:
    return measure(runargs.checked(a, registry.resolve(a.benchmarks)), a.isa)


def measure(c: runargs.Checked, isa_given: str | None, standalone: bool = False) -> int:
    """Run the checked families (with the ISA variant `--isa` gave, else the best), show the
    run, store it and write its documents as asked."""
    a = c.args
    isa = resolve_isa(isa_given)
    isa_asked = isa_given is not None
    if a.input and not a.dry_run:
        raise UserError("--input plans for another machine: add --dry-run (measurements run on "
                        "this one)")
    out = output.Outputs.of(a)
    if a.dry_run:
        return dry_run(c, isa, isa_asked, standalone)
    store = open_store(a.db, a.no_store)
    topo = topology.discover()
    return output.measured(out, store, lambda bar: (registry.execute(
        topo, c.profile, [f.name for f in c.families], isa, c.options, bar,
        oversubscribe=a.oversubscribe, tag=a.tag, isa_asked=isa_asked,
        standalone=standalone), []))


def dry_run(c: runargs.Checked, isa: str, isa_asked: bool, standalone: bool) -> int:
    """What the run would measure (and refuse), and nothing else."""
    a = c.args
    topo = topology.load(a.input)
    todo = registry.plan(topo, c.profile, [f.name for f in c.families], isa, c.options,
                         a.oversubscribe, isa_asked, standalone)
    # an hwloc XML states no instruction set: the kernels listed are those this machine runs
    where = f"{a.input} (ISA and kernel variants: this machine's)" if a.input else "this machine"
    print(f"Profile {c.profile.name}, ISA {isa}, on {topo.counts()['cores']} core(s) of {where}; "
          "nothing measured or stored (--dry-run):")
    took = {} if a.input else _seconds(a.db, c.profile.name)
    _print_plan(todo, took)
    with contextlib.suppress(HpcprobeError):  # a machine it cannot read: its run says why
        p = sentinel.probe(topo).describe()
        print(f"and around them the node sentinel: a DRAM triad on CPUs {p['cpus']}, "
              f"{format_bytes(p['size_bytes'])}, before the first benchmark and after each")
    return 0


def _seconds(db: str | None, profile: str, runs: int = 3) -> dict[str, float]:
    """Family -> the median of its seconds in this host's last runs of this profile in the
    store (as their provenance recorded them); nothing where there are none."""
    try:
        store = Store.open(db, create=False)
    except UserError:
        return {}
    took: dict[str, list[float]] = {}
    with store:
        infos = [i for i in store.runs(limit=20, where=Selection(host=socket.gethostname()))
                 if i.profile == profile and not i.interrupted][:runs]
        for info in infos:
            for name, s in (store.load(info.run_id).provenance.get("seconds") or {}).items():
                took.setdefault(name, []).append(float(s))
    return {name: statistics.median(s) for name, s in took.items()}


def _print_plan(todo: Sequence[tuple[str, list[str]]], took: dict[str, float]) -> None:
    for name, lines in todo:
        when = f", about {took[name]:.0f} s" if name in took else ""
        print(f"{name}: {len(lines)} measurement(s){when}")
        for line in lines:
            print(f"  {line}")
    known = [took[name] for name, _ in todo if name in took]
    unknown = [name for name, _ in todo if name not in took]
    if known and not unknown:
        print(f"In all about {sum(known):.0f} s (the median of this host's last runs of this "
              "profile in the store)")
    elif known:
        print(f"In all about {sum(known):.0f} s and the time of {', '.join(unknown)}, which "
              "this host has not run in this profile yet")
    else:
        print("Time: not known until this host has run this profile once (each run records "
              "its time per benchmark)")


COMMAND = Spec("run", "measure this node and store the run", runargs.setup, handle,
               description="Measure this node; with no BENCHMARK, run them all.",
               own_help=True)
