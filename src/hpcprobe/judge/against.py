"""What a run is judged against: the groups of a reference file (`--against`, read and checked
before anything is measured), else the host's previous runs in the store; with a store, the
recent change points of the host's history beside the verdict. The families' declarations
(their headline pickers, hardware labels and units) are handed in by the registry."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpcprobe.analysis import reference
from hpcprobe.analysis.reference import Declared
from hpcprobe.analysis.verdict import Reference, Verdict
from hpcprobe.common.errors import UserError
from hpcprobe.judge import run as run_judge
from hpcprobe.results.model import Run
from hpcprobe.results.store import Store


@dataclass(frozen=True)
class Against:
    """A reference file's groups (`path`), or none: the host's previous runs."""

    known: Declared
    path: str | None = None
    groups: tuple[reference.Group, ...] = ()

    @classmethod
    def of(cls, path: str | None, known: Declared,
           units: reference.Units = reference.no_units) -> Against:
        """`path`'s reference, read and checked (a UserError where it is not one), or the
        previous runs where no path is given."""
        return cls(known, path, tuple(reference.load(path, units)) if path else ())

    def judged(self, run: Run, db: str | None) -> Verdict:
        """The run's verdict, the previous runs read from the store at `db` where one is
        there (a stored run, or a document of this host's)."""
        try:
            store = Store.open(db, create=False)
        except UserError:
            return self.verdict(run, None)
        with store:
            return self.verdict(run, store)

    def verdict(self, run: Run, store: Store | None, recent: bool = True) -> Verdict:
        """The run's verdict against the file's reference for its hardware, else against
        the host's previous runs in `store` (none: its ceilings only); with a store and
        `recent`, the recent change points of the host's history too."""
        if run.kind != "node":
            return Verdict([], None)
        labels, pickers = self.known.labels, self.known.pickers
        ref: Reference | None
        if self.path is not None:
            ref = reference.for_run(self.groups, run, labels, self.path)
        else:
            ref = None if store is None else reference.previous(store, run, pickers, labels)
        judged = run_judge.verdict(run, pickers, ref, self.known.bounds)
        if store is None or not recent:
            return judged
        from hpcprobe.history import read  # a history is read here, not at start-up

        return replace(judged, history=read.recent(store, run, [r.headline for r in judged.rows],
                                                   self.known))
