"""Each node run's figures as the peers judge reads them (`peers.figures`: label -> the median,
the best end of its 95 % CI, the unit, which way is better), kept in the store beside the run
(its `kept` results, under the run's id): a fleet's verdict reads them back where making them
again from every metric (each figure's label and summary) took most of its time. A
1,000-node campaign's 176,000 figures: made in 1.0-1.2 s here, read back in 0.07-0.19 s; 3.8 MB
kept.

A run's figures are kept as its values, packed as the store packs samples (the medians and CI
ends: exactly the floats made), and the key of its labels, units and directions, kept once for
every run that has the same list (a fleet's nodes repeat one or a few). They are read back only
where they were made as they would be made now: by this format of `peers.label` and
`peers.figure`, this hpcprobe's version and the same params left out of the joins (`digest`);
else they are made again.

A run's headlines are kept the same way (`KeptHeadlines`): what judging it against a reference
needs of its metrics (judge/run.py's `Bounded`: its headline figures with their ceilings, and
its other figures above theirs), so that a fleet's report and its nodes' references from their
previous runs read no node run whole. A 1,000-node campaign: its runs read whole and their
headlines made in about 2.5 s here, their headlines read back in 0.1-0.3 s; 3.7 MB kept. They
are read back only where made by this format, this hpcprobe's version and the same headline
pickers and ceiling sources, by name (`KeptHeadlines.digest`).

And what a run gives a reference (`reference.Entry`: its hardware, node state and headline
medians), kept with its headlines (`KeptHeadlines.entries`): a node's reference from its previous
runs reads none of them (a 1,000-node campaign's six previous runs a node: 6,000 runs' headers
and headlines read in 3.1-3.5 s, their entries in 0.3), read back where made by this format,
version, pickers and hardware labels."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar

from hpcprobe.analysis.compare import NotJoined
from hpcprobe.analysis.reference import Entry, entry
from hpcprobe.analysis.verdict import Headline, headlines
from hpcprobe.common import jsondoc
from hpcprobe.common.bulk import bulk
from hpcprobe.judge.run import Bounded, bounded_all
from hpcprobe.results.model import Metric, Run

if TYPE_CHECKING:
    from hpcprobe.analysis.reference import Declared
    from hpcprobe.judge.peers import Fig
    from hpcprobe.results.store import Store

#: The kinds of kept results: a run's packed figures (by run id) and a list of labels (by the
#: SHA-256 of its text)
FIGURES, LABELS = "figures", "figure-labels"
#: What `peers.figures` makes, as kept: raised when `label` or `figure` change what they make,
#: so that figures kept before are made again (tests/test_kept.py holds a recorded node's
#: figures at this format and fails where they change and it does not)
FORMAT = 1


def _made_by(form: int, *what: object) -> str:
    """The digest kept results are read back by: their format, this hpcprobe's version and
    `what` else made them."""
    import hashlib

    from hpcprobe import __version__

    return hashlib.sha256(json.dumps([form, __version__, *what]).encode()).hexdigest()


def digest(ignore: NotJoined) -> str:
    """What a run's kept figures were made by: this format, hpcprobe's version and the params
    each benchmark's joins leave out."""
    return _made_by(FORMAT, sorted(ignore.every),
                    sorted((b, sorted(s)) for b, s in ignore.by_benchmark.items()))


def _packed(values: Iterable[float]) -> str:
    """The doubles as the store packs a metric's samples (`sql.pack`), in base64 text."""
    import base64

    from hpcprobe.results.sql import pack

    return base64.b64encode(pack(list(values))).decode("ascii")


def _unpacked(text: str) -> list[float]:
    """`_packed`'s doubles; ValueError where the text is not base64 of whole doubles."""
    import base64
    import struct

    from hpcprobe.results.sql import unpack

    try:
        return unpack(base64.b64decode(text))
    except struct.error as exc:
        raise ValueError(str(exc)) from None


def _names(text: str) -> list[tuple[str, str, str]] | None:
    """A kept list of (label, unit, better), None where it is not one."""
    try:
        got = [(label, sys.intern(unit), sys.intern(better))
               for label, unit, better in json.loads(text)]
    except (ValueError, TypeError):
        return None
    return got if all(isinstance(x, str) for row in got for x in row) else None


