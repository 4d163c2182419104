"""The iperf3 family's options, plan, measurement, and the parser of iperf3's JSON."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hpcprobe import tools
from hpcprobe.common.errors import MeasurementError, OptionError
from hpcprobe.measure import options
from hpcprobe.measure.family import Flag, MetricSpec, RunContext, option
from hpcprobe.probes import program
from hpcprobe.results.model import Metric
from hpcprobe.tools import VERSIONS, command, free_port

TOOL = tools.get("iperf3")
#: Per profile: seconds a repetition transmits.
SETTINGS = {"quick": 2, "default": 5, "thorough": 10}
#: a server that is not listening after this long did not start
START_S = 20.0
LOOPBACK = "127.0.0.1"
#: What a repetition gives: TCP the first two, UDP the first and the last two.
FIGURES = (MetricSpec("throughput", "Gbit/s"), MetricSpec("retransmits", "count", "lower"),
           MetricSpec("jitter", "ms", "lower"), MetricSpec("lost", "%", "lower"))


def _rate(text: str) -> str:
    """A bitrate as iperf3's -b takes it: a positive number, optionally K, M, G or T."""
    if not re.fullmatch(r"(\d+(\.\d*)?|\.\d+)[KMGT]?", text.strip(), re.IGNORECASE) \
            or not float(re.sub(r"[KMGTkmgt]$", "", text.strip())) > 0:
        raise argparse.ArgumentTypeError(f"{text}: give a bitrate a stream such as 800M or 10G "
                                         "(bits per second, K/M/G/T)")
    return text.strip().upper()


@dataclass(frozen=True)
class IperfOptions:
    server: str | None = option(Flag(
        "--iperf-server", "connect to an iperf3 server already running there (HOST or "
        "HOST:PORT; default: one started by hpcprobe)", parse=options.host_port,
        metavar="HOST"))
    peer: str | None = option(Flag(
        "--iperf-peer", "start the server on this node of the Slurm allocation (srun) and "
        "measure from here to it (default: this host's loopback)", metavar="NODE"))
    time_s: int | None = option(Flag(
        "--iperf-time", "whole seconds each repetition transmits (default: quick 2, default 5, "
        "thorough 10)", parse=options.at_least(1, "a number of seconds"), metavar="S"))
    streams: int = option(Flag("--iperf-streams", "parallel streams (default 1)",
                               parse=options.at_least(1, "a stream count"), metavar="N"), 1)
    reverse: bool = option(Flag("--iperf-reverse", "the server sends, the client receives",
                                switch=True), False)
    udp: str | None = option(Flag(
        "--iperf-udp", "UDP at this target bitrate a stream (iperf3's -b: 800M, 10G): the "
        "throughput received, the receiver's jitter and the share of datagrams lost "
        "(default: TCP)", parse=_rate, metavar="RATE"))
    repeat: int | None = option(options.REPEAT)
    timeout_s: float | None = option(options.TIMEOUT, note=options.ONE_REPETITION)


def _where(o: IperfOptions) -> str:
    return o.server or (f"{o.peer} (server started there)" if o.peer else "loopback")


def plan(ctx: RunContext, o: IperfOptions) -> list[str]:
    TOOL.require("iperf3")
    if o.server and o.peer:
        raise OptionError("<iperf_server> and <iperf_peer>: give one (a running server, or a node "
                          "to start one on)")
    if o.peer and not os.environ.get("SLURM_JOB_ID"):
        raise OptionError(f"<iperf_peer> {o.peer}: the server is started through srun inside a "
                          "Slurm allocation that holds both nodes (salloc, sbatch, or "
                          "`hpcprobe cluster run <pairs> iperf3`)")
    n = program.repetitions(ctx, o.repeat)
    return [f"iperf3 {'UDP at ' + o.udp + ' a stream' if o.udp else 'TCP'} to {_where(o)}, "
            f"{o.streams} stream(s), "
            f"{'reverse' if o.reverse else 'forward'}, {n} time(s)"]


