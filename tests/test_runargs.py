"""The one check of a run's command line: what `cluster run --probe-args`, a sweep's workloads
and `scale` are told on the login node is what each node's `hpcprobe run` says."""

from __future__ import annotations

import pytest

from hpcprobe import cli, registry
from hpcprobe.commands import runargs
from hpcprobe.common.errors import ERROR_PREFIX, UserError
from hpcprobe.measure.family import flags


def _flags() -> dict[str, tuple[object, list[str]]]:
    """Every flag of the measuring families -> (its Flag, the families that declare it)."""
    out: dict[str, tuple[object, list[str]]] = {}
    for fam in registry.measuring():
        for _, flag in flags(fam.options):
            out.setdefault(flag.flag, (flag, []))[1].append(fam.name)
    return out


def _argv(flag: object) -> list[str]:
    """The flag with a value: its first choice, else "1" (valid for some, refused by others)."""
    if flag.switch:  # type: ignore[attr-defined]
        return [flag.flag]  # type: ignore[attr-defined]
    choices = flag.choices  # type: ignore[attr-defined]
    return [flag.flag, choices[0] if choices else "1"]  # type: ignore[attr-defined]


def _cases() -> list[tuple[str, list[str]]]:
    """Each flag with a family that declares it and one that does not (a narrowing mistake),
    every family at least once, and a few more: no option, a value no parser takes, an
    unknown option, and one the cluster had let through."""
    names = [f.name for f in registry.measuring()]
    out = []
    for i, (flag, users) in enumerate(_flags().values()):
        others = [n for n in names if n not in users]
        out += [(users[i % len(users)], _argv(flag)), (others[i % len(others)], _argv(flag))]
    out += [(n, []) for n in names]
    out += [("memory", ["--threads", "0"]), ("latency", ["--size", "lots"]),
            ("numa", ["--bogus"]), ("numa", ["--threads", "2"]), ("hpl", ["--n", "x"])]
    return out


def _node(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], family: str,
          argv: list[str]) -> str | None:
    """What the node's `hpcprobe run FAMILY ARGV` says before it measures: its error, or None
    where it goes on to measure (stopped there)."""
    monkeypatch.setattr(runargs, "measure", lambda *a, **k: 0)
    capsys.readouterr()
    try:
        code = cli.main(["run", family, *argv])
    except SystemExit as exc:  # argparse's refusal, before any handler
        code = exc.code
    err = capsys.readouterr().err
    if code == 0:
        return None
    assert code == 2, err
    [line] = [x for x in err.splitlines() if x.startswith(ERROR_PREFIX)]
    return line[len(ERROR_PREFIX):]


def test_the_login_nodes_check_and_the_nodes_agree_for_every_family(monkeypatch, capsys):
    cases = _cases()
    assert {f for f, _ in cases} == {f.name for f in registry.measuring()}
    refused = 0
    for family, argv in cases:
        try:
            runargs.check([family], argv)
            here = None
        except UserError as exc:
            here = str(exc)
            refused += 1
        assert _node(monkeypatch, capsys, family, argv) == here, (family, argv)
    assert 0 < refused < len(cases)  # both outcomes were seen


def test_the_probe_args_a_node_would_refuse_are_refused_before_any_job(capsys):
    """`cluster run --probe numa --probe-args '--threads 2'` was accepted on the login node,
    then every node's job exited 2; now it is refused at once, in the node's words."""
    assert cli.main(["cluster", "run", "--probe", "numa", "--probe-args", "--threads 2",
                     "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--probe-args '--threads 2': --threads narrows the memory, frequency, compute, " \
           "dslash and cg benchmarks" in err


def test_a_checked_run_holds_each_familys_options():
    c = runargs.check(["memory", "latency"], ["--threads", "1", "--size", "1MiB"])
    assert [f.name for f in c.families] == ["memory", "latency"]
    assert c.options["memory"].threads == (1,) and c.options["latency"].size_bytes == 1 << 20
    assert c.profile.name == "default"
