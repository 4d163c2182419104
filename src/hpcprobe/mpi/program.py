"""What the MPI test program (hpb_mpi.c) measures: its tests and the unit and better direction
of each one's figure, as every user of the program reads them."""

from __future__ import annotations

PT2PT = ("latency", "bandwidth", "bibw")
COLLECTIVES = ("allreduce", "bcast", "alltoall", "barrier")
#: test -> (unit, better)
UNITS = {"latency": ("us", "lower"), "bandwidth": ("MB/s", "higher"),
         "bibw": ("MB/s", "higher"), "message_rate": ("messages/s", "higher"),
         **{c: ("us", "lower") for c in COLLECTIVES}, "halo": ("MB/s", "higher")}
