"""hpcprobe: characterise what an HPC node or cluster really delivers."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hpcprobe")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0+unknown"

__all__ = ["__version__"]
