"""A family is its package and one registry line: a family declared here, and registered, gets
its flags on the command line, runs, and shows its view in the terminal and the HTML report,
with no other code touched."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest

from hpcprobe import cli, registry
from hpcprobe.families import FAMILIES
from hpcprobe.measure import options, profiles
from hpcprobe.measure.family import Family, Flag, Metrics, MetricSpec, RunContext, flags, option
from hpcprobe.results.model import Metric, Run
from hpcprobe.viewkit.table import Block, Table
from hpcprobe.views import html


@dataclass(frozen=True)
class ToyOptions:
    count: int | None = option(Flag("--toy-count", "how many items the toy counts",
                                    parse=options.at_least(1, "a count")))


@dataclass(frozen=True)
class ToySettings:
    items: int


def run(ctx: RunContext, opts: ToyOptions | None) -> None:
    n = (opts and opts.count) or SETTINGS[ctx.profile.name].items
    # counted, not timed: the toy has nothing to measure, only a figure to carry through
    ctx.metrics.append(Metric("toy", "items", "items", {"n": n, "where": "here"},
                              [float(n)] * 3))


SETTINGS = {name: ToySettings(2) for name in profiles.PROFILES}


def tables(r: Run) -> list[Block]:
    items = r.select("toy", "items")
    if not items:
        return []
    t = Table("Toy items")
    t.add_column("n", justify="right")
    for m in items:
        t.add_row(str(m.params["n"]))
    return [t]


TOY = Family("toy", "a family declared in a test", ToyOptions, run, settings=SETTINGS,
             metrics=Metrics((MetricSpec("items", "items"),), frozenset({"where"})),
             views=(tables,))


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Family:
    monkeypatch.setitem(FAMILIES, "toy", TOY)
    return TOY


def test_a_registered_family_gets_its_flag_runs_and_shows(toy, tmp_path, capsys):
    run_help = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "narrowing the toy benchmark" in run_help and "--toy-count" in run_help
    out = tmp_path / "run.json"
    code = cli.main(["run", "toy", "--toy-count", "3", "--no-store", "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "Toy" in text and "│ 3 │" in text  # rich wraps a title to its table's width
    doc = json.loads(out.read_text())
    assert doc["benchmarks"] == ["toy"]
    assert [m["params"]["n"] for m in doc["metrics"] if m["benchmark"] == "toy"] == [3]
    # its not_joined params are its own: another family's figures still join on "where"
    assert "where" in registry.not_joined().of("toy")
    assert "where" not in registry.not_joined().of("memory")
    page, _ = html.build([Run.from_dict(doc)], registry.views(), registry.figures(),
                         registry.not_joined())
    assert "Toy items" in page


def test_a_registered_familys_flag_is_on_the_command_line_and_checked(toy, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "toy", "--toy-count", "0"])
    assert exc.value.code == 2
    assert "--toy-count 0: give a count" in capsys.readouterr().err
    assert cli.main(["run", "memory", "--toy-count", "2", "--no-store"]) == 2
    assert "--toy-count narrows the toy benchmark; add `toy`" in capsys.readouterr().err


def test_a_metric_the_family_did_not_declare_is_an_error_not_a_figure(monkeypatch, tmp_path,
                                                                      capsys):
    def sloppy(ctx: RunContext, opts: ToyOptions | None) -> None:
        ctx.metrics.append(Metric("toy", "items", "items", {"n": 1}, [1.0] * 3))
        ctx.metrics.append(Metric("toy", "itmes", "items", {"n": 1}, [1.0] * 3))  # misnamed

    monkeypatch.setitem(FAMILIES, "toy", replace(TOY, run=sloppy))
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "--no-store", "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert [m["name"] for m in doc["metrics"]] == ["items"]
    assert any("metric itmes (items, higher is better) is not declared" in e
               for e in doc["errors"])


def test_a_figure_without_samples_is_an_error_not_a_crash(monkeypatch, tmp_path):
    def empty(ctx: RunContext, opts: ToyOptions | None) -> None:
        ctx.metrics.append(Metric("toy", "items", "items", {"n": 0}, []))

    monkeypatch.setitem(FAMILIES, "toy", replace(TOY, run=empty))
    out = tmp_path / "run.json"
    assert cli.main(["run", "toy", "--no-store", "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert doc["metrics"] == [] and any("has no sample" in e for e in doc["errors"])


def test_a_field_name_means_one_flag_across_families():
    """Errors name an option by its field (registry.option_names): two families whose fields
    share a name must share the flag too, or one family's error would name the other's."""
    seen: dict[str, set[str]] = {}
    for fam in registry.families().values():
        for name, flag in flags(fam.options):
            seen.setdefault(name, set()).add(flag.flag)
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}
