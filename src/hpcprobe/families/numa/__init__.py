"""families.numa."""
