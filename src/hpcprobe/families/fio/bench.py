"""The fio family's options, plan, measurement and the parser of fio's JSON."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from hpcprobe import tools
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.common.units import format_bytes
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, RunContext, option
from hpcprobe.probes import program
from hpcprobe.results.model import Metric
from hpcprobe.tools import VERSIONS, command

TOOL = tools.get("fio")
#: completion-latency percentiles stored, as fio names them
PERCENTILES = ("50.000000", "99.000000", "99.900000")
#: Per profile: seconds a job runs (time based).
SETTINGS = {"quick": 2.0, "default": 5.0, "thorough": 20.0}


@dataclass(frozen=True)
class FioOptions:
    directory: str | None = option(Flag(
        "--fio-dir", "where fio's files go (a private directory is made there and removed; "
        "default: /var/tmp)", metavar="DIR"))
    rw: str = option(Flag("--fio-rw", "the I/O pattern (default randread)", choices=(
        "read", "write", "randread", "randwrite", "randrw")), "randread")
    bs: int = option(Flag("--fio-bs", "block size, e.g. 4KiB (default) or 1MiB",
                          parse=options.size), 4096)
    size: int = option(Flag("--fio-size", "file size per job (default 256MiB)",
                            parse=options.size), 256 << 20)
    iodepth: int = option(Flag("--fio-iodepth", "I/Os in flight per job (default 16)",
                               parse=options.at_least(1, "a queue depth"), metavar="N"), 16)
    jobs: int = option(Flag("--fio-jobs", "parallel jobs, reported together (default 1)",
                            parse=options.at_least(1, "a job count"), metavar="N"), 1)
    runtime_s: float | None = option(Flag(
        "--fio-runtime", "seconds each repetition runs (default: quick 2, default 5, thorough "
        "20)", parse=options.seconds, metavar="S"))
    engine: str = option(Flag("--fio-engine", "fio's ioengine (default libaio)",
                              metavar="ENGINE"), "libaio")
    buffered: bool = option(Flag("--fio-buffered", "through the page cache (default: direct "
                                 "I/O, the device's figure)", switch=True), False)
    jobfile: str | None = option(Flag(
        "--fio-jobfile", "run this fio job file instead (its jobs, as it defines them)",
        metavar="FILE"))
    repeat: int | None = option(options.REPEAT)
    timeout_s: float | None = option(options.TIMEOUT, note=options.ONE_REPETITION)


def _directory(o: FioOptions) -> str:
    return o.directory or "/var/tmp"


def argv(ctx: RunContext, o: FioOptions, where: str) -> list[str]:
    exe = TOOL.require("fio")
    if o.jobfile:
        return [exe, "--output-format=json", o.jobfile]
    runtime = o.runtime_s or SETTINGS[ctx.profile.name]
    return [exe, "--name=hpcprobe", f"--directory={where}", f"--rw={o.rw}", f"--bs={o.bs}",
            f"--size={o.size}", f"--iodepth={o.iodepth}", f"--numjobs={o.jobs}",
            f"--ioengine={o.engine}", f"--direct={0 if o.buffered else 1}", "--time_based",
            f"--runtime={runtime:g}", "--group_reporting", "--output-format=json"]


def plan(ctx: RunContext, o: FioOptions) -> list[str]:
    TOOL.require("fio")
    n = program.repetitions(ctx, o.repeat)
    if o.jobfile:
        if not os.path.isfile(o.jobfile):
            raise OptionError(f"<fio_jobfile> {o.jobfile}: no such file")
        return [f"fio job file {o.jobfile}, {n} time(s)"]
    where = _directory(o)
    if not os.path.isdir(where):
        raise OptionError(f"<fio_dir> {where}: no such directory")
    free = shutil.disk_usage(where).free
    if o.size * o.jobs > free:
        raise OptionError(f"<fio_size> {format_bytes(o.size)} x {o.jobs} job(s) does not fit in "
                          f"{where} ({format_bytes(free)} free)")
    return [f"fio {o.rw} bs {format_bytes(o.bs)}, {format_bytes(o.size)} a job, iodepth "
            f"{o.iodepth}, {o.jobs} job(s), {o.engine}, "
            f"{'buffered' if o.buffered else 'direct'} in {where}, {n} time(s)"]


def parse(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str, float, str]]:
    """(params, metric, value, unit) of every job and direction that did I/O."""
    out = []
    for job in doc.get("jobs", []):
        if job.get("error"):
            raise MeasurementError(f"fio job {job.get('jobname')}: error {job['error']}")
        opts = job.get("job options", {})
        for direction in ("read", "write"):
            d = job.get(direction) or {}
            if not d.get("total_ios"):
                continue
            params = {"job": job.get("jobname"), "direction": direction,
                      **{k: opts[k] for k in ("rw", "bs", "iodepth", "numjobs", "ioengine")
                         if k in opts}}
            out.append((params, "iops", float(d["iops"]), "IOPS"))
            out.append((params, "bandwidth", d["bw_bytes"] / 1e6, "MB/s"))
            pct = (d.get("clat_ns") or {}).get("percentile") or {}
            for p in PERCENTILES:
                if p in pct:
                    out.append(({**params, "percentile": float(p)}, "clat", pct[p] / 1e3, "us"))
    if not out:
        raise MeasurementError("fio reported no I/O")
    return out


def run(ctx: RunContext, o: FioOptions) -> None:
    plan(ctx, o)
    VERSIONS.add(ctx.provenance, "fio", TOOL.version())
    timeout = o.timeout_s or program.DEFAULT_TIMEOUT_S
    where = tempfile.mkdtemp(prefix="hpcprobe-fio-", dir=_directory(o)) if not o.jobfile \
        else None

    def once(i: int) -> list[tuple[dict[str, Any], str, float, str]]:
        ran = command.run(argv(ctx, o, where or ""), where, timeout=timeout)
        if not ran.ok:
            raise MeasurementError(f"fio: {ran.failure()}")
        start = ran.output.find("{")  # fio may print notes before its document
        try:
            return parse(json.loads(ran.output[start:]))
        except (ValueError, KeyError, TypeError) as exc:
            raise MeasurementError(f"fio: its JSON output could not be read ({exc}); its last "
                                   f"lines: {ran.tail()}") from None

    try:
        reps = program.repeat(ctx, "fio", program.repetitions(ctx, o.repeat), once)
    finally:
        if where:
            shutil.rmtree(where, ignore_errors=True)
    metrics: dict[str, Metric] = {}
    for rep in reps:
        for params, name, value, unit in rep:
            key = json.dumps([name, params], sort_keys=True)
            better = "lower" if name == "clat" else "higher"
            metrics.setdefault(key, Metric("fio", name, unit, params, [], better)
                               ).samples.append(value)
    ctx.metrics.extend(metrics.values())
