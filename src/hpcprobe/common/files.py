"""Files the user names: outputs written atomically (a temporary file renamed into place, so a
full disk or a crash never leaves half a file), with the permissions the umask gives a new file
(`private` ones, which may hold the environment, readable by their owner and group at most),
through symbolic links (the file a link names is replaced, never the link) but never through a
link another user planted in a shared directory (the kernel's `protected_symlinks` rule: a link
in a sticky, world-writable directory is followed only where its owner is the caller or the
directory's); a device, FIFO or socket (`-o /dev/stdout`, a named pipe) is written in place:
there is no file to replace, and a rename would put a regular file where the device node was;
`-` is standard output. Every output is proven writable (a file made and removed beside it)
before any work is done. Inputs read whole, one that cannot be read (or is not text) said in
one line."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from hpcprobe.common.errors import UserError


def read_input(path: str | os.PathLike[str], label: str | None = None, hint: str = "") -> str:
    """The text of a file the user named; unreadable, a user error naming it (as `label`,
    default its path) and why, then the hint."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise unreadable(path, exc, label, hint) from None
    except UnicodeDecodeError:
        raise not_text(path, label, hint) from None


def read_input_bytes(path: str | os.PathLike[str], label: str | None = None) -> bytes:
    """`read_input`'s bytes, not decoded (a parser that reads UTF-8 itself: a fleet's driver
    reads a thousand node documents)."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise unreadable(path, exc, label) from None


def unreadable(path: str | os.PathLike[str], exc: OSError, label: str | None = None,
               hint: str = "") -> UserError:
    """The error of an input that cannot be read."""
    return UserError(f"{label or path}: cannot read it ({exc.strerror})"
                     + (f"; {hint}" if hint else ""))


def not_text(path: str | os.PathLike[str], label: str | None = None, hint: str = ""
             ) -> UserError:
    """The error of an input that is not UTF-8 text."""
    return UserError(f"{label or path}: not text (not UTF-8)" + (f"; {hint}" if hint else ""))


def planted(path: Path) -> int | None:
    """The owner of a symbolic link on `path` (the file, or a directory on the way to it) that
    the kernel's `protected_symlinks` rule would not let this process follow: in a sticky,
    world-writable directory, owned by neither this process's user nor the directory's; None
    where there is no such link."""
    full = Path(os.path.abspath(path))
    for step in (*reversed(full.parents[:-1]), full):
        try:
            link = os.lstat(step)
            where = os.stat(step.parent)
        except OSError:
            return None
        shared = where.st_mode & stat.S_ISVTX and where.st_mode & stat.S_IWOTH
        if stat.S_ISLNK(link.st_mode) and shared and \
                link.st_uid not in (os.geteuid(), where.st_uid):
            return link.st_uid
    return None


def _refuse_planted(path: Path, option: str) -> None:
    if (uid := planted(path)) is not None:
        raise UserError(f"{option} {path}: a symbolic link that user {uid} made in a shared "
                        "directory (it could name any file); refused: remove it or choose "
                        "another path")


def _in_place(path: Path) -> bool:
    """Whether an output is written in place: something other than a regular file or a
    directory is there (stat follows links: /dev/stdout is the terminal or pipe it names)."""
    return path.exists() and not path.is_file() and not path.is_dir()


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """Whether an output (None: none asked for) goes to standard output: `-`, or a name of
    what it is (/dev/stdout)."""
    if path is None:
        return False
    if str(path) == "-":
        return True
    try:
        named, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):  # no such file; no standard output
        return False
    return (named.st_dev, named.st_ino) == (out.st_dev, out.st_ino)


def check_writable(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse an output path whose directory (or device) cannot be written, before any work is
    done."""
    if not str(path):
        raise UserError(f"{option}: an empty path; name a file (`-`: standard output)")
    target = Path(path)
    if is_stdout(path):
        return target
    _refuse_planted(target, option)
    if target.is_dir():
        raise UserError(f"{option} {path}: a directory; name a file (in it, say)")
    if _in_place(target):
        if not os.access(target, os.W_OK):
            raise UserError(f"{option} {path}: not writable; choose another path")
        return target
    parent = target.resolve().parent
    try:  # os.access says yes to root anywhere, /proc included: a file made says more
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".hpcprobe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{option} {path}: directory {parent} is not writable "
                        f"({exc.strerror}); choose another path") from None
    return target


def default_directory(path: str | os.PathLike[str], option: str) -> None:
    """Create the directory of an output's default path (as root /var/lib/hpcprobe, else the
    user's state directory), or refuse in one line, before any work is done: a default that
    does not exist yet is no mistake of the user's."""
    parent = Path(path).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot create its directory {parent} "
                        f"({exc.strerror}); give {option} a writable path") from exc


def check_outputs(*outputs: tuple[str | os.PathLike[str] | None, str]) -> None:
    """check_writable for each output asked for ((path or None, its option)), and refuse more
    than one on standard output, where their documents would run together."""
    asked = [(path, option) for path, option in outputs if path is not None]
    for path, option in asked:
        check_writable(path, option)
    piped = [option for path, option in asked if is_stdout(path)]
    if len(piped) > 1:
        raise UserError(f"{' and '.join(piped)}: each would write to standard output; give all "
                        "but one of them a file")


def atomic_write(path: str | os.PathLike[str], data: bytes, option: str,
                 private: bool = False) -> None:
    """Write `data` to the output `path` as a whole (see the module); `private`: readable by its
    owner and group at most, whatever the umask (a document that may hold the environment)."""
    given = Path(path)
    tmp: str | None = None
    try:
        if is_stdout(path):
            _to_stdout(data)
            return
        _refuse_planted(given, option)  # a link planted since the output was checked
        if _in_place(given):
            try:
                with open(given, "wb") as out:
                    out.write(data)
            except BrokenPipeError:  # a FIFO's reader has enough
                pass
            return
        target = given.resolve()
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".hpcprobe-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        # mkstemp makes 0600; an output file is the user's
        os.chmod(tmp, (0o640 if private else 0o666) & ~umask)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise UserError(f"{option} {given}: cannot write it ({exc.strerror}); choose a "
                        "writable path with free space") from None


def _to_stdout(data: bytes) -> None:
    """Write to the file descriptor, after what Python holds for it; a reader that has gone
    (`| head`) is not an error: whatever else the command keeps (a store) is still kept."""
    sys.stdout.flush()
    rest = memoryview(data)
    try:
        while rest:
            rest = rest[os.write(sys.stdout.fileno(), rest):]
    except BrokenPipeError:
        pass
