"""The command line: parses, dispatches, prints. No measurement logic lives here."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hpcprobe import __version__
from hpcprobe.bench import BENCHMARKS
from hpcprobe.common import files
from hpcprobe.common.cpulist import format_cpulist
from hpcprobe.common.errors import EXIT_FAILURE, EXIT_USAGE, HpcprobeError, UserError
from hpcprobe.common.units import parse_size
from hpcprobe.families.compute.bench import ComputeOptions
from hpcprobe.families.frequency.bench import FrequencyOptions
from hpcprobe.families.latency.bench import LatencyOptions
from hpcprobe.families.memory.bench import MemoryOptions
from hpcprobe.families.mpi.bench import MpiOptions
from hpcprobe.families.numa.bench import NumaOptions
from hpcprobe.machine import placement, topology
from hpcprobe.measure import profiles, runner
from hpcprobe.results import model as results
from hpcprobe.results.store import Store, default_path
from hpcprobe.views import terminal as summary


class _Formatter(argparse.HelpFormatter):
    """Help texts are shown as written: a `%` in one (\"CI target 2 %\") is text, not a format."""

    def _expand_help(self, action: argparse.Action) -> str:
        return action.help or ""


class _Parser(argparse.ArgumentParser):
    """argparse that ends a usage mistake with one line and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # "argument --np: --np '0': ..." when the type's message names its flag already
        message = re.sub(r"^argument ([^:]+): (?=\1 )", "", message)
        sys.stderr.write(f"hpcprobe: error: {message} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_USAGE)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--size {exc}") from None


def _int_list(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        vals = ()
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(
            f"--threads {text}: give a thread count of at least 1 or a comma-separated list, "
            "e.g. 1,2,4")
    return vals


def _at_least(flag: str, least: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= least, else a usage error naming the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{flag} {text}: give {what} (a whole number "
                                             f">= {least})")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"--timeout {text}: give a positive number of "
                                         "seconds")
    return value


def _int_pair(text: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pair {text!r}: give two CPUs, e.g. 0,1") from None
    return a, b


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _add_run_options(r: argparse.ArgumentParser) -> None:
    """Options of every command that measures: profile, store, JSON, tag, oversubscription."""
    prof = r.add_mutually_exclusive_group()
    prof.add_argument("--profile", default="default",
                      help="time and sample budget: " + "; ".join(
                          f"{p.name} ({p.description})" for p in profiles.PROFILES.values())
                      + " (default: default)")
    prof.add_argument("--quick", action="store_const", dest="profile", const="quick",
                      help="same as --profile quick")
    r.add_argument("--db", help=f"result store (default: {default_path()})")
    r.add_argument("--no-store", action="store_true", help="do not store the run")
    r.add_argument("--json", metavar="FILE", help="also write the run as a JSON document")
    r.add_argument("--tag", help="label the run, e.g. a BIOS or tuning configuration")
    r.add_argument("--oversubscribe", action="store_true",
                   help="allow more threads (or ranks) than the placement's CPUs")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="hpcprobe", description="Characterise what an HPC node really delivers.")
    p.add_argument("--version", action="version", version=f"hpcprobe {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="measure this node and store the run",
                       description="Measure this node; with no BENCHMARK, run them all.")
    r.add_argument("benchmarks", nargs="*", metavar="BENCHMARK",
                   help="benchmarks to run (" + ", ".join(BENCHMARKS) + ")")
    _add_run_options(r)
    r.add_argument("--report", metavar="FILE.html",
                   help="also write the HTML report of this run")
    r.add_argument("--isa", help="kernel variant: scalar, avx2, avx512 (default: the best this "
                                 "CPU supports; compute and frequency: every one it supports)")
    g = r.add_argument_group("narrowing the memory benchmark (likwid-bench style)")
    g.add_argument("--kernel", type=_name_list,
                   help="copy, scale, add, triad, load, store, sum (comma-separated)")
    g.add_argument("--stores", choices=("regular", "nt", "both"),
                   help="ordinary or non-temporal stores (default: both)")
    g.add_argument("--threads", type=_int_list,
                   help="thread count(s), e.g. 2 or 1,2,4 (also narrows compute and frequency)")
    g.add_argument("--size", type=_size,
                   help="total working set of all threads, e.g. 2GiB (default: 4x the LLC); "
                        "for latency, the ring size (default: a sweep)")
    g.add_argument("--placement", help=placement.PLACEMENT_HELP + " (also orders the cores of "
                   "compute and frequency)")
    cg = r.add_argument_group("narrowing the compute benchmark")
    cg.add_argument("--precision", choices=("dp", "sp", "both"),
                    help="peak kernels in double or single precision (default: both)")
    lg = r.add_argument_group("narrowing the latency benchmark")
    lg.add_argument("--cpu", type=_at_least("--cpu", 0, "an OS CPU number"),
                    help="the CPU that chases pointers (default: the first "
                                            "core)")
    ng = r.add_argument_group("narrowing the numa benchmark")
    ng.add_argument("--cpu-node", type=_at_least("--cpu-node", 0, "a NUMA domain's OS index"),
                    help="only threads in this NUMA domain (OS index)")
    ng.add_argument("--memory-node",
                    type=_at_least("--memory-node", 0, "a NUMA domain's OS index"),
                    help="only memory bound to this NUMA domain")
    lg.add_argument("--loaded", action="store_true",
                    help="also measure latency while the other cores stream (the default and "
                         "thorough profiles do)")
    lg.add_argument("--pair", type=_int_pair, metavar="A,B",
                    help="core-to-core latency of these two CPUs only")
    lg.add_argument("--all-pairs", action="store_true",
                    help="core-to-core latency for every pair of cores, not a sample")
    lg.add_argument("--pages", choices=("default", "huge", "both"),
                    help="page size of the rings: the default one, transparent huge pages, or "
                         "both (default: both)")

    m = sub.add_parser("mpi", help="MPI tests with OSU conventions, or `mpi info`",
                       description="MPI point-to-point, message rate, collectives and a 4-D halo "
                                   "exchange, built with and run by the MPI found (`mpi info` "
                                   "shows it).")
    m.add_argument("action", nargs="?", choices=("run", "info"), default="run",
                   help="run the tests (default) or show the MPI found, its fingerprint and "
                        "launchers")
    m.add_argument("--np", type=_at_least("--np", 1, "a rank count"),
                   help="ranks (default: one per CPU of the placement)")
    m.add_argument("--launcher", help="mpirun (Open MPI), mpiexec (MPICH, Intel MPI), srun "
                                      "(default: the one that goes with the MPI; srun inside a "
                                      "Slurm allocation)")
    m.add_argument("--placement", help=placement.PLACEMENT_HELP + " (rank i on CPU i)")
    m.add_argument("--tests", type=_name_list,
                   help="latency, bandwidth, bibw, message_rate, allreduce, bcast, alltoall, "
                        "barrier, halo (default: all)")
    m.add_argument("--pairs", type=_name_list,
                   help="also run point-to-point tests between two ranks of each kind: "
                        "intra-l3, intra-socket, inter-socket, inter-node")
    m.add_argument("--hosts", type=_name_list, help="hosts for multi-node runs, e.g. n1,n2")
    m.add_argument("--mpi", metavar="PREFIX", help="the MPI installation to use (its prefix; "
                                                   "default: $HPCPROBE_MPI, then PATH)")
    m.add_argument("--timeout", type=_seconds, metavar="S",
                   help="stop a test (one size) that makes no progress for S seconds "
                        "(default: 600; 30 in hpcprobe run)")
    m.add_argument("--max-size", type=_size, help="largest message (default: 4MiB; collectives "
                                                  "1MiB)")
    _add_run_options(m)

    c = sub.add_parser("compare", help="compare runs with statistics",
                       description="Compare runs against the first: what differs in their "
                                   "configuration, then every metric they share.")
    c.add_argument("runs", nargs="+", metavar="RUN",
                   help="run id, unique id prefix, tag, host (its latest run), 'latest', or a "
                        "result JSON file; the first is the baseline")
    c.add_argument("--db", help=f"result store (default: {default_path()})")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the comparison as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    c.add_argument("--limit", type=_at_least("--limit", 0, "a row count"), default=40,
                   help="rows in the text view (default 40, 0 for all; JSON and CSV have all)")

    rp = sub.add_parser("report", help="write an HTML report of runs, with plots",
                        description="One self-contained HTML file (opens without network) "
                                    "with the runs' tables and plots; with several runs, the "
                                    "comparison and overlaid curves.")
    rp.add_argument("runs", nargs="*", metavar="RUN", default=["latest"],
                    help="run id, prefix, tag, host, 'latest' (default) or a result JSON file")
    rp.add_argument("-o", "--output", required=True, metavar="FILE.html")
    rp.add_argument("--png", metavar="DIR", help="also write each plot as a PNG file there")
    rp.add_argument("--db", help=f"result store (default: {default_path()})")

    t = sub.add_parser("topology", help="show the machine's topology")
    t.add_argument("--input", metavar="FILE.xml", help="an hwloc XML file instead of this machine")
    t.add_argument("--json", action="store_true", help="print the model as JSON")

    pl = sub.add_parser("plan", help="show the CPUs a placement yields")
    pl.add_argument("--placement", required=True, help=placement.PLACEMENT_HELP)
    pl.add_argument("--threads", type=_at_least("--threads", 1, "a thread count"),
                    help="number of threads (default: all it yields)")
    pl.add_argument("--oversubscribe", action="store_true")
    pl.add_argument("--input", metavar="FILE.xml", help="an hwloc XML file instead of this machine")
    pl.add_argument("--json", action="store_true")

    ls = sub.add_parser("list", help="list stored runs")
    ls.add_argument("--db", help=f"result store (default: {default_path()})")
    ls.add_argument("--limit", type=_at_least("--limit", 1, "a run count"), default=50,
                    help="most recent runs to list (default 50)")
    ls.add_argument("--json", action="store_true")

    sh = sub.add_parser("show", help="show a stored run")
    sh.add_argument("run", help="run id, unique id prefix, tag, 'latest', or a result JSON file")
    sh.add_argument("--db", help=f"result store (default: {default_path()})")
    sh.add_argument("--json", action="store_true", help="print the run document")
    return p


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")


def _console() -> Any:
    from rich.console import Console

    # tables are wide; a pipe or a file gets them unwrapped
    return Console() if sys.stdout.isatty() else Console(width=160)


class _Bar:
    """A rich progress bar on stderr while measurements run."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(stderr=True)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                 transient=True, disable=not console.is_terminal)
        self.task: Any = None

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, label: str, total: int) -> None:
        self.task = self.progress.add_task(label, total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label)


