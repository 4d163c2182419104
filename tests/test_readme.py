"""The README's commands, as a new user types them on this machine: the first five minutes (a
quick run stored, the second judged against the first, the details, the report) and the fleet's
(a reference made from tagged runs, a run and a check judged against it). The store is the
user's default one (conftest points $XDG_DATA_HOME at the suite's own directory). Shortened
only where a profile allows: `run --against` runs the memory and compute families' quick
points, not the default profile's three minutes. Each command is the installed script, started
as the user starts it (the suite's other commands are forked from one import of it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import conftest
from conftest import Result

README = Path(__file__).resolve().parent.parent / "README.md"

#: No command may end in a traceback or a usage error (exit 2); a judged figure may be below
#: its reference on a shared guest (exit 1), which is the product working.
JUDGED = (0, 1)


def _commands() -> list[str]:
    """The hpcprobe command lines of the README's first two code blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    return [line.split("#")[0].strip() for block in blocks[:2] for line in block.splitlines()
            if "hpcprobe" in line and not line.startswith("make")]


def test_the_readme_says_what_this_test_runs() -> None:
    said = _commands()
    for expected in (".venv/bin/hpcprobe topology", ".venv/bin/hpcprobe run --quick",
                     ".venv/bin/hpcprobe show latest --details",
                     ".venv/bin/hpcprobe report latest -o report.html",
                     "hpcprobe reference make --tag acceptance -o ref.toml",
                     "hpcprobe run --against ref.toml"):
        assert expected in said, f"the README no longer says {expected!r}: update this test"
    assert "make run" in README.read_text() and "make test" in README.read_text()


def hpcprobe(*args: str) -> Result:
    """The installed `hpcprobe` script itself, as the README has the user type it."""
    return conftest.hpcprobe(*args, script=True)


def _ok(r: Result, codes: tuple[int, ...] = (0,)) -> str:
    assert r.code in codes, f"exit {r.code}\n{r.out}\n{r.err}"
    assert "Traceback" not in r.err, r.err
    return r.out


@pytest.mark.usefixtures("private_cache")
def test_the_first_five_minutes_and_the_fleet(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # a store of its own: the suite's other commands leave runs in the shared default one
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _ok(hpcprobe("topology"))
    first = _ok(hpcprobe("run", "--quick"))
    assert "Verdict:" in first
    assert "the next runs here are judged against this one" in first
    # again, tagged as a run one trusts: now judged against the first
    second = _ok(hpcprobe("run", "--quick", "--tag", "acceptance"), JUDGED)
    assert "Against this host's 1 previous quick run(s)" in second
    counters = tmp_path / "counters.json"
    # the health tier's first check: nothing of its kind to judge it by, which never drains
    unjudged = hpcprobe("check", "--tag", "acceptance", "--counters", str(counters))
    _ok(unjudged, (3,))
    assert unjudged.out.startswith("CANNOT JUDGE")
    details = _ok(hpcprobe("show", "latest", "--details"), JUDGED)
    assert "Verdict:" in details
    _ok(hpcprobe("report", "latest", "-o", "report.html"), JUDGED)
    assert "<html" in (tmp_path / "report.html").read_text()[:500].lower()
    _ok(hpcprobe("reference", "make", "--tag", "acceptance", "-o", "ref.toml"))
    _ok(hpcprobe("reference", "show", "ref.toml"))
    against = _ok(hpcprobe("run", "memory", "compute", "--quick", "--against", "ref.toml"),
                  JUDGED)
    assert "ref.toml" in against
    # a figure too noisy to judge here (steal, a moved node) is CANNOT JUDGE, never a FAIL
    check = hpcprobe("check", "--against", "ref.toml", "--counters", str(counters))
    _ok(check, (*JUDGED, 3))
    assert check.out.startswith(("PASS", "FAIL", "CANNOT JUDGE"))
    assert "ref.toml" in check.out.splitlines()[0]
