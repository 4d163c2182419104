"""The architecture as the import graph: layers point one way, no family imports another, and
a family is its package plus one registry line."""

from __future__ import annotations

import ast
import dataclasses
import graphlib
import re
from pathlib import Path

import hpcprobe
from hpcprobe.families import FAMILIES
from hpcprobe.measure import profiles
from hpcprobe.measure.family import Check, flags

SRC = Path(hpcprobe.__file__).parent

#: Layers, lowest first: a module may import its own layer and those below, never above.
LAYERS: list[tuple[str, ...]] = [
    ("hpcprobe.common", "hpcprobe.tools"),
    ("hpcprobe.native", "hpcprobe.results"),
    ("hpcprobe.viewkit",),
    ("hpcprobe.machine", "hpcprobe.mpi", "hpcprobe.cuda"),
    ("hpcprobe.analysis",),
    ("hpcprobe.measure", "hpcprobe.schedulers"),
    ("hpcprobe.probes", "hpcprobe.cluster", "hpcprobe.tuning", "hpcprobe.history",
     "hpcprobe.health", "hpcprobe.judge"),
    ("hpcprobe.families",),
    ("hpcprobe.registry", "hpcprobe.views"),
    ("hpcprobe.commands",),
    ("hpcprobe.cli",),
    ("hpcprobe.console", "hpcprobe.__main__"),
]


def rank(module: str) -> int:
    best, where = -1, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, where = len(prefix), i
    return where


def modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(path: Path) -> set[str]:
    """Every hpcprobe module a file imports, at the top or inside a function."""
    got = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            got |= {a.name for a in node.names if a.name.startswith("hpcprobe")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hpcprobe"):
            assert node.level == 0, f"{path}: relative import"
            for a in node.names:  # `from hpcprobe.x import y` imports module x.y or name y of x
                sub = f"{node.module}.{a.name}"
                got.add(sub if sub in ALL else node.module)
    return got


ALL = modules()


def test_every_module_has_a_layer():
    assert [m for m in ALL if m != "hpcprobe" and rank(m) < 0] == []


def test_layers_point_one_way():
    upward = [f"{m} -> {dep}" for m, path in ALL.items() if m != "hpcprobe"
              for dep in imports(path) if dep != "hpcprobe" and rank(dep) > rank(m)]
    assert upward == []


def package(module: str) -> str:
    """The top-level package a module belongs to (hpcprobe.machine.topology: hpcprobe.machine)."""
    return ".".join(module.split(".")[:2])


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of the graph (its nodes, the first repeated at the end), or [] where none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(e.args[1])
    return []


def module_graph() -> dict[str, set[str]]:
    return {m: {d for d in imports(path) if d != "hpcprobe"} - {m}
            for m, path in ALL.items() if m != "hpcprobe"}


def test_no_module_circle():
    """A module importing one that imports it back (at the top or inside a function) is one
    module in two files."""
    assert circle(module_graph()) == []


def test_no_circle_between_top_level_packages():
    """Layers hold several packages; within a layer the packages still point one way."""
    graph: dict[str, set[str]] = {}
    for m, deps in module_graph().items():
        graph.setdefault(package(m), set()).update(package(d) for d in deps
                                                   if package(d) != package(m))
    assert circle(graph) == []


def test_a_circle_is_found():
    """The two tests above can fail: a circle of three, and none where the graph is a chain."""
    found = circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert set(found) == {"a", "b", "c"} and found[0] == found[-1]
    assert circle({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert package("hpcprobe.machine.topology") == "hpcprobe.machine"


def our_flags() -> set[str]:
    """Every long flag of every command."""
    import argparse

    from hpcprobe import cli

    out: set[str] = set()
    parsers = [cli.build_parser()]
    while parsers:
        for action in parsers.pop()._actions:
            out.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return out - {"--help", "--version"}


def flags_raised(path: Path, flags: set[str]) -> list[tuple[int, str]]:
    """The flags of ours that the messages of a module's raise statements name."""
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Raise) and n.exc is not None:
            text = " ".join(c.value for c in ast.walk(n.exc)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str))
            out += [(n.lineno, f) for f in re.findall(r"--[a-z][a-z0-9-]*", text) if f in flags]
    return out


def test_below_the_commands_errors_name_options_not_flags():
    """An option is <field> in a message below the command layer; the command line shows its
    flag, a sweep file its key (common/errors.py)."""
    flags = our_flags()
    top = rank("hpcprobe.commands")
    found = [f"{m}:{line}: {flag}" for m, path in ALL.items() if 0 <= rank(m) < top
             for line, flag in flags_raised(path, flags)]
    assert found == []


def test_a_flag_in_an_error_is_found_and_a_field_shown_as_its_flag(tmp_path):
    from hpcprobe import cli
    from hpcprobe.common.errors import HpcprobeError, OptionError

    bad = tmp_path / "bad.py"
    bad.write_text('raise UserError(f"--db {p}: cannot open; " "use --quick")\n'
                   'raise UserError("nvcc --version said nothing")\n')
    assert flags_raised(bad, our_flags()) == [(1, "--db"), (1, "--quick")]
    names = cli.option_flags(cli.build_parser())
    assert names["db"] == "--db" and names["profile"] == "--profile"
    assert HpcprobeError("<db> x: damaged; <topology> tag").render(names) == \
        "--db x: damaged; <topology> tag"
    assert str(OptionError("<db> x")) == "db x"  # elsewhere: a sweep file's key


def options_named(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every <name> in the text of an `OptionError(...)` a module raises."""
    out = []
    for call in ast.walk(ast.parse(path.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "OptionError":
            texts = [n for n in ast.walk(call) if isinstance(n, ast.Constant)
                     and isinstance(n.value, str)]
            out += [(n.lineno, m) for n in texts for m in re.findall(r"<(\w+)>", n.value)]
    return out


def test_every_option_a_family_error_names_is_shown_as_its_flag(tmp_path):
    """A family's <name> is its option's field: the nested runs (a sweep's workloads, a
    cluster's probe arguments) show it as the flag through registry.option_names alone."""
    from hpcprobe import registry
    from hpcprobe.common.errors import OptionError

    names = registry.option_names()
    found = [f"{m}:{line}: <{name}>" for m, path in ALL.items()
             if m.startswith("hpcprobe.families.") for line, name in options_named(path)
             if name not in names]
    assert found == []
    assert OptionError("<grid> or <global>; <whole>").render(names) == \
        "--grid or --global; --global"  # a flag's own name or its field
    bad = tmp_path / "bad.py"
    bad.write_text('raise OptionError(f"<grid> {g} or <global>, not both")\n')
    assert options_named(bad) == [(1, "grid"), (1, "global")]


#: Flags that name two different options in different commands, and why they stay apart.
TWO_OPTIONS = {
    "--tag": "a label given to what a command stores (add_tag), or runs selected by it",
    "--limit": "compare's rows shown, or list's runs listed",
    "--csv": "compare's rows as CSV on standard output (a switch: its positional runs follow), "
             "or history's points written to FILE",
    "--format": "what an export writes: stored results (export: jsonl, openmetrics) or a "
                "reference (reference export: json, reframe, nhc, clustercockpit)",
}


def declarations(path: Path) -> list[tuple[str, str]]:
    """(flag, function) of every `add_argument("--flag", ...)` in a module."""
    out = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, ast.FunctionDef):
            out += [(a.value, fn.name) for n in ast.walk(fn) if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
                    for a in n.args if isinstance(a, ast.Constant)
                    and isinstance(a.value, str) and a.value.startswith("--")]
    return out


def declared_twice(paths: list[Path]) -> dict[str, set[str]]:
    sites: dict[str, set[str]] = {}
    for path in paths:
        for flag, fn in declarations(path):
            sites.setdefault(flag, set()).add(f"{path.name}:{fn}")
    return {f: s for f, s in sites.items() if len(s) > 1}


def test_an_option_several_commands_share_is_declared_once():
    """--against, --json, --details ...: one function in commands/base.py declares each, the
    command saying what it means by it (a second declaration drifts: --against had six)."""
    twice = declared_twice(sorted((SRC / "commands").glob("*.py")))
    assert set(twice) == set(TWO_OPTIONS), twice


def test_an_option_declared_twice_is_found(tmp_path):
    (tmp_path / "a.py").write_text('def setup(p):\n    p.add_argument("--json", help="x")\n')
    (tmp_path / "b.py").write_text('def setup(p):\n    p.add_argument("-o", "--json")\n'
                                   'def other(p):\n    p.add_argument("--db")\n')
    assert declared_twice([tmp_path / "a.py", tmp_path / "b.py"]) == {
        "--json": {"a.py:setup", "b.py:setup"}}


def test_no_family_imports_another():
    def family(m: str) -> str | None:
        parts = m.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "families" else None

    crossing = [f"{m} -> {dep}" for m, path in ALL.items() if family(m)
                for dep in imports(path) if family(dep) not in (None, family(m))]
    assert crossing == []


def test_nothing_below_the_registry_names_a_family():
    """Only the registry (families/__init__), its package and the composition root import
    families; central code gets them handed over."""
    allowed = {"hpcprobe.families", "hpcprobe.registry"}
    naming = [f"{m} -> {dep}" for m, path in ALL.items()
              if not m.startswith("hpcprobe.families.") and m not in allowed
              for dep in imports(path) if dep.startswith("hpcprobe.families")]
    assert naming == []


#: Central code: everything but the families' own packages and the two registries (the
#: families' and the commands') that hold them by name.
def central() -> dict[str, Path]:
    return {m: p for m, p in ALL.items() if not m.startswith("hpcprobe.families")
            and m != "hpcprobe.commands"}


def naming(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """Where a module uses a family's name as a key: compared with (`w.family == "app"`), looked
    up in the families (`families["app"]`) or listed with another (`("memory", "numa")`). The
    same word as a layout choice, an XML tag or a program's name is not a family's."""
    out = []

    def lit(n: ast.AST) -> str | None:
        return n.value if isinstance(n, ast.Constant) and n.value in names else None

    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Compare) and re.search(r"famil|bench", ast.unparse(n), re.I):
            out += [(n.lineno, x) for side in (n.left, *n.comparators) if (x := lit(side))]
        elif isinstance(n, ast.Subscript) and "famil" in ast.unparse(n.value).lower():
            out += [(n.lineno, x) for x in [lit(n.slice)] if x]
        elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            listed = [x for e in n.elts if (x := lit(e))]
            out += [(n.lineno, x) for x in listed] if len(listed) >= 2 else []
    return out


def test_central_code_names_no_family_in_a_string():
    """A family named in a string (a default list of benchmarks, a special case for one) is a
    dependency the import test cannot see: central code asks the registry for a capability."""
    found = [f"{m}:{line}: {text!r}" for m, path in central().items()
             for line, text in naming(path, set(FAMILIES))]
    assert found == []


def test_the_check_sees_a_family_named_in_a_string(tmp_path):
    """The rule above can fail: a default probe kept by name, a special case, a look-up."""
    bad = tmp_path / "bad.py"
    bad.write_text('PROBE = ("memory", "numa")\nif w.family == "app":\n    f = families["gpu"]\n'
                   'LAYOUT = ("core", "numa")\n')
    assert [text for _, text in naming(bad, set(FAMILIES))] == ["memory", "numa", "app", "gpu"]


def test_every_family_has_settings_for_every_profile_and_consistent_flags():
    """Every profile's settings, and the health tier's exactly where the family checks."""
    seen: dict[str, object] = {}
    for fam in FAMILIES.values():
        if fam.run is not None:
            checks = {profiles.CHECK.name} if fam.capability(Check) is not None else set()
            assert set(fam.settings) == set(profiles.PROFILES) | checks, fam.name
        assert dataclasses.is_dataclass(fam.options)
        for _, flag in flags(fam.options):
            other = seen.setdefault(flag.flag, flag)
            assert (other.parse, other.choices, other.switch) == \
                (flag.parse, flag.choices, flag.switch), flag.flag  # type: ignore[attr-defined]


#: The commands package's shared modules (public helpers), not commands.
SHARED = {"base", "runargs", "output", "family"}


def test_every_command_module_is_registered_once_and_dispatches_itself():
    from hpcprobe import cli, commands

    specs = commands.commands()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    modules = {p.stem for p in (SRC / "commands").glob("*.py")} - SHARED - {"__init__"}
    registered = {getattr(s.handle, "func", s.handle).__module__.rsplit(".", 1)[1] for s in specs}
    assert modules <= registered  # a module left out of the registry is a dead command
    sub = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(sub) == names
    # each of hpcprobe's own is built alone, by the name it is registered under
    for name in commands.CORE:
        assert commands.spec(name).name == name
        alone = cli.build_parser(name)._subparsers._group_actions[0]  # type: ignore[union-attr]
        assert list(alone.choices) == [name]


def test_a_command_module_imports_no_other_command():
    """What two commands share is in a shared module (SHARED) or a wing: a command module
    used as a library (history's helpers by the run's output and cluster report, once) ties
    two commands and circles back."""
    commands = {p.stem for p in (SRC / "commands").glob("*.py")} - SHARED - {"__init__"}
    used = [f"{m} -> {dep}" for m, path in ALL.items() if m.startswith("hpcprobe.commands.")
            for dep in imports(path) if dep.rsplit(".", 1)[-1] in commands
            and dep.startswith("hpcprobe.commands.") and dep != m]
    assert used == []


def test_no_command_module_imports_anothers_private_names():
    taken = []
    for path in (SRC / "commands").glob("*.py"):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("hpcprobe.commands"):
                taken += [f"{path.name}: {n.module}.{a.name}" for a in n.names
                          if a.name.startswith("_")]
            elif isinstance(n, ast.Attribute) and n.attr.startswith("_") and \
                    isinstance(n.value, ast.Name) and n.value.id in {
                        p.stem for p in (SRC / "commands").glob("*.py")} - {path.stem}:
                taken.append(f"{path.name}: {n.value.id}.{n.attr}")
    assert taken == []


def classes_named(names: set[str]) -> dict[str, list[str]]:
    """name -> the modules that define a class of that name."""
    out: dict[str, list[str]] = {}
    for m, path in ALL.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name in names:
                out.setdefault(node.name, []).append(m)
    return out


def test_one_class_per_judgement_concept():
    """A run's verdict and a run's finding are one class each (issue 62): the campaign's are
    FleetVerdict and PeerFinding, not a second Verdict or Finding."""
    got = classes_named({"Verdict", "Finding"})
    assert got == {"Verdict": ["hpcprobe.analysis.verdict"],
                   "Finding": ["hpcprobe.results.findings"]}
