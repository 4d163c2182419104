"""hpcprobe: characterise what an HPC node or cluster really delivers."""

from __future__ import annotations

from functools import cache

__all__ = ["__version__", "archive"]


def archive() -> str | None:
    """The zip hpcprobe runs from (scripts/pyz.py: the node image's), None where it runs from
    a directory. The native core and the metadata lie beside it."""
    return getattr(globals()["__loader__"], "archive", None)  # zipimport's names its file


@cache
def _version() -> str:
    """The installed release's version, from its own metadata file beside the package or its
    archive (what importlib.metadata reads, without the 25 modules it imports: email, zipfile,
    csv; a prolog's check opened their files at every job start)."""
    from pathlib import Path

    zipped = archive()
    beside = Path(zipped).parent if zipped else Path(__file__).resolve().parent.parent
    for meta in beside.glob("hpcprobe-*.dist-info/METADATA"):
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
