"""iperf3, the field's TCP and UDP throughput test, as a family: a server started and stopped
by hpcprobe (on this host's loopback, or on a peer node of the Slurm allocation through srun) or
one already running, the client's `-J` document parsed: the throughput received, and TCP's
retransmits or UDP's jitter and datagrams lost (`--iperf-udp RATE`), each repetition one sample.
`hpcprobe cluster run --pairs iperf3` runs it between the nodes' pairs as link figures."""

from __future__ import annotations

from hpcprobe.families.iperf3 import bench, views
from hpcprobe.measure.family import Family, Metrics, Peer

FAMILY = Family(
    "iperf3", "TCP or UDP throughput, retransmits, jitter, loss with iperf3 (loopback, a peer, "
    "a server)", bench.IperfOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    metrics=Metrics(bench.FIGURES), views=(views.tables,), capabilities=(Peer("--iperf-peer"),))
