"""The result schema's fast checker: the schema compiled to Python by fastjsonschema, in pieces.

The schema says what each figure is as `if benchmark is B then ...` rules, one per family, and
in each `if name is N then ...` rules (`$defs.metric.allOf`). Compiled whole, every figure runs
every family's `if`, and fastjsonschema answers a failed `if` by raising an exception: a node's
document of 177 figures took 17 ms here, 17 s of a 1,000-node campaign's collection. Here the
same schema is compiled as the document with each figure's family rules taken out, and one
piece per (benchmark, name) holding the rules that apply to it; a figure is
checked by the document's checker and then by its piece, chosen by a dictionary lookup, where
the schema's `if` would have chosen. Only `if`s of that exact shape (one key, a const or an
enum of strings, required, no `else`) are taken out; any other rule stays where it is. What
the two accept is the same (tests/test_schema.py holds them to jsonschema's word), and what
they refuse goes to jsonschema for the message.
"""

from __future__ import annotations

import copy
import re
import textwrap
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from hpcprobe.common.jsondoc import typed_key

Check = Callable[[Any], Any]
#: The keys a figure's rules are chosen by, outer first.
KEYS = ("benchmark", "name")


def _if_values(item: Any, key: str) -> list[str] | None:
    """The values of `key` an `{"if": ..., "then": ...}` rule applies to, where its `if` is
    only "`key` is one of these strings"; None for any other rule."""
    if not isinstance(item, dict) or set(item) != {"if", "then"}:
        return None
    cond = item["if"]
    if not isinstance(cond, dict) or set(cond) != {"properties", "required"} \
            or cond["required"] != [key] or set(cond["properties"]) != {key}:
        return None
    rule = cond["properties"][key]
    if set(rule) == {"const"} and isinstance(rule["const"], str):
        return [rule["const"]]
    if set(rule) == {"enum"} and all(isinstance(v, str) for v in rule["enum"]):
        return list(rule["enum"])
    return None


def _split(schemas: list[dict[str, Any]], key: str) \
        -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The rules of `schemas` (all of which apply) that apply whatever `key` is, and per value
    of `key` the `then`s that apply to it alone."""
    always: list[dict[str, Any]] = []
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for schema in schemas:
        always.append({k: v for k, v in schema.items() if k != "allOf"})
        for item in schema.get("allOf", []):
            values = _if_values(item, key)
            if values is None:
                always.append(item)
            for v in values or ():
                by[v].append(item["then"])
    return always, by


def pieces(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple[str, str], Any]]:
    """The document's schema with each figure's family rules taken out, and the schema of each
    (benchmark, name): the rules of that benchmark's `then`s that apply to every name (under
    the name "", for a name no rule names), with that name's own."""
    whole = copy.deepcopy(schema)
    base, by_bench = _split([whole["$defs"]["metric"]], KEYS[0])
    whole["$defs"]["metric"] = {"allOf": base}
    out: dict[tuple[str, str], Any] = {}
    for bench, thens in by_bench.items():
        common, by_name = _split(thens, KEYS[1])
        out[(bench, "")] = {"allOf": common}
        for name, own in by_name.items():
            out[(bench, name)] = {"allOf": common + own}
    return whole, out


#: fastjsonschema names each array item it checks through a $ref by formatting its path with
#: `"...[{i}]".format(**locals())` before the call, a copy of the whole function's locals per
#: item: 12 ms of every 177-figure node document here, 2.4 s of 200 nodes' collection. The same
#: text as an f-string reads the same names without the copy.
_LOCALS = re.compile(r'"([^"\\{}]*(?:\{\w+\}[^"\\{}]*)+)"\.format\(\*\*locals\(\)\)')


