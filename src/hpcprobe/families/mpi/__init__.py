"""families.mpi."""