def cmd_run(a: argparse.Namespace) -> int:
    prof = profiles.get(a.profile)
    benchmarks = runner.resolve_benchmarks(a.benchmarks)
    isa = runner.resolve_isa(a.isa)
    stores = None if a.stores in (None, "both") else (a.stores,)
    mem = MemoryOptions(kernels=a.kernel, stores=stores, threads=a.threads, size_bytes=a.size,
                        placement=a.placement)
    lat = LatencyOptions(size_bytes=a.size, cpu=a.cpu, all_pairs=a.all_pairs, pair=a.pair,
                         loaded=True if a.loaded else None,
                         pages=None if a.pages in (None, "both") else a.pages)
    numa = NumaOptions(cpu_node=a.cpu_node, memory_node=a.memory_node)
    compute = ComputeOptions(isa=a.isa, threads=a.threads, placement=a.placement,
                             precisions=None if a.precision in (None, "both") else (a.precision,))
    frequency = FrequencyOptions(threads=a.threads, placement=a.placement,
                                 loads=(isa,) if a.isa else None)
    chosen = set(benchmarks)
    mem_only = [f for f, v in (("--kernel", a.kernel), ("--stores", a.stores)) if v]
    if mem_only and "memory" not in chosen:
        raise UserError(f"{'/'.join(mem_only)} narrow the memory benchmark; add `memory` to the "
                        "benchmarks")
    shared = [f for f, v in (("--threads", a.threads), ("--placement", a.placement)) if v]
    if shared and not chosen & {"memory", "compute", "frequency"}:
        raise UserError(f"{'/'.join(shared)} narrow the memory, compute and frequency "
                        "benchmarks; add one of them to the benchmarks")
    if a.precision and "compute" not in chosen:
        raise UserError("--precision narrows the compute benchmark; add `compute` to the "
                        "benchmarks")
    numa_only = [f for f, v in (("--cpu-node", a.cpu_node), ("--memory-node", a.memory_node))
                 if v is not None]
    if numa_only and "numa" not in chosen:
        raise UserError(f"{'/'.join(numa_only)} narrow the numa benchmark; add `numa` to the "
                        "benchmarks")
    lat_only = [f for f, v in (("--cpu", a.cpu is not None), ("--pages", a.pages),
                               ("--all-pairs", a.all_pairs), ("--loaded", a.loaded),
                               ("--pair", a.pair)) if v]
    if lat_only and "latency" not in chosen:
        raise UserError(f"{'/'.join(lat_only)} narrow the latency benchmark; add `latency` to "
                        "the benchmarks")
    if a.json:
        files.check_writable(a.json, "--json")
    if a.report:
        files.check_writable(a.report, "--report")
    return _measure(a, prof, benchmarks, isa,
                    {"memory": mem, "latency": lat, "numa": numa, "compute": compute,
                     "frequency": frequency})