def source(schema: dict[str, Any]) -> str:
    """Python for the checkers of `pieces(schema)`: each piece's fastjsonschema code inside a
    function of its own that makes its checker (their helper names would clash), `DOCUMENT`
    bound to the document's checker and `FIGURES` to the makers of the figures'."""
    import fastjsonschema

    whole, parts = pieces(schema)
    out, names = [], {}
    for i, piece in enumerate([whole, *parts.values()]):
        text = fastjsonschema.compile_to_code(piece, use_default=False, use_formats=False)
        text = _LOCALS.sub(r'f"\1"', text)
        entry = re.search(r"^def (\w+)\(", text, re.M)  # the piece's own comes first
        if entry is None:
            raise RuntimeError("fastjsonschema wrote no function for a piece of the schema")
        out.append(f"def _piece_{i}():\n{textwrap.indent(text, '    ')}\n"
                   f"    return {entry.group(1)}\n")
    for i, key in enumerate(parts, start=1):
        names[key] = f"_piece_{i}"
    figures = ", ".join(f"{k!r}: {v}" for k, v in names.items())
    reads = {k: _reads(piece) for k, piece in parts.items()}
    return "\n".join(out) + (f"\nDOCUMENT = _piece_0()\nFIGURES = {{{figures}}}\n"
                             f"READS = {reads!r}\n")


def _reads(piece: dict[str, Any]) -> tuple[str, ...] | None:
    """The keys of a figure whose values alone decide what its piece says: where every rule of
    the piece only says what some keys' values must be (`properties`), those keys (a figure's
    name, unit, better and params, not its samples); None where a rule says more."""
    rules = piece.get("allOf")
    if set(piece) != {"allOf"} or not isinstance(rules, list) \
            or not all(isinstance(r, dict) and set(r) == {"properties"} for r in rules):
        return None
    return tuple(sorted({k for r in rules for k in r["properties"]}))


#: The keys of a figure whose values a key of the figure cache holds (the document's check
#: has made them strings, but for params, an object): a piece that reads others (samples) is
#: checked every time
_KEYED = frozenset({"name", "unit", "better", "params"})


class Checker:
    """The checkers `source` binds: the document's, and each figure's made the first time a
    figure of its kind is checked (making all of them took 15 ms of every command here). A
    figure whose piece reads only its name, unit, better and params (`READS`) is not checked
    again where the same values passed before: a fleet's thousand documents repeat the same
    few hundred (a node's 177 figures checked in 1.6 ms here, found in 0.5)."""

    #: the most figures' values kept as passed
    KEPT = 65_536

    def __init__(self, document: Check, figures: dict[tuple[str, str], Callable[[], Check]],
                 reads: dict[tuple[str, str], tuple[str, ...] | None]):
        self.document, self.makers, self.reads = document, figures, reads
        #: each figure kind's checker, and whether a key of its values stands for it (with
        #: its params or not); None: no rule names it
        self.made: dict[tuple[str, str], tuple[Check, bool | None] | None] = {}
        self.passed: set[Any] = set()

    def _made(self, bench: str, name: str) -> tuple[Check, bool | None] | None:
        """The checker of a figure of `bench` called `name`, and whether its key holds the
        params (None: no key stands for what it reads; it checks each figure); None where no
        rule names it."""
        key = (bench, name)
        if key not in self.made:
            piece = key if key in self.makers else (bench, "")
            make = self.makers.get(piece)
            reads = self.reads.get(piece)
            keyed = None if reads is None or not _KEYED.issuperset(reads) else "params" in reads
            self.made[key] = None if make is None else (make(), keyed)
        return self.made[key]

    def _check_figure(self, m: dict[str, Any]) -> None:
        """A figure of a document the document's check accepted (its name, unit and better are
        strings, its params an object): by its piece, unless the same values passed before.
        Strings are equal only to strings; params are keyed with their values' types (1, 1.0
        and True are equal in Python, not to a schema)."""
        bench, name = m["benchmark"], m["name"]
        made = self._made(bench, name)
        if made is None:
            return
        check, keyed = made
        if keyed is None:
            check(m)
            return
        key = (bench, name, m["unit"], m["better"], typed_key(m["params"]) if keyed else None)
        try:
            if key in self.passed:
                return
        except TypeError:  # a list or an object inside a value: checked every time
            check(m)
            return
        check(m)
        if len(self.passed) >= self.KEPT:
            self.passed.clear()
        self.passed.add(key)

    def __call__(self, doc: Any) -> bool:
        """Whether the schema accepts `doc`."""
        import fastjsonschema

        try:
            self.document(doc)
            for m in doc.get("metrics", ()):  # each a figure's shape, by the document's check
                self._check_figure(m)
        except fastjsonschema.JsonSchemaException:
            return False
        return True
