"""The `hpcprobe` command: the CLI, or one line where it cannot load at all (a missing native
core, one of another API version, or a missing Python package: an install that needs
repeating)."""

from __future__ import annotations

import sys

from hpcprobe.common.errors import ERROR_PREFIX, EXIT_FAILURE, HpcprobeError


def main() -> int:
    if sys.argv[1:] == ["--version"]:  # asked on every node of a fleet: nothing else loaded
        from hpcprobe import native

        try:
            print(native.version_line())
        except HpcprobeError as exc:
            sys.stderr.write(f"{ERROR_PREFIX}{exc}\n")
            return exc.exit_code
        return 0
    try:
        from hpcprobe import cli  # loads the native core, whose tables the families read
    except HpcprobeError as exc:
        sys.stderr.write(f"{ERROR_PREFIX}{exc}\n")
        return exc.exit_code
    except ImportError as exc:
        return _reinstall(exc)
    try:
        return cli.main()
    except ImportError as exc:  # a command's modules are imported when it runs
        return _reinstall(exc)


def _reinstall(exc: ImportError) -> int:
    """A package the install lacks: one line, and how to mend it (the node image's archive
    holds hpcprobe alone: the interpreter running it lacks the packages its command needs)."""
    import hpcprobe

    mend = ("run the archive with the interpreter of hpcprobe's environment (make pyz)"
            if hpcprobe.archive() else "reinstall hpcprobe (make setup)")
    sys.stderr.write(f"{ERROR_PREFIX}{exc}; {mend}\n")
    return EXIT_FAILURE