def _measure(a: argparse.Namespace, prof: profiles.Profile, benchmarks: list[str], isa: str,
             options: dict[str, Any]) -> int:
    """Run benchmarks, print the summary, store the run and write its JSON as asked."""
    store = None if a.no_store else Store.open(a.db)
    if store is not None:
        store.check_writable()
    topo = topology.discover()
    with _Bar() as bar:
        run = runner.execute(topo, prof, benchmarks, isa, options, bar,
                             oversubscribe=a.oversubscribe, tag=a.tag)
    console = _console()
    summary.render(run, console)
    if store is not None:
        store.save(run)
        console.print(f"Stored as run {run.run_id} in {store.path} "
                      f"({len(run.metrics)} metrics); `hpcprobe show {run.run_id}` reads it back.",
                      highlight=False)
        store.close()
    if a.json:
        results.write_json(run, a.json)
        console.print(f"Wrote {a.json}.", highlight=False)
    if getattr(a, "report", None):
        from hpcprobe.views import html as report

        n = report.write([run], a.report)
        console.print(f"Wrote the report {a.report} ({n} plots).", highlight=False)
    else:
        ref = run.run_id if store is not None else a.json
        console.print(f"Its report: `hpcprobe report {ref} -o report.html`; compare it with "
                      f"another run: `hpcprobe compare {ref} OTHER`." if ref else
                      "Not stored: add --report FILE.html or --json FILE to keep this run's "
                      "figures for a report.", highlight=False)
    return EXIT_FAILURE if run.errors else 0


