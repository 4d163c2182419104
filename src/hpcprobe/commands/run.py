"""`hpcprobe run`: measure this node (the families named, else the default ones), show the run,
store it."""

from __future__ import annotations

import argparse

from hpcprobe import registry
from hpcprobe.commands import runargs
from hpcprobe.commands.base import Spec


def handle(a: argparse.Namespace) -> int:
    return runargs.measure(runargs.checked(a, registry.resolve(a.benchmarks)), a.isa)


COMMAND = Spec("run", "measure this node and store the run", runargs.setup, handle,
               description="Measure this node; with no BENCHMARK, run them all.",
               own_help=True)
