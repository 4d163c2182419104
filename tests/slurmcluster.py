"""A real Slurm cluster on this machine, for the tests: slurmctld in a hub network namespace
holding a bridge, and one slurmd per node in a network and UTS namespace of its own (its own
hostname and address on the bridge), munge with a private key and socket, all in a temporary
directory. The test subnet never leaves the machine: a blackhole route for it is added in the
root namespace before anything else. Everything is torn down even when a test fails: daemons by
their recorded PIDs, then the namespaces, then the route. Needs root, iproute2, util-linux and
Debian's slurm-wlm and munge."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: The test modules that start a cluster: make test's first pass runs them on one worker, one
#: test after another (tests/conftest.py), as a cluster's namespaces and subnet are the
#: machine's one.
MODULES = ("test_check_slurm.py", "test_cluster_campaign.py", "test_slurm_cluster.py")
#: The test subnet (RFC 1918), blackholed in the root namespace while a cluster lives.
SUBNET = "10.199.77"
HUB_ADDR = f"{SUBNET}.1"
TOOLS = ("ip", "tc", "nsenter", "unshare", "slurmctld", "slurmd", "munged", "srun", "sinfo")


def missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, slurmd)"
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent:
        return f"{', '.join(absent)} not installed (Debian: slurm-wlm, munge)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


@dataclass
class Cluster:
    root: Path
    hub: str  # the hub's network namespace
    nodes: dict[str, str]  # node name -> its network namespace
    conf: Path
    pids: dict[str, int] = field(default_factory=dict)  # daemon -> PID

    @property
    def local(self) -> Path:
        """A node's own disk, as its daemons and jobs see it (empty here, in the root
        namespace; each node's is disk/NODE)."""
        return self.root / "local"

    def disk(self, node: str) -> Path:
        """What `node` holds on its own disk, seen from here."""
        return self.root / "disk" / node

    def client(self, *argv: str, timeout: float = 120,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """A Slurm client (or any command) run in the hub namespace with this cluster's
        configuration."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.hub}", *argv],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "SLURM_CONF": str(self.conf), **(env or {})})

    def slow(self, node: str, share: float = 0.2) -> AbstractContextManager[None]:
        """A slow node: its slurmd, and every job it starts, limited to `share` of a CPU."""
        return cpu_quota(self.pids[f"slurmd-{node}"], share)

    @contextmanager
    def shaped(self, node: str, rate: str = "200mbit") -> Iterator[None]:
        """A slow link: a token bucket on the bridge port towards the node."""
        port = ("tc", "-n", self.hub, "qdisc")
        _run(*port, "add", "dev", f"v{node}", "root", "tbf", "rate", rate, "burst", "64kb",
             "latency", "500ms")
        try:
            yield
        finally:
            _run(*port, "del", "dev", f"v{node}", "root", check=False)

    def kill_slurmd(self, node: str) -> None:
        """The node's slurmd killed (its jobs' processes live on, as on a real node)."""
        os.kill(self.pids[f"slurmd-{node}"], signal.SIGKILL)

    def start_slurmd(self, node: str) -> None:
        """The node's slurmd started (again)."""
        _daemon(self, f"slurmd-{node}", self.nodes[node], node,
                ["slurmd", "-D", "-N", node, "-f", str(self.conf)])

    def wait_idle(self, timeout: float = 30) -> None:
        """Until every node answers (sinfo shows them idle)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.client("sinfo", "-h", "-N", "-o", "%N %t")
            states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm nodes not idle after {timeout} s: {states or r.stderr}"
                                   f"; logs in {self.root}")
            time.sleep(0.2)


@contextmanager
def cpu_quota(pid: int, share: float, period_us: int = 10000) -> Iterator[None]:
    """The process `pid` (and every child it forks from now on) limited to `share` of one CPU:
    a cgroup with a CPU quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us), removed afterwards.
    A short period, so that even millisecond samples see the limit."""
    quota = max(1000, int(share * period_us))
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.exists() and "cpu" in v2.read_text().split():
        root = Path("/sys/fs/cgroup")
        limits = {"cpu.max": f"{quota} {period_us}"}
    else:
        root = Path("/sys/fs/cgroup/cpu")
        limits = {"cpu.cfs_period_us": str(period_us), "cpu.cfs_quota_us": str(quota)}
    group = root / f"hpcprobe-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        for name, value in limits.items():
            (group / name).write_text(value)
        (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for _ in range(50):  # every process of the group back to the root, then remove it
            for task in (group / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(task)
                except OSError:
                    pass  # exited meanwhile
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def _daemon(cluster: Cluster, name: str, netns: str, hostname: str, argv: list[str],
            local: Path | None = None) -> None:
    """Start a daemon in `netns` with its own UTS and mount namespace (hostname, /etc/hosts;
    `local` seen at `cluster.local`, the node's own disk), and record its PID. Not `ip netns
    exec`: it remounts /sys and slurmd then finds no cgroups."""
    own = f"mount --bind {local} {cluster.local} && " if local else ""
    script = (f"hostname {hostname} && mount --bind {cluster.root / 'hosts'} /etc/hosts && "
              f"{own}exec {' '.join(argv)}")
    p = subprocess.Popen(["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts",
                          "--mount", "--propagation", "private", "sh", "-c", script],
                         stdout=subprocess.DEVNULL, stderr=open(cluster.root / f"{name}.err", "w"),
                         start_new_session=True)
    cluster.pids[name] = p.pid


def _stop(pid: int) -> None:
    """Stop one recorded daemon: SIGTERM, then SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.05)


def _stop_namespaces(c: Cluster) -> None:
    """Whatever still runs in the nodes' namespaces (the steps of a killed slurmd): found by
    the namespaces this cluster created, never by name."""
    for ns in c.nodes.values():
        r = _run("ip", "netns", "pids", ns, check=False)
        for pid in r.stdout.split():
            if int(pid) not in c.pids.values():
                _stop(int(pid))


#: bf_interval=1: the backfill pass every second starts a job submitted to an idle node within
#: half a second; with Slurm's default, each of a campaign's node jobs here waited 2.5 s to start.
SLURM_CONF = """ClusterName=hpbtest
SlurmctldHost=hub({hub_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
TmpFS={root}/tmp/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
EnforcePartLimits=ALL
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SlurmdTimeout=30
InactiveLimit=0
KillWait=2
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes={names} MaxTime=1 State=UP
"""


@contextmanager
def cluster(n: int = 4, cpus: int = 2, extra: str = "") -> Iterator[Cluster]:
    """A running cluster of n nodes (n1..nN), each with `cpus` CPUs, until the block ends;
    `extra`: more slurm.conf lines."""
    tag = uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="hpcprobe-slurm-"))
    names = [f"n{i + 1}" for i in range(n)]
    c = Cluster(root, f"hpb-{tag}-hub", {nm: f"hpb-{tag}-{nm}" for nm in names},
                root / "slurm.conf")
    with ExitStack() as undo:
        undo.callback(shutil.rmtree, root, True)
        # first of all: nothing sent to the test subnet may leave this machine
        _run("ip", "route", "add", "blackhole", f"{SUBNET}.0/24")
        undo.callback(_run, "ip", "route", "del", "blackhole", f"{SUBNET}.0/24", check=False)
        for ns in (c.hub, *c.nodes.values()):
            _run("ip", "netns", "add", ns)
            undo.callback(_run, "ip", "netns", "del", ns, check=False)
        hub = ("ip", "-n", c.hub)
        _run(*hub, "link", "set", "lo", "up")
        _run(*hub, "link", "add", "br0", "type", "bridge")
        _run(*hub, "addr", "add", f"{HUB_ADDR}/24", "dev", "br0")
        _run(*hub, "link", "set", "br0", "up")
        hosts = ["127.0.0.1 localhost", f"{HUB_ADDR} hub"]
        for i, (nm, ns) in enumerate(c.nodes.items()):
            addr = f"{SUBNET}.{11 + i}"
            hosts.append(f"{addr} {nm}")
            _run(*hub, "link", "add", f"v{nm}", "type", "veth", "peer", "name", "eth0",
                 "netns", ns)
            _run(*hub, "link", "set", f"v{nm}", "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            for d in ("spool", "tmp", "disk"):
                (root / d / nm).mkdir(parents=True)
        (root / "hosts").write_text("\n".join(hosts) + "\n")
        c.local.mkdir()
        (root / "state").mkdir()
        nodes = "\n".join(f"NodeName={nm} NodeAddr={SUBNET}.{11 + i} CPUs={cpus} State=UNKNOWN"
                          for i, nm in enumerate(names))
        c.conf.write_text(SLURM_CONF.format(root=root, hub_addr=HUB_ADDR, nodes=nodes,
                                            names=",".join(names)) + extra)
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        munge = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}",
             f"--socket={root}/munge.socket", f"--pid-file={root}/munged.pid",
             f"--log-file={root}/munged.log", f"--seed-file={root}/munge.seed"],
            stdout=subprocess.DEVNULL, stderr=open(root / "munged.err", "w"),
            start_new_session=True)
        c.pids["munged"] = munge.pid
        undo.callback(lambda: [_stop(pid) for pid in reversed(list(c.pids.values()))])
        undo.callback(_stop_namespaces, c)
        deadline = time.monotonic() + 10
        while not (root / "munge.socket").exists():
            if time.monotonic() > deadline or munge.poll() is not None:
                raise RuntimeError(f"munged did not start; see {root}/munged.err")
            time.sleep(0.05)
        _daemon(c, "slurmctld", c.hub, "hub", ["slurmctld", "-D", "-i", "-f", str(c.conf)])
        for nm, ns in c.nodes.items():
            _daemon(c, f"slurmd-{nm}", ns, nm, ["slurmd", "-D", "-N", nm, "-f", str(c.conf)],
                    local=root / "disk" / nm)
        undo.callback(lambda: c.client("scancel", "--full", "--partition=test", timeout=30))
        c.wait_idle()
        yield c