class KeptFigures:
    """A store's kept figures, for the runs judged with `ignore`."""

    def __init__(self, store: Store, ignore: NotJoined) -> None:
        self.store = store
        self.digest = digest(ignore)
        #: the runs whose figures the store holds as they are made now (read or kept)
        self.held: set[str] = set()

    def read(self, run_ids: Iterable[str]) -> dict[str, dict[str, Fig]]:
        """run id -> its figures, for those of these runs kept as they would be made now (and
        whole: any other is made again)."""
        rows = {run_id: value.partition(" ")[::2] for run_id, (made_by, value)
                in self.store.kept(FIGURES, list(run_ids)).items() if made_by == self.digest}
        lists = {key: _names(text) for key, (_, text)
                 in self.store.kept(LABELS, list({key for key, _ in rows.values()})).items()}
        out: dict[str, dict[str, Fig]] = {}
        for run_id, (key, packed) in rows.items():
            names = lists.get(key)
            try:
                values = _unpacked(packed)
            except ValueError:  # not base64 of whole doubles
                continue
            if names is None or len(values) != 2 * len(names):
                continue  # its labels were not kept (a writer that gave up): made again
            out[run_id] = {label: (values[2 * i], values[2 * i + 1], unit, better)
                           for i, (label, unit, better) in enumerate(names)}
            self.held.add(run_id)
        return out

    def keep(self, made: Mapping[str, Mapping[str, Fig]]) -> None:
        """Keep the figures of these runs that the store does not hold yet (where it takes
        them now: another writer holding it, they are made again next time)."""
        import hashlib

        new = [run_id for run_id in made if run_id not in self.held]
        if not new:
            return
        keys: dict[tuple[tuple[str, str, str], ...], str] = {}
        lists: dict[str, tuple[str, str]] = {}
        runs: dict[str, tuple[str, str]] = {}
        for run_id in new:
            figs = made[run_id]
            names = tuple((label, unit, better) for label, (_, _, unit, better) in figs.items())
            key = keys.get(names)
            if key is None:
                text = json.dumps(names)
                key = keys[names] = hashlib.sha256(text.encode()).hexdigest()
                lists[key] = (self.digest, text)
            values = chain.from_iterable((median, best) for median, best, _, _ in figs.values())
            runs[run_id] = (self.digest, f"{key} {_packed(values)}")
        self.store.keep(LABELS, lists)
        self.store.keep(FIGURES, runs)
        self.held.update(new)


#: The kinds of kept results that are a run's headlines, and what it gives a reference (by
#: run id)
HEADLINES, ENTRIES = "headlines", "reference-entries"
#: What a kept run's headlines are: raised where `_headline`'s list changes
HEADLINES_FORMAT = 1
#: What a kept reference entry is: raised where `reference.Entry`'s document changes
ENTRIES_FORMAT = 1
#: Runs read whole at once where their headlines are not kept
AT_ONCE = 200


def _name(f: object) -> str:
    """A function's name as the code declares it (a partial's: its function's and its
    callable arguments'), the same in every process."""
    if isinstance(f, partial):
        return f"{_name(f.func)}({','.join(_name(a) for a in f.args if callable(a))})"
    return f"{getattr(f, '__module__', '')}.{getattr(f, '__qualname__', type(f).__qualname__)}"


def _headline(h: Headline) -> list[Any]:
    m = h.metric
    return [h.key, h.label, h.ceiling, h.ceiling_source, h.floor, m.benchmark, m.name, m.unit,
            m.better, m.params, m.samples]


def _unheadline(row: list[Any]) -> Headline:
    key, label, ceiling, source, floor, bench, name, unit, better, params, samples = row
    return Headline(key, label, Metric.from_dict({
        "benchmark": bench, "name": name, "unit": unit, "better": better, "params": params,
        "samples": samples}), ceiling, source, floor)


_T = TypeVar("_T")


def _read(store: Store, kind: str, digest: str, run_ids: Iterable[str],
          decode: Callable[[Any], _T]) -> dict[str, _T]:
    """run id -> its kept result of this kind, decoded, where made by `digest` (one kept
    otherwise, or not what the keeper writes, is left out: made again)."""
    out: dict[str, _T] = {}
    for run_id, (made_by, text) in store.kept(kind, list(run_ids)).items():
        if made_by != digest:
            continue
        try:
            out[run_id] = decode(jsondoc.loads(text))
        except (ValueError, TypeError, KeyError):
            continue
    return out


