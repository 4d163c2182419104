"""families.compute."""
