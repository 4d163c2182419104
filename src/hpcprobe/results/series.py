"""Each host's series of a figure as the store keeps it beside the figures (store version 6):
the columns of `Columns` packed into a few text fields a row, one row a host and figure, so a
fleet's history of one figure reads a thousand rows, not a year of each node's runs. Kept up
to date as it is read (the figures stored since are added; a count that does not add up, or
any run deleted, builds it again), never trusted over the figures themselves."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, groupby, pairwise
from operator import itemgetter
from typing import Any

from hpcprobe.results.store import Columns, Selection

#: Separates a column's texts (run ids, times): neither holds a control character
SEP = "\x1f"
#: A figure's row as the query of new figures gives it: host, run id, created, tag, median,
#: CI low, CI high, unit, better (ordered by host, then time)
Row = tuple[str, str, str, "str | None", float, float, float, str, str]


def key(benchmark: str, name: str, params: str) -> str:
    """A figure's key in the kept series: a digest (its params text may be longer than an
    index entry may hold in PostgreSQL)."""
    return hashlib.sha256(json.dumps([benchmark, name, params]).encode()).hexdigest()


def pack(c: Columns) -> tuple[str, str, str, str, str, str, str]:
    """A host's series as the text fields of its row: host, unit, better, runs, created,
    tags (JSON: None kept) and the three numeric columns (float64, base64)."""
    values = [*c.medians, *c.ci_low, *c.ci_high]
    numbers = struct.pack(f"<{len(values)}d", *values)
    return (c.host, c.unit, c.better, SEP.join(c.runs), SEP.join(c.created),
            json.dumps(list(c.tags)), base64.b64encode(numbers).decode("ascii"))


def unpack(params: dict[str, Any], row: Sequence[str]) -> Columns:
    host, unit, better, runs, created, tags, numbers = row
    raw = base64.b64decode(numbers)
    values = struct.unpack(f"<{len(raw) // 8}d", raw)  # float64, little-endian, as packed
    n = len(values) // 3
    return Columns(host, unit, better, params, tuple(runs.split(SEP)),
                   tuple(created.split(SEP)), tuple(json.loads(tags)), values[:n],
                   values[n:2 * n], values[2 * n:])


@dataclass(frozen=True)
class Kept:
    """A host's kept series, and how many runs each of its parts holds, in order."""

    columns: Columns
    sizes: tuple[int, ...]


def kept_of(params: dict[str, Any], rows: Iterable[Sequence[Any]]) -> dict[str, Kept]:
    """Host -> its series, from its parts' rows (host, part, then the packed fields) ordered
    by host and part: each host's parts joined at once."""
    out: dict[str, Kept] = {}
    for host, rows_of in groupby(rows, key=itemgetter(0)):
        parts = [unpack(params, (host, *row[2:])) for row in rows_of]
        out[host] = Kept(parts[0] if len(parts) == 1 else _joined(parts),
                         tuple(len(c.runs) for c in parts))
    return out


def _joined(parts: Sequence[Columns]) -> Columns:
    """A host's series from its parts, in time order (as `merged` one after another)."""
    first = parts[0]
    both = Columns(first.host, first.unit, first.better, first.params,
                   *(tuple(chain.from_iterable(getattr(c, f) for c in parts)) for f in
                     ("runs", "created", "tags", "medians", "ci_low", "ci_high")))
    if any(b.created and a.created and b.created[0] < a.created[-1]
           for a, b in pairwise(parts)):
        return _taken(both, sorted(range(len(both.created)), key=lambda i: both.created[i]))
    return both


def update(kept: dict[str, Kept], fresh: dict[str, Columns]
           ) -> tuple[dict[str, Columns], list[tuple[Columns, int]], list[tuple[str, int]]]:
    """The hosts' series with the figures stored since; the parts to write (columns, part
    number); the hosts whose parts from one on are written again (host, that part; 0: all,
    where figures older than the last kept came: an import of old runs). The figures stored
    since are a part of their own, joined with the last parts no larger than they (`_tail`):
    a night's runs of a thousand nodes are a thousand small rows, not every host's year
    written again, and a host's series is read in a few parts (log2 of its runs at most),
    not a part a night."""
    whole = {h: k.columns for h, k in kept.items()}
    writes: list[tuple[Columns, int]] = []
    cut: list[tuple[str, int]] = []
    for h, c in fresh.items():
        k = kept.get(h)
        if k is None:
            whole[h] = c
            writes.append((c, 0))
            continue
        whole[h] = both = merged(k.columns, c)
        part = _tail(k.sizes, len(c.runs)) if c.created[0] >= k.columns.created[-1] else 0
        if part == len(k.sizes):
            writes.append((c, part))
        else:
            start = sum(k.sizes[:part])
            writes.append((_taken(both, range(start, len(both.runs))), part))
            cut.append((h, part))
    return whole, writes, cut


def _tail(sizes: Sequence[int], new: int) -> int:
    """The part `new` runs stored since begin: the last parts they join, each no larger than
    the runs after it (a binary counter's carries: parts of 4, 2 and 1 runs take the next one
    as one part of 8)."""
    part, tail = len(sizes), new
    while part > 0 and sizes[part - 1] <= tail:
        part -= 1
        tail += sizes[part]
    return part


def columns_of(params: dict[str, Any], rows: Iterable[Row]) -> dict[str, Columns]:
    """Host -> its columns, from rows ordered by host and time."""
    out = {}
    for host, got in groupby(rows, key=itemgetter(0)):
        _, runs, created, tags, med, lo, hi, unit, better = zip(*got, strict=True)
        out[host] = Columns(host, unit[0], better[0], params, runs, created, tags, med, lo, hi)
    return out


def merged(old: Columns, new: Columns) -> Columns:
    """A host's kept series with the figures stored since, in time order (a run imported late
    may be older than the last kept: the order is by time, then as stored)."""
    both = Columns(old.host, old.unit, old.better, old.params, old.runs + new.runs,
                   old.created + new.created, old.tags + new.tags, old.medians + new.medians,
                   old.ci_low + new.ci_low, old.ci_high + new.ci_high)
    if old.created and new.created and new.created[0] < old.created[-1]:
        return _taken(both, sorted(range(len(both.created)), key=lambda i: both.created[i]))
    return both


def _taken(c: Columns, idx: Sequence[int]) -> Columns:
    """The series' figures at these positions, in this order."""
    return Columns(c.host, c.unit, c.better, c.params, tuple(c.runs[i] for i in idx),
                   tuple(c.created[i] for i in idx), tuple(c.tags[i] for i in idx),
                   tuple(c.medians[i] for i in idx), tuple(c.ci_low[i] for i in idx),
                   tuple(c.ci_high[i] for i in idx))


def selected(c: Columns, where: Selection | None) -> Columns | None:
    """The figures of the series in the runs a selection takes (its time, tag and tag prefix;
    as the SQL selection compares them), None where none."""
    if where is None:
        return c
    start = bisect_left(c.created, where.since) if where.since is not None else 0
    end = bisect_left(c.created, where.until) if where.until is not None else len(c.created)
    keep = [i for i in range(start, end) if _tagged(c.tags[i], where)]
    if where.host is not None and c.host != where.host or not keep:
        return None
    return c if len(keep) == len(c.runs) else _taken(c, keep)


def _tagged(tag: str | None, where: Selection) -> bool:
    """Whether a run of this tag is selected (an untagged run matches no tag nor prefix)."""
    if where.tag is not None and tag != where.tag:
        return False
    return where.tag_prefix is None or tag is not None and tag.startswith(where.tag_prefix)
