"""hpcprobe: characterise what an HPC node or cluster really delivers."""

from __future__ import annotations

from functools import cache

__all__ = ["__version__"]


@cache
def _version() -> str:
    # importlib.metadata costs 50 ms of every start (email, zipfile, csv): read when asked
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hpcprobe")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'hpcprobe' has no attribute {name!r}")
