#!/usr/bin/env python3
"""hpcprobe for a node image's prolog and HealthCheckProgram, in one file (`make pyz`): a
directory holding `hpcprobe.pyz` (hpcprobe's own Python modules, compiled, and its data, in
one zip Python imports from), the native core beside it (a shared library cannot be loaded
from a zip) and its metadata (the release `--version` prints).

`check --state-only` then opens one file of hpcprobe's where the installed package opens 90:
with the standard library's, 150 files or fewer (benchmarks/startup.py), and it needs no other
package, so any Python of the version it was made with runs it (`python3 -I DIR/hpcprobe.pyz
check --state-only`). The commands that measure need hpcprobe's Python packages: run the
archive with the environment's own interpreter (`.venv/bin/python DIR/hpcprobe.pyz run`).

Made from the install of the interpreter that runs this script (an editable install is
refused: its files are the checkout's). Each module is kept compiled (checked against no
timestamp: a zip's are not the source's) and as source, which an interpreter of another
version compiles instead.

Usage: scripts/pyz.py DIR (a new or empty directory, or an earlier one of these: replaced)."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import py_compile
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from hpcprobe.cluster import bundle

MAIN = "import sys\n\nfrom hpcprobe.console import main\n\nsys.exit(main())\n"


def _package() -> tuple[Path, md.Distribution]:
    spec = importlib.util.find_spec("hpcprobe")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("hpcprobe is not installed for this interpreter (make setup)")
    dist = md.distribution("hpcprobe")
    package = Path(next(iter(spec.submodule_search_locations)))
    if package.parent.name != "site-packages" or bundle.editable(dist):
        sys.exit(f"hpcprobe is installed from its sources ({package}): make setup installs "
                 "the copy this is made from")
    return package, dist


def _replaceable(out: Path) -> None:
    """`out` is made or replaced only where it is new, empty or an earlier one of these: never
    a directory of other files (`make pyz PYZ=/opt`)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        sys.exit(f"{out}: not a directory; name a new one for the archive")
    if out.is_dir() and any(out.iterdir()) and not (out / "hpcprobe.pyz").is_file():
        sys.exit(f"{out}: holds other files, which would be replaced; name a new directory")


def make(out: Path) -> Path:
    """The directory `out` (replaced) with the archive, the native core and the metadata."""
    package, dist = _package()
    _replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".hpcprobe-pyz-", dir=out.parent))
    try:
        with zipfile.ZipFile(staging / "hpcprobe.pyz", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("__main__.py", MAIN)
            for path in sorted(package.rglob("*")):
                rel = path.relative_to(package.parent)
                if path.is_dir() or "__pycache__" in rel.parts or path.suffix == ".pyc":
                    continue
                if path.suffix == ".so":
                    shutil.copy2(path, staging / path.name)
                    continue
                z.write(path, str(rel))
                if path.suffix == ".py":
                    pyc = staging / "module.pyc"
                    py_compile.compile(str(path), str(pyc), str(rel), doraise=True,
                                       invalidation_mode=py_compile.PycInvalidationMode
                                       .UNCHECKED_HASH)
                    z.write(pyc, str(rel.with_suffix(".pyc")))
        (staging / "module.pyc").unlink(missing_ok=True)
        meta = staging / f"hpcprobe-{dist.version}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(dist.read_text("METADATA") or "")
        staging.chmod(0o755)  # mkdtemp's is its user's alone: the image's users run it too
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit(__doc__.rstrip().splitlines()[-1])
    out = make(Path(sys.argv[1]).absolute())  # a link is refused, not followed
    size = (out / "hpcprobe.pyz").stat().st_size
    print(f"{out}: hpcprobe.pyz ({size / 2**20:.1f} MiB), its native core and metadata; "
          f"run: python3 -I {out / 'hpcprobe.pyz'} check --state-only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
