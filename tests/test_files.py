"""Output files the user names: written whole or not at all, through links, and a device or
FIFO written in place, never replaced by a regular file."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from hpcprobe.common import files
from hpcprobe.common.errors import UserError


def test_a_file_is_replaced_whole_with_the_umask_s_permissions(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("old")
    files.atomic_write(out, b"new", "--json")
    assert out.read_bytes() == b"new"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


def test_a_link_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "results").mkdir()
    real = tmp_path / "results" / "report.html"
    real.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    files.atomic_write(link, b"new", "-o")
    assert link.is_symlink() and link.resolve() == real and real.read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["report.html"]


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        assert files.check_writable(fifo, "-o") == fifo
        files.atomic_write(fifo, b"through the pipe", "-o")
        reader.join(timeout=30)
    finally:  # a write that missed the pipe leaves the reader waiting for a writer: end it
        if reader.is_alive():
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(timeout=30)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_full_device_is_one_clear_error_and_stays_a_device(tmp_path):
    full = tmp_path / "full"  # the kernel's /dev/full: every write fails with ENOSPC
    os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    with pytest.raises(UserError, match=r"-o .*/full: cannot write it \(No space left on "
                                        r"device\); choose a writable path with free space"):
        files.atomic_write(full, b"x" * 4096, "-o")
    assert stat.S_ISCHR(full.lstat().st_mode)


def test_a_directory_or_an_unwritable_place_is_refused(tmp_path):
    with pytest.raises(UserError, match="cannot write it"):
        files.atomic_write(tmp_path, b"x", "-o")
    with pytest.raises(UserError, match="is not writable"):
        files.check_writable(tmp_path / "no" / "such" / "dir.json", "--json")
    with pytest.raises(UserError, match="a directory; name a file"):
        files.check_writable(tmp_path, "--json")
    with pytest.raises(UserError, match="directory /proc is not writable"):  # root may access
        files.check_writable("/proc/hpcprobe.json", "--json")
    with pytest.raises(UserError, match="--json: an empty path"):
        files.check_writable("", "--json")
    assert list(tmp_path.iterdir()) == []  # the files made to prove a place are gone


def test_a_document_that_may_hold_the_environment_is_private(tmp_path):
    umask = os.umask(0o022)
    try:
        files.atomic_write(tmp_path / "run.json", b"{}", "--json", private=True)
        files.atomic_write(tmp_path / "report.html", b"<p>", "-o")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "run.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's link needs root")
def test_a_link_another_user_planted_in_a_shared_directory_is_never_followed(tmp_path):
    """As root in a world-writable sticky directory (/tmp), a link that user 4242 made to a
    file of root's is refused, and the file stays as it was; root's own link is followed (the
    file it names is replaced), as is a link in a directory that is not shared."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    secret = tmp_path / "shadow"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    link = shared / "run.json"
    link.symlink_to(secret)
    os.lchown(link, 4242, 4242)
    for write in (lambda: files.check_writable(link, "--json"),
                  lambda: files.atomic_write(link, b"{}", "--json")):
        with pytest.raises(UserError, match="a symbolic link that user 4242 made in a shared "
                                            "directory"):
            write()
    assert secret.read_text() == "root's\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    private = tmp_path / "private"  # a directory on the way planted as well
    private.mkdir()
    (shared / "dir").symlink_to(private)
    os.lchown(shared / "dir", 4242, 4242)
    with pytest.raises(UserError, match="a symbolic link that user 4242 made"):
        files.atomic_write(shared / "dir" / "run.json", b"{}", "--json")
    assert list(private.iterdir()) == []
    os.lchown(link, 0, 0)
    files.atomic_write(link, b"{}", "--json")
    assert secret.read_text() == "{}" and link.is_symlink()
    mine = tmp_path / "mine.json"
    mine.symlink_to(secret)
    os.lchown(mine, 4242, 4242)
    files.atomic_write(mine, b"[]", "--json")  # not a shared directory: followed
    assert secret.read_text() == "[]"


def test_a_pipe_whose_reader_left_is_no_error(tmp_path):
    """`hpcprobe export -o /dev/stdout | head`: what head did not read is not a failure."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # read-write (Linux): there when the writer opens it, and a read waits for its data
    # instead of seeing end-of-file while no writer has the pipe open yet
    reader = os.open(fifo, os.O_RDWR)
    raised: list[BaseException] = []

    def write() -> None:
        try:
            files.atomic_write(fifo, b"x" * (1 << 20), "-o")  # more than a pipe holds
        except BaseException as exc:  # noqa: BLE001 - the test's thread reports it
            raised.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert os.read(reader, 10) == b"x" * 10
    os.close(reader)  # before the writer is done: its next write meets no reader
    writer.join(timeout=30)
    assert not writer.is_alive() and raised == []
