"""Cluster mode: a campaign measures every node (the node probe, one job per node) and every
link (one MPI job), stores it all under the campaign's tag, and judges each node and link
against its peers (`verdict`)."""
