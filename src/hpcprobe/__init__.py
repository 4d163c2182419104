"""hpcprobe: characterise what an HPC node or cluster really delivers."""

from __future__ import annotations

from functools import cache

__all__ = ["__version__"]


@cache
def _version() -> str:
    """The installed release's version, from its own metadata file beside the package (what
    importlib.metadata reads, without the 25 modules it imports: email, zipfile, csv; a
    prolog's check opened their files at every job start)."""
    from pathlib import Path

    for meta in Path(__file__).resolve().parent.parent.glob("hpcprobe-*.dist-info/METADATA"):
        with meta.open(encoding="utf-8") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():  # the headers end
                    break
    return "0+unknown"  # running from a source tree without an install


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'hpcprobe' has no attribute {name!r}")