def _bounded(doc: Any) -> Bounded:
    return Bounded([_unheadline(r) for r in doc["shown"]], [_unheadline(r) for r in doc["above"]])


class KeptHeadlines:
    """A store's kept headlines, for the runs judged by `known` (its pickers and ceilings), and
    what each run gives a reference (`reference.Entry`: its headlines and hardware, by
    `known`'s pickers and labels)."""

    def __init__(self, store: Store, known: Declared) -> None:
        self.store, self.known = store, known
        pickers = [_name(p) for p in known.pickers]
        self.digest = _made_by(HEADLINES_FORMAT, pickers,
                               [(b.benchmark, b.name, _name(b.of)) for b in known.bounds])
        self.entries_digest = _made_by(ENTRIES_FORMAT, pickers, _name(known.labels))

    def read(self, run_ids: Iterable[str]) -> dict[str, Bounded]:
        """run id -> what judging it needs, for those of these runs kept as they would be
        made now (any other, or one kept unreadable, is left out: made again)."""
        return _read(self.store, HEADLINES, self.digest, run_ids, _bounded)

    def keep(self, made: Mapping[str, Bounded]) -> None:
        """Keep these runs' headlines (where the store takes them now: else they are made
        again next time)."""
        self.store.keep(HEADLINES, {run_id: (self.digest, json.dumps(
            {"shown": [_headline(h) for h in b.shown], "above": [_headline(h) for h in b.above]}))
            for run_id, b in made.items()})

    def of(self, runs: Sequence[Run], keep: bool = False) -> dict[str, Bounded]:
        """Each run's headlines by its id: as kept, else made from its metrics where it has
        them (a run not stored yet), else from the run read whole (`runs` may be headers: a
        run neither kept nor stored with metrics has none); `keep`: those made are kept, and
        what those node runs give a reference."""
        out = self.read(r.run_id for r in runs)
        pickers, bounds = self.known.pickers, self.known.bounds
        made = {r.run_id: bounded_all(r, pickers, bounds) for r in runs
                if r.run_id not in out and r.metrics}
        given = {r.run_id: entry(r, made[r.run_id].shown, self.known.labels)
                 for r in runs if keep and r.run_id in made and r.kind == "node"}
        missing = [r.run_id for r in runs if r.run_id not in out and r.run_id not in made]
        with bulk():  # read a few hundred at a time, each dropped once its headlines are made
            for i in range(0, len(missing), AT_ONCE):
                for run_id, run in self.store.load_ids(missing[i:i + AT_ONCE]).items():
                    made[run_id] = b = bounded_all(run, pickers, bounds)
                    if keep and run.kind == "node":
                        given[run_id] = entry(run, b.shown, self.known.labels)
        if keep:
            self.keep(made)
            self.keep_entries(given)
        return {r.run_id: out.get(r.run_id) or made.get(r.run_id) or Bounded([], [])
                for r in runs}

    def read_entries(self, run_ids: Iterable[str]) -> dict[str, Entry]:
        """run id -> what it gives a reference, for those of these runs kept as they would be
        made now (any other, or one kept unreadable, is left out: made again)."""
        return _read(self.store, ENTRIES, self.entries_digest, run_ids, Entry.from_json)

    def keep_entries(self, made: Mapping[str, Entry]) -> None:
        self.store.keep(ENTRIES, {run_id: (self.entries_digest, json.dumps(e.to_json()))
                                  for run_id, e in made.items()})

    def entries(self, run_ids: Sequence[str], keep: bool = False) -> dict[str, Entry]:
        """What each of these stored node runs gives a reference, by its id: as kept, else
        made from the run read whole (`keep`: and kept); none for a run of another kind."""
        out = self.read_entries(run_ids)
        missing = [r for r in run_ids if r not in out]
        made: dict[str, Entry] = {}
        with bulk():
            for i in range(0, len(missing), AT_ONCE):
                made.update((run_id, entry(run, headlines(run, self.known.pickers),
                                           self.known.labels))
                            for run_id, run in self.store.load_ids(missing[i:i + AT_ONCE]).items()
                            if run.kind == "node")
        if keep:
            self.keep_entries(made)
        return {**out, **made}
