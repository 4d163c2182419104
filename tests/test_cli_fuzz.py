"""The command line against careless and hostile input (issue 61): every command and
subcommand the parser has, every one of its options given each of a table of bad values (empty,
text for a number, negative, huge, not a number, a path under /proc, in a missing directory, a
directory, a file that is not text, a value with a newline), and every flag alone. Each must end
in exit 0, 1, 2 or 3 (never a traceback), a usage mistake in one line on stderr. Nothing is
measured: the runner stands in with a refusal the test recognises, so a case that reaches it
got past every check of its input."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

from hpcprobe import cli
from hpcprobe.measure import runner

#: Placeholder values of a command's required positionals
POSITIONAL = "latest"


class Measures(Exception):
    """What the test's runner raises: the command got as far as measuring."""


def _leaves(p: argparse.ArgumentParser, path: tuple[str, ...] = ()
            ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command's words and its parser."""
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, p
        return
    for name, sp in subs[0].choices.items():
        yield from _leaves(sp, (*path, name))


def _bad_values(tmp: Path) -> list[str]:
    binary = tmp / "binary.dat"
    binary.write_bytes(b"\xff\xfe\x00\x80garbage")
    return ["", "x", "-1", "0", "1e999", "nan", "a\nb", "/proc/hpcprobe-fuzz",
            str(tmp / "no" / "such" / "file"), str(tmp), str(binary)]


def _cases(tmp: Path) -> list[list[str]]:
    out = []
    values = _bad_values(tmp)
    for words, p in _leaves(cli.build_parser()):
        positionals = [POSITIONAL for a in p._actions
                       if not a.option_strings and a.nargs in (None, "+") and a.required]
        for a in p._actions:
            if not a.option_strings or isinstance(a, (argparse._HelpAction,
                                                      argparse._VersionAction)):
                continue
            flag = a.option_strings[-1]
            if a.nargs == 0:
                out.append([*words, *positionals, flag])
            else:
                out += [[*words, *positionals, f"{flag}={v}"] for v in values]
    return out


def _run(argv: list[str]) -> tuple[int | str, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code: int | str = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
        except Measures:
            code = "measures"
    return code, err.getvalue()


def test_every_option_given_bad_values_ends_in_one_line_or_a_verdict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"),
                     ("XDG_CACHE_HOME", "cache")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    monkeypatch.delenv("HPCPROBE_DB", raising=False)

    def measures(*args: object, **kwargs: object) -> None:
        raise Measures

    monkeypatch.setattr(runner, "execute", measures)
    parser = cli.build_parser()  # built once: a parse leaves nothing in it
    monkeypatch.setattr(cli, "build_parser", lambda command=None: parser)
    cases = _cases(tmp_path)
    assert len(cases) > 300, len(cases)  # every command's options, each with every value
    wrong = []
    for argv in cases:
        try:
            code, err = _run(argv)
        except Exception as exc:  # noqa: BLE001 - a traceback the user would have seen
            wrong.append(f"{argv!r}: {type(exc).__name__}: {exc}")
            continue
        lines = [ln for ln in err.splitlines() if ln.startswith("hpcprobe: error:")]
        if code not in (0, 1, 2, 3, "measures") or (code == 2 and len(lines) != 1):
            wrong.append(f"{argv!r}: exit {code}: {err.strip()[-300:]}")
    assert wrong == [], f"{len(wrong)} of {len(cases)}:\n" + "\n".join(wrong[:40])
