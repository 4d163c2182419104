"""Results: the run document (model, schema) and the result store with its backends."""

# the backends register themselves by URL scheme (one line per backend)
from hpcprobe.results import postgres, sqlite  # noqa: F401