def parse(doc: dict[str, Any]) -> dict[str, float]:
    """The figures of a client's `-J` document: Gbit/s received ("throughput"); over TCP the
    sender's retransmits where iperf3 counts them, over UDP the receiver's jitter in ms and the
    share of datagrams lost in %."""
    if doc.get("error"):
        raise MeasurementError(f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    received = end.get("sum_received") or end.get("sum") or {}
    if "bits_per_second" not in received:
        raise MeasurementError("iperf3's document has no throughput")
    out = {"throughput": received["bits_per_second"] / 1e9}
    if (doc.get("start") or {}).get("test_start", {}).get("protocol") == "UDP":
        if not received.get("packets"):
            raise MeasurementError("iperf3: no UDP datagram was received")
        out["jitter"] = float(received["jitter_ms"])
        out["lost"] = 100 * received["lost_packets"] / received["packets"]
    elif (end.get("sum_sent") or {}).get("retransmits") is not None:
        out["retransmits"] = float(end["sum_sent"]["retransmits"])
    return out


def _address(node: str) -> str:
    """The address Slurm knows the node by (its NodeAddr), else its name."""
    try:
        said = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return node
    m = re.search(r"\bNodeAddr=(\S+)", said)
    return m.group(1) if m else node


@contextmanager
def server(exe: str, o: IperfOptions) -> Iterator[tuple[str, int]]:
    """(host, port) of a server: the user's, or one started here or on the peer and stopped
    (by its recorded process) at the end, also on failure or Ctrl-C."""
    if o.server:
        name, _, given = o.server.partition(":")
        yield name, int(given) if given.isdigit() else 5201
        return
    port: int
    if o.peer:
        port = random.randint(20000, 40000)
        host = _address(o.peer)
        argv = ["srun", "--overlap", "--nodes", "1", "--ntasks", "1", "--nodelist", o.peer,
                exe, "-s", "-p", str(port)]
    else:
        host, port = LOOPBACK, free_port()
        argv = [exe, "-s", "-B", host, "-p", str(port)]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except FileNotFoundError:
        raise OptionError(f"iperf3 <iperf_peer>: {argv[0]} not found") from None
    try:
        yield host, port
    finally:
        proc.terminate()  # srun passes it to its step
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def once(exe: str, o: IperfOptions, ctx: RunContext, host: str, port: int, timeout: float
         ) -> dict[str, float]:
    seconds = o.time_s or SETTINGS[ctx.profile.name]
    argv = [exe, "-c", host, "-p", str(port), "-J", "-t", str(seconds), "-P", str(o.streams),
            *(["-R"] if o.reverse else []), *(["-u", "-b", o.udp] if o.udp else [])]
    deadline = time.monotonic() + (0 if o.server else START_S)
    while True:  # the server hpcprobe started may still be starting; the user's is up or not
        ran = command.run(argv, timeout=min(timeout, 2 * seconds + 60))
        text = ran.output[ran.output.find("{"):] if "{" in ran.output else ""
        try:
            doc = json.loads(text)
        except ValueError:
            raise MeasurementError(f"iperf3: {ran.failure()}") from None
        # refused while it starts; busy while it ends the repetition before (one test at a time)
        error = str(doc.get("error", ""))
        again = "unable to connect" in error or "server is busy" in error
        if not again or time.monotonic() > deadline:
            return parse(doc)
        time.sleep(0.2)


def run(ctx: RunContext, o: IperfOptions) -> None:
    plan(ctx, o)
    exe = TOOL.require("iperf3")
    VERSIONS.add(ctx.provenance, "iperf3", TOOL.version())
    timeout = o.timeout_s or program.DEFAULT_TIMEOUT_S
    with server(exe, o) as (host, port):
        reps = program.repeat(ctx, "iperf3", program.repetitions(ctx, o.repeat),
                              lambda i: once(exe, o, ctx, host, port, timeout))
    params: dict[str, Any] = {"streams": o.streams, "reverse": o.reverse}
    if o.udp:  # TCP's figures keep the parameters they were stored with before UDP came
        params.update({"protocol": "udp", "rate": o.udp})
    if o.peer:  # a link: sender to receiver
        me = socket.gethostname()
        sender, receiver = (o.peer, me) if o.reverse else (me, o.peer)
        params.update({"from": sender, "to": receiver})
    else:
        params["server"] = o.server or "loopback"
    for spec in FIGURES:  # a figure every repetition gave (iperf3 may not count retransmits)
        if all(spec.name in r for r in reps):
            ctx.metrics.append(Metric("iperf3", spec.name, spec.unit, dict(params),
                                      [r[spec.name] for r in reps], spec.better))
