"""`hpcprobe plan`: the CPUs a placement yields, thread by thread."""

from __future__ import annotations

import argparse

from hpcprobe.commands.base import Spec, add_input, add_json, add_oversubscribe, print_json
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.machine import placement, topology
from hpcprobe.measure import options


def setup(pl: argparse.ArgumentParser) -> None:
    pl.add_argument("--placement", required=True, help=placement.PLACEMENT_HELP)
    pl.add_argument("--threads", type=options.at_least(1, "a thread count"),
                    help="number of threads (default: all it yields)")
    add_oversubscribe(pl)
    add_input(pl)
    add_json(pl, "the plan")


def handle(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    pl = placement.plan(topo, a.placement, a.threads, a.oversubscribe)
    if a.json:
        print_json(pl.to_dict(), a.json)
        return 0
    print(f"placement {pl.placement}: {len(pl.cpus)} thread(s) on CPUs "
          f"{','.join(map(str, pl.cpus))} ({format_cpulist(pl.cpus)})"
          + (" [oversubscribed]" if pl.oversubscribed else ""))
    for i, cpu in enumerate(pl.cpus):
        pu = topo.pu(cpu)
        print(f"  thread {i:4d} -> CPU {cpu:4d}  package {pu.package}  NUMA {pu.numa}  "
              f"L3 {'-' if pu.l3 is None else pu.l3}  core {pu.core}")
    return 0


COMMAND = Spec("plan", "show the CPUs a placement yields", setup, handle)
