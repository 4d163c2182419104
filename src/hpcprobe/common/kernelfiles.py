"""The kernel's small text files (sysfs, procfs) read whole: their text, stripped, or None
where the file is absent or unreadable."""

from __future__ import annotations

import os
from pathlib import Path


def read_text(path: str | os.PathLike[str]) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None