def cmd_mpi(a: argparse.Namespace) -> int:
    if a.action == "info":
        return _mpi_info(a.mpi)
    prof = profiles.get(a.profile)
    opts = MpiOptions(np=a.np, launcher=a.launcher, placement=a.placement, tests=a.tests,
                      pairs=a.pairs, hosts=a.hosts, mpi_prefix=a.mpi, timeout_s=a.timeout,
                      max_size=a.max_size, full=prof.name != "quick")
    if a.json:
        files.check_writable(a.json, "--json")
    return _measure(a, prof, ["mpi"], runner.resolve_isa(None), {"mpi": opts})


def _mpi_info(prefix: str | None) -> int:
    from hpcprobe.mpi import build, find, launchers

    mpi = find.find(prefix)
    exe = build.program(mpi)
    print(f"MPI:          {mpi.implementation} {mpi.version} (MPI standard {mpi.standard})")
    print(f"prefix:       {mpi.prefix}")
    print(f"mpicc:        {mpi.mpicc}")
    print(f"wrapper:      {mpi.wrapper_flags}")
    print(f"fingerprint:  {mpi.fingerprint}")
    print(f"test program: {exe} ({'built' if exe.is_file() else 'built on first use'})")
    print("launchers:")
    for name, path in launchers.available(mpi).items():
        ln = launchers.LAUNCHERS[name]
        print(f"  {name:8s} {path or 'not usable here'}  ({ln.description})")
    return 0


