"""What a run is judged against: the groups of a reference file (`--against`, read and checked
before anything is measured), else the host's previous runs in the store; with a store, the
recent change points of the host's history beside the verdict. The families' declarations
(their headline pickers, hardware labels and units) are handed in by the registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from hpcprobe.analysis import reference
from hpcprobe.analysis.reference import Declared
from hpcprobe.analysis.verdict import Reference, Verdict
from hpcprobe.common.errors import UserError
from hpcprobe.judge import run as run_judge
from hpcprobe.judge.kept import KeptHeadlines
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
        judged = self.verdicts([run], store)[run.run_id]
        if run.kind != "node" or store is None or not recent:
            return judged
        from hpcprobe.history import read  # a history is read here, not at start-up

        return replace(judged, history=read.recent(store, run, [r.headline for r in judged.rows],
                                                   self.known))

    def verdicts(self, runs: Sequence[Run], store: Store | None, keep: bool = False
                 ) -> dict[str, Verdict]:
        """Each run's verdict by its id, as `verdict` makes it without the recent history; the
        previous runs of them all read at once (a campaign's nodes). With a store, the runs'
        headlines and their previous runs' are those kept beside them where they are (`runs`
        may then be headers: judge/kept.py), `keep`: and those made are kept."""
        known = self.known
        nodes = [r for r in runs if r.kind == "node"]
        refs: Mapping[str, Reference | None]
        kept = None if store is None else KeptHeadlines(store, known)
        heads = kept.of(nodes, keep) if kept else {
            r.run_id: run_judge.bounded_all(r, known.pickers, known.bounds) for r in nodes}
        if self.path is not None:
            refs = {r.run_id: reference.for_run(self.groups, r, known.labels, self.path)
                    for r in nodes}
        elif kept is None:
            refs = {}
        else:
            refs = reference.previous_all(kept.store, nodes, partial(kept.entries, keep=keep),
                                          known.labels)
        out = {r.run_id: Verdict([], None) for r in runs}
        out.update((r.run_id, run_judge.judged(r, heads[r.run_id], refs.get(r.run_id)))
                   for r in nodes)
        return out
