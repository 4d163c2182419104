"""Measurement primitives on the native core that several families share."""
