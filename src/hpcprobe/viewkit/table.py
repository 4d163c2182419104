"""The view toolkit: a table or a few lines of text declared once by a family and rendered by
both documents, the terminal (rich) and the HTML report, so the two always show the same."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hpcprobe.results.model import Metric, Run


@dataclass
class Table:
    """Rows of text cells under titled columns; `justify` is "left" or "right" (numbers)."""

    title: str
    columns: list[str] = field(default_factory=list)
    justify: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    caption: str | None = None
    narrow: bool = False  # drawn without column rules, to fit a narrow screen

    def add_column(self, name: str, justify: str = "left") -> None:
        self.columns.append(name)
        self.justify.append(justify)

    def add_row(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"table {self.title!r}: {len(cells)} cells for "
                             f"{len(self.columns)} columns")
        self.rows.append(list(cells))


@dataclass
class Lines:
    """Text lines (a headline, an OSU-style listing); `preformatted` keeps columns aligned."""

    lines: list[str]
    preformatted: bool = False


Block = Table | Lines
#: A family's view of one run: the blocks it shows (none when the run holds no such data).
View = Callable[[Run], list[Block]]


def shown(*blocks: Block | None) -> list[Block]:
    """The blocks a view has data for (a table function returns None where it has none)."""
    return [b for b in blocks if b is not None]


def cell(m: Metric | None, digits: int = 1) -> str:
    """A figure as its median and the 95 % CI half-width of the median, in % (in the figure's
    unit where the median is 0: no retransmits, no datagram lost)."""
    if m is None:
        return "-"
    s = m.summary
    if s.median == 0:
        return f"{s.median:.{digits}f} ±{(s.ci95[1] - s.ci95[0]) / 2:.{digits}f}"
    return f"{s.median:.{digits}f} ±{100 * s.rel_ci_halfwidth:.1f}%"


def n_range(metrics: list[Metric]) -> str:
    """The sample counts of a table's figures: n=10 or n=5-30."""
    ns = [len(m.samples) for m in metrics]
    return f"n={min(ns)}" if min(ns) == max(ns) else f"n={min(ns)}-{max(ns)}"


