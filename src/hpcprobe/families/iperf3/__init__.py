"""iperf3, the field's TCP throughput test, as a family: a server started and stopped by
hpcprobe (on this host's loopback, or on a peer node of the Slurm allocation through srun) or
one already running, the client's `-J` document parsed: throughput received and TCP
retransmits, each repetition one sample. `hpcprobe cluster run --iperf3` runs it between the
nodes' pairs as link figures."""

from __future__ import annotations

from hpcprobe.families.iperf3 import bench, views
from hpcprobe.measure.family import Family, MetricSpec

FAMILY = Family(
    "iperf3", "TCP throughput and retransmits with iperf3 (loopback, a peer node, a server)",
    bench.IperfOptions, bench.run, plan=bench.plan, default=False,
    settings=bench.SETTINGS,
    metrics=(MetricSpec("throughput", "Gbit/s"), MetricSpec("retransmits", "count", "lower")),
    views=(views.tables,), peer="--iperf-peer")
