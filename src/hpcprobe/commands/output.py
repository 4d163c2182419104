"""The one output step of every command that produces runs (run, a family's own command,
scale, sweep): show the run, write its documents (`--json`, `--markdown`, `--report`)
atomically, store it, and say where it went and how to read it back."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hpcprobe import registry
from hpcprobe.analysis.verdict import Verdict
from hpcprobe.commands.base import (
    Bar,
    console,
    ignoring_interrupts,
    say,
    terminate_interrupts,
)
from hpcprobe.common import files
from hpcprobe.common.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_UNJUDGED,
    HpcprobeError,
    UserError,
)
from hpcprobe.judge.against import Against
from hpcprobe.measure.runner import Interrupted
from hpcprobe.results import model as results
from hpcprobe.results.store import Store
from hpcprobe.views import terminal


@dataclass
class Outputs:
    """Where a run goes besides the terminal: its document (`--json`; `document` writes
    another than the run's own, as a sweep's), its Markdown and its HTML report, and the
    store. `stored` says how the runs it summarises were stored (a sweep's, as they ran)."""

    json: str | None = None
    report: str | None = None
    markdown: str | None = None
    document: Callable[[str], None] | None = None
    stored: str | None = None
    empty_refused: bool = True  # a run that measured nothing is no result: not stored
    store_again: bool = True  # False: a run the store has already is not saved twice
    against: Against = field(default_factory=lambda: registry.against(None))
    details: bool = False  # every family's tables and every warning, after the verdict
    prometheus: str | None = None  # node_exporter's textfile (`--prometheus`)

    @classmethod
    def of(cls, a: Any, **kw: Any) -> Outputs:
        """The documents a command's arguments ask for, checked writable before anything is
        measured."""
        out = cls(getattr(a, "json", None), getattr(a, "report", None),
                  getattr(a, "markdown", None),
                  against=registry.against(getattr(a, "against", None)),
                  details=bool(getattr(a, "details", False)),
                  prometheus=getattr(a, "prometheus", None), **kw)
        files.check_outputs((out.json, "--json"), (out.report, "--report"),
                            (out.markdown, "--markdown"), (out.prometheus, "--prometheus"))
        return out

    @property
    def piped(self) -> bool:
        """The document goes to standard output, which then holds nothing else."""
        return any(files.is_stdout(p) for p in (self.json, self.report, self.markdown,
                                                 self.prometheus))


def measured(out: Outputs, store: Store | None,
             work: Callable[[Bar], tuple[results.Run, Sequence[results.Run]]]) -> int:
    """Measure with a progress bar (`work`: the run and the runs it summarises), then keep it.
    Ctrl-C or SIGTERM keeps what was measured before it, marked as such."""
    with terminate_interrupts():
        try:
            with Bar() as bar:
                run, parts = work(bar)
        except Interrupted as stop:  # what was measured before it is not lost
            with ignoring_interrupts():  # nor to a second interruption
                keep(run=stop.run, out=out, store=store, parts=stop.parts)
            sys.stderr.write("hpcprobe: interrupted; the figures measured before it are "
                             f"{'kept above' if store is None else 'stored'}, marked as such\n")
            return EXIT_INTERRUPTED
        except BaseException:  # a mistake found as it plans, Ctrl-C before any figure
            if store is not None:
                store.close()  # a store this command made, still empty, is removed
            raise
    judged = keep(run, out, store, parts)
    return EXIT_FAILURE if run.errors else verdict_exit(out.against, [judged])


def verdict_exit(against: Against, judged: Sequence[Verdict]) -> int:
    """The exit status of every command that shows verdicts (a run just measured, or read back
    by show, report, compare --against; as a table or a document alike): EXIT_FAILURE where a
    figure is below its reference; EXIT_UNJUDGED, said in one line, where a reference file was
    named and none of the runs' figures had a value in it (another CPU, profile or core count:
    `run --against ref.toml || alert` must not pass without judging); else 0."""
    if any(v.failed for v in judged):
        return EXIT_FAILURE
    if against.path is None or any(r.expected is not None for v in judged for r in v.rows):
        return 0
    why = next((v.reference.source for v in judged if v.reference is not None), "no node run")
    say(console(stderr=True), f"hpcprobe: --against {against.path} judged nothing: {why}")
    return EXIT_UNJUDGED


def keep(run: results.Run, out: Outputs, store: Store | None,
         parts: Sequence[results.Run] = ()) -> Verdict:
    """Show the run; write its document first (if the store fails then, the figures are in
    it), store it after the runs it summarises (`parts`), write its Markdown and report, and
    print the hints; its verdict. A run that measured nothing is shown and written but not
    stored: where nothing failed either (every benchmark skipped: `run gpu` without a GPU) it
    is refused as a user's mistake; where something failed (`app foo -- false`), its errors
    say why and the command fails."""
    shown = console(out.piped)
    # a document the store would refuse is said before the verdict claims it is kept
    invalid = _refused(run) if store is not None else None
    # the document first: nothing that reads the store (the verdict) can cost it
    unwritten = _document(run, out)
    judged = replace(_verdict(run, out, store), kept=store is not None and not invalid)
    terminal.render(run, shown, registry.views(), console(stderr=True), judged, out.details)
    if unwritten is not None and store is None:  # nothing else keeps it: said after the figures
        raise unwritten
    if out.json and unwritten is None and not files.is_stdout(out.json):
        say(shown, f"Wrote {out.json}.")
    if out.empty_refused and not run.metrics:
        if store is not None:
            store.close()
        if unwritten is not None:
            raise unwritten
        if run.errors:  # the command fails on them (exit 1); nothing to keep
            say(console(stderr=True), "Not stored: it measured nothing (the errors above say "
                                      "why).")
            return judged
        raise UserError("nothing was measured: every benchmark asked for was skipped (the "
                        "warnings above say why); the run is not stored")
    if invalid is not None:
        assert store is not None
        store.close()
        raise HpcprobeError(f"{invalid}; the run is not stored (a bug of hpcprobe's: please "
                            "report this line)")
    if store is not None:
        _store(run, out, store, parts, shown, documented=bool(out.json) and not unwritten)
    _pages(run, out, shown, stored=store is not None, judged=judged)
    if unwritten is not None:
        raise type(unwritten)(f"{unwritten}; the run is stored as {run.run_id} "
                              f"(`hpcprobe show {run.run_id} --json` prints its document)")
    return judged


def _verdict(run: results.Run, out: Outputs, store: Store | None) -> Verdict:
    """The run's verdict; where the store cannot be read for it (another writer's run half
    seen, a damaged file), its ceilings alone, said in one line: the measurement is kept."""
    errors = (HpcprobeError, *getattr(store, "driver_errors", ()))
    try:
        return out.against.verdict(run, store)
    except errors as exc:
        say(console(stderr=True), f"hpcprobe: the verdict could not read the store ({exc}); "
                                  "judged against its ceilings only")
        return registry.judge(run, None)


def _refused(run: results.Run) -> HpcprobeError | None:
    """Why the store would refuse the run's document, or None."""
    try:
        results.validate(run.to_dict())
    except HpcprobeError as exc:
        return exc
    return None


def _document(run: results.Run, out: Outputs) -> HpcprobeError | None:
    """Write the run's document (`--json`); a failure is returned (the caller says it after the
    figures, and whether the store kept the run)."""
    if not out.json:
        return None
    try:
        if out.document is not None:
            out.document(out.json)
        else:
            results.write_json(run, out.json)
    except HpcprobeError as exc:
        return exc
    return None


def _store(run: results.Run, out: Outputs, store: Store, parts: Sequence[results.Run],
           shown: Any, documented: bool) -> None:
    try:
        with store:
            for part in parts:
                store.save(part)
            if out.store_again or not store.has(run.run_id):
                store.save(run)
    except HpcprobeError as exc:
        kept = f"; the run is in {'the document on standard output' if out.piped else out.json}" \
            " (`hpcprobe import` can store it later)" if documented else ""
        raise HpcprobeError(f"{exc.args[0]}{kept}") from None  # its options named as given
    also = f" (and the {len(parts)} run(s) it summarises)" if parts else \
        f" ({out.stored})" if out.stored else ""
    say(shown, f"Stored as run {run.run_id} in {store.path} ({len(run.metrics)} metrics){also}; "
               f"`hpcprobe show {run.run_id}` reads it back.")


def _pages(run: results.Run, out: Outputs, shown: Any, stored: bool, judged: Verdict) -> None:
    """The Markdown, the monitoring file and the HTML report asked for, else the hint how to
    make one."""
    if out.prometheus:
        from hpcprobe.views import prometheus

        prometheus.write(out.prometheus, prometheus.registry([(run, judged)]))
        if not files.is_stdout(out.prometheus):
            say(shown, f"Wrote {out.prometheus}.")
    if out.markdown:
        from hpcprobe.views import markdown

        files.atomic_write(out.markdown, markdown.render(run, registry.views()).encode(),
                           "--markdown")
        say(shown, f"Wrote {out.markdown}.")
    if out.report:
        from hpcprobe.views import html as report

        n = report.write([run], out.report, registry.views(), registry.figures(),
                         registry.not_joined(), flag="--report", verdicts=[judged])
        say(shown, f"Wrote the report {out.report} ({n} plots).")
        return
    ref = run.run_id if stored else None if files.is_stdout(out.json) else out.json
    say(shown, f"Its report: `hpcprobe report {ref} -o report.html`; compare it with another "
               f"run: `hpcprobe compare {ref} OTHER`." if ref else
               "Not stored: add --report FILE.html or --json FILE to keep this run's figures "
               "for a report.")
