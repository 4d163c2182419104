"""families.frequency."""
