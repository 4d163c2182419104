"""Results: the run document (model, schema) and the result store with its backends."""

from hpcprobe.results import sqlite  # noqa: F401  (registers the SQLite backend)
