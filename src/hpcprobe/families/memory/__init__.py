"""families.memory."""
