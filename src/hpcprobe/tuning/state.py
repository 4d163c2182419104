"""Switching a configuration's system state in and out: its sysfs settings written (each file's
value before kept) and its `pre` commands run on the way in; its `post` commands run and the
files' old values written back on the way out, also when a workload failed, a `pre` failed or
the user pressed Ctrl-C (SIGINT and SIGTERM are held off while state is restored). A `post`
or a restore that fails is a loud warning naming the state left behind."""

from __future__ import annotations

import glob
import os
import shlex
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hpcprobe.common.errors import UserError
from hpcprobe.machine.sysinfo import bracketed
from hpcprobe.tools import command
from hpcprobe.tuning.config import Configuration

#: Seconds a pre or post command may take.
HOOK_TIMEOUT_S = 300.0


class PreFailed(Exception):
    """A configuration's `pre` (or a setting) failed: it is skipped; its state was restored."""


def read_setting(path: str) -> str:
    """A sysfs file's value: the selected one of a choice list ("always [madvise] never")."""
    text = Path(path).read_text()
    return bracketed(text) or text.strip()


def files(settings: Mapping[str, str]) -> dict[str, str]:
    """The files a configuration's `set` names, each pattern (`cpu*`, `?`, `[...]`) expanded to
    the files it matches here, sorted: a per-CPU setting (the governor, energy_perf_bias) in
    one line on any number of CPUs. A pattern that matches nothing stays as it is (refused by
    `check_settable`, and a failed write where it is not checked)."""
    out: dict[str, str] = {}
    for path, value in settings.items():
        matched = sorted(glob.glob(path)) if glob.has_magic(path) else []
        out.update(dict.fromkeys(matched or [path], value))
    return out


def check_writable(settings: Mapping[str, str], where: str) -> None:
    """Each file a configuration's `set` names (each pattern's) is there and writable here."""
    for pattern in settings:
        if glob.has_magic(pattern) and not glob.glob(pattern):
            raise UserError(f"{where} set {pattern}: matches no file here")
    for path in files(settings):
        if not os.access(path, os.W_OK):
            raise UserError(f"{where} set {path}: not writable here (no such file, or not root)")


def check_settable(settings: Mapping[str, str], where: str) -> None:
    """Each sysfs file a configuration sets must be writable here, with a value its choice list
    takes: said before anything runs (`where` names the configuration)."""
    check_writable(settings, where)
    for path, value in files(settings).items():
        if (why := refused_value(path, value)) is not None:
            raise UserError(f"{where} {why}")


def refused_value(path: str, value: str) -> str | None:
    """Why `value` cannot be written to a sysfs choice list ("always [madvise] never" takes one
    of its words); None when it can, or when the file is no choice list or cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    words = text.replace("[", " ").replace("]", " ").split()
    if "[" not in text or value in words:
        return None
    return f"set {path} = {value}: it takes one of {', '.join(words)}"


def write_setting(path: str, value: str) -> None:
    Path(path).write_text(value + "\n")


def _signals_held() -> Callable[[], None]:
    """Hold off SIGINT and SIGTERM (restoring state must finish); the undo."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}

    def undo() -> None:
        for s, h in old.items():
            signal.signal(s, h)
    return undo


@contextmanager
def applied(c: Configuration, warn: Callable[[str], None], log: list[dict[str, Any]]
            ) -> Iterator[None]:
    """The configuration's state while the body runs; restored afterwards in every case."""
    written: list[tuple[str, str]] = []  # (path, value before), in the order written
    ran_pre = False
    settings = files(c.sysfs)
    try:
        for path, value in settings.items():
            try:
                before = read_setting(path)
                write_setting(path, value)
            except OSError as exc:
                raise PreFailed(f"set {path} = {value}: {exc.strerror or exc}") from None
            written.append((path, before))
            log.append({"configuration": c.name, "step": "set", "what": path, "value": value,
                        "before": before})
        for argv in c.pre:
            ran_pre = True
            try:
                command.check_program(argv, f"[configurations.{c.name}] pre")
                ran = command.run(argv, timeout=HOOK_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a program not found: the same skip
                raise PreFailed(str(exc)) from None
            log.append({"configuration": c.name, "step": "pre", "what": shlex.join(argv),
                        "code": ran.code})
            if not ran.ok:
                raise PreFailed(f"pre {ran.failure()}")
        yield
    finally:
        undo = _signals_held()
        try:
            if ran_pre or not c.pre:
                _post(c, warn, log)
            for path, before in reversed(written):
                try:
                    write_setting(path, before)
                    log.append({"configuration": c.name, "step": "restore", "what": path,
                                "value": before})
                except OSError as exc:
                    warn(f"WARNING: {c.name}: could not restore {path} to {before!r} "
                         f"({exc.strerror or exc}): it is left at {settings[path]!r}")
        finally:
            undo()


def _post(c: Configuration, warn: Callable[[str], None], log: list[dict[str, Any]]) -> None:
    for argv in c.post:
        try:
            ran = command.run(argv, timeout=HOOK_TIMEOUT_S)
            failed = None if ran.ok else ran.failure()
        except Exception as exc:  # noqa: BLE001 - said, and the other steps still run
            failed, ran = str(exc), None
        log.append({"configuration": c.name, "step": "post", "what": shlex.join(argv),
                    "code": None if ran is None else ran.code})
        if failed:
            left = ", ".join(f"{k} = {v}" for k, v in c.expect.items()) or \
                "whatever its pre commands set"
            warn(f"WARNING: {c.name}: post {failed}; the state it should restore may be left "
                 f"behind: {left}")
