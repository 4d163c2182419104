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
from itertools import groupby
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


#: A host's series is kept in this many parts at most: the figures a read finds stored since
#: are appended as a part of their own (a night's runs of a thousand nodes: a thousand small
#: rows, not every host's year written again), and a host with more is written again whole
PARTS = 16


@dataclass(frozen=True)
class Kept:
    """A host's kept series, and in how many parts."""

    columns: Columns
    parts: int


def kept_of(params: dict[str, Any], rows: Iterable[Sequence[Any]]) -> dict[str, Kept]:
    """Host -> its series, from its parts' rows (host, part, then the packed fields) ordered
    by host and part."""
    out: dict[str, Kept] = {}
    for row in rows:
        c = unpack(params, (row[0], *row[2:]))
        had = out.get(c.host)
        out[c.host] = Kept(c, 1) if had is None else Kept(merged(had.columns, c), had.parts + 1)
    return out


def update(kept: dict[str, Kept], fresh: dict[str, Columns]
           ) -> tuple[dict[str, Columns], list[tuple[Columns, int]], list[str]]:
    """The hosts' series with the figures stored since; the parts to write (columns, part
    number); the hosts whose parts are all written again (too many, or figures older than the
    last kept: an import of old runs)."""
    whole = {h: k.columns for h, k in kept.items()}
    writes: list[tuple[Columns, int]] = []
    again: list[str] = []
    for h, c in fresh.items():
        k = kept.get(h)
        whole[h] = c if k is None else merged(k.columns, c)
        if k is None:
            writes.append((c, 0))
        elif k.parts < PARTS and c.created[0] >= k.columns.created[-1]:
            writes.append((c, k.parts))
        else:
            writes.append((whole[h], 0))
            again.append(h)
    return whole, writes, again


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
