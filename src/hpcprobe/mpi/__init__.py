"""MPI out of process: the user's MPI found and fingerprinted, the test program built with its
mpicc, launchers by name, runs with timeouts. The Python process never initialises MPI."""
