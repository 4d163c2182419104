"""A summary run's declaration: a driver (a scaling series, a tuning sweep) makes one run out of
the runs it drove, under its own benchmark name; its views show it, and its not-joined params
are left out when compare joins its figures across runs, as a family's are."""

from __future__ import annotations

from dataclasses import dataclass

from hpcprobe.viewkit.figure import Figures
from hpcprobe.viewkit.table import View


@dataclass(frozen=True)
class Summary:
    benchmark: str
    views: tuple[View, ...] = ()
    figures: tuple[Figures, ...] = ()
    not_joined: frozenset[str] = frozenset()
