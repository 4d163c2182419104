#!/usr/bin/env python3
"""Write what is generated from hpcprobe's declarations: the result schema the package ships
and validates every document against, and docs/figures.md. `--check` writes nothing and exits
1 where a file is not what the declarations make (the suite runs it so)."""

from __future__ import annotations

import sys
from pathlib import Path

from hpcprobe import registry

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path, text in registry.generated(ROOT).items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not check:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if check and stale:
        print("not what the declarations make (run scripts/generate.py): "
              + ", ".join(str(p.relative_to(ROOT)) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