def cmd_topology(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    if a.json:
        _print_json(topo.to_dict())
    else:
        print(topology.render(topo))
    return 0


def cmd_plan(a: argparse.Namespace) -> int:
    topo = topology.load(a.input)
    pl = placement.plan(topo, a.placement, a.threads, a.oversubscribe)
    if a.json:
        _print_json(pl.to_dict())
    else:
        print(f"placement {pl.placement}: {len(pl.cpus)} thread(s) on CPUs "
              f"{','.join(map(str, pl.cpus))} ({format_cpulist(pl.cpus)})"
              + (" [oversubscribed]" if pl.oversubscribed else ""))
        for i, cpu in enumerate(pl.cpus):
            pu = topo.pu(cpu)
            print(f"  thread {i:4d} -> CPU {cpu:4d}  package {pu.package}  NUMA {pu.numa}  "
                  f"L3 {'-' if pu.l3 is None else pu.l3}  core {pu.core}")
    return 0


def cmd_list(a: argparse.Namespace) -> int:
    with Store.open(a.db, create=False) as st:
        rows = st.runs(a.limit)
    if a.json:
        _print_json([r.__dict__ for r in rows])
        return 0
    from rich.table import Table

    t = Table(title=f"Runs in {a.db or default_path()}", title_justify="left")
    for col in ("run", "created", "host", "tag", "profile", "benchmarks", "metrics", "seconds"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.run_id, r.created, r.host, r.tag or "", r.profile, ",".join(r.benchmarks),
                  str(r.metrics), f"{r.duration_s:.1f}")
    _console().print(t)
    return 0


def _load_runs(refs: Sequence[str], db: str | None) -> list[results.Run]:
    """Runs named by result JSON file, or by id, prefix, tag, host or 'latest' in the store."""
    out = []
    store: Store | None = None
    try:
        for ref in refs:
            if ref.endswith(".json") and Path(ref).exists():
                out.append(results.read_json(ref))
                continue
            store = store or Store.open(db, create=False)
            out.append(store.load(ref))
    finally:
        if store is not None:
            store.close()
    return out


def cmd_report(a: argparse.Namespace) -> int:
    from hpcprobe.views import html as report

    files.check_writable(a.output, "-o")
    runs = _load_runs(a.runs, a.db)
    n = report.write(runs, a.output, a.png)
    print(f"Wrote {a.output} ({n} plots" + (f", PNGs in {a.png}" if a.png else "") + ").")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    from hpcprobe.analysis import compare

    c = compare.compare(_load_runs(a.runs, a.db))
    if a.json:
        _print_json(compare.to_json(c))
    elif a.csv:
        import csv

        w = csv.DictWriter(sys.stdout, fieldnames=compare.CSV_COLUMNS, extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for r in c.rows:
            w.writerow(r.to_dict())
    else:
        summary.render_comparison(c, _console(), a.limit if a.limit > 0 else None)
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    [run] = _load_runs([a.run], a.db)
    if a.json:
        _print_json(run.to_dict())
    else:
        summary.render(run, _console())
    return 0


COMMANDS = {"run": cmd_run, "mpi": cmd_mpi, "compare": cmd_compare, "report": cmd_report,
            "topology": cmd_topology, "plan": cmd_plan, "list": cmd_list, "show": cmd_show}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HpcprobeError as exc:
        sys.stderr.write(f"hpcprobe: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("hpcprobe: interrupted; nothing of this run was stored\n")
        return 130
    except BrokenPipeError:  # `hpcprobe compare ... --csv | head`: the reader has enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
