"""`hpcprobe topology`: the machine's topology, the memory limit this process runs under, and
what the families find on the node without measuring (its GPUs)."""

from __future__ import annotations

import argparse

from hpcprobe import registry
from hpcprobe.commands.base import Spec, add_input, add_json, print_json
from hpcprobe.common.units import format_bytes
from hpcprobe.machine import sysinfo, topology
from hpcprobe.measure.family import Inventory


def setup(t: argparse.ArgumentParser) -> None:
    add_input(t, "show ")
    add_json(t, "the model")


def handle(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    # what is on this node besides (a recorded node's: each family's own command reads those)
    found = [] if a.input is not None else \
        [(inv, got) for inv in registry.capable(Inventory).values()
         if (got := inv.discover()) is not None]
    if a.json:
        print_json({**topo.to_dict(), **{inv.key: inv.document(got) for inv, got in found}},
                   a.json)
        return 0
    print(topology.render(topo))
    if a.input is None and (lim := sysinfo.cgroup_memory_limit()) is not None:
        print(f"Memory limit: {format_bytes(lim.limit)} for this process's cgroup "
              f"({lim.where}), {format_bytes(lim.headroom)} of it free: plans are sized "
              "within it")
    for inv, got in found:
        print(inv.render(got))
    return 0


COMMAND = Spec("topology", "show the machine's topology", setup, handle)
