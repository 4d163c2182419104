"""families.latency."""
