"""families.roofline."""
