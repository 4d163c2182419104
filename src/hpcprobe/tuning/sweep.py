"""A sweep's execution: in each round, every configuration in turn (A B C A B C ..., so drift
of a shared node falls on all of them alike) has its state switched in, checked against what it
declares, its workloads run (each an `hpcprobe run`/`hpcprobe app` child process with the
configuration's environment, options and wrapper, its run stored as it arrives) and its state
restored; after the rounds asked for, rounds are added while a comparison is undecided, the
maximum is not reached and the time budget allows another. Then every configuration is
compared with the baseline per workload figure, and each figure gets a recommendation. Runs of
configurations that need another boot are joined from the store by their tag."""

from __future__ import annotations

import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcprobe.analysis import fingerprint, recommend
from hpcprobe.analysis.compare import NotJoined, describe_params, joined_params
from hpcprobe.common import secrets
from hpcprobe.common.errors import ERROR_PREFIX, EXIT_USAGE, OptionError, UserError
from hpcprobe.machine import sentinel
from hpcprobe.machine.topology import Topology
from hpcprobe.measure.family import PER_WATT, Family, Progress, energy_figure, flags
from hpcprobe.measure.runner import node_provenance
from hpcprobe.results.model import Metric, Run, read_json
from hpcprobe.results.store import Selection, Store
from hpcprobe.tools import command
from hpcprobe.tuning import state, views
from hpcprobe.tuning.config import Configuration, Sweep, Workload, family_argv

#: The benchmark name of a sweep's summary figures.
BENCHMARK = views.BENCHMARK
#: Exit codes of a child: 2 is a mistake of the file (the same under every configuration).
CHILD_USAGE = 2


def tag(sweep: Sweep, configuration: str) -> str:
    """The tag of a configuration's runs (how runs from several boots are joined)."""
    return f"{sweep.name}:{configuration}"


@dataclass
class Outcome:
    """What a sweep did: the runs it stored, the summary, and what went wrong."""

    summary: Run
    parts: list[Run]
    rows: list[recommend.Row]
    recommendations: list[recommend.Recommendation]
    skipped: dict[str, str] = field(default_factory=dict)  # configuration -> why
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return recommend.document(self.rows, self.recommendations,
                                  {"sweep": self.summary.provenance[BENCHMARK],
                                   "summary_run": self.summary.run_id,
                                   "warnings": self.summary.warnings,
                                   "errors": self.summary.errors})


def live_fingerprint(topo: Topology, isa: str) -> dict[str, str]:
    """The fingerprint of this machine now (after a configuration's pre commands)."""
    run = Run("live", "", socket.gethostname(), "", [], node_provenance(topo, isa),
              topo.to_dict())
    return fingerprint.fingerprint(run)


def fingerprint_labels(topo: Topology, isa: str) -> list[str]:
    return list(live_fingerprint(topo, isa))


def mismatches(fp: Mapping[str, str], expect: Mapping[str, str], env_too: bool) -> list[str]:
    """The declared labels whose value is not as declared ("THP is madvise, not never")."""
    return [f"{k} is {fp.get(k, 'n/a')}, not {v}" for k, v in expect.items()
            if (env_too or not k.startswith("env ")) and fp.get(k, "n/a") != v]


def workload_argv(s: Sweep, families: Mapping[str, Family], c: Configuration, w: Workload,
                  doc: Path, dry_run: bool = False) -> list[str]:
    """The child process of one workload under one configuration: `hpcprobe run FAMILY` with
    the workload's options and the configuration's (those the family takes) under its wrapper,
    or `hpcprobe app NAME -- WRAPPER COMMAND`; its run document written to `doc`. `dry_run`:
    its own --dry-run, a family's without the wrapper (which may be a launcher)."""
    common = ["--profile", s.profile, "--no-store", "--json", str(doc), "--tag", tag(s, c.name),
              *(["--dry-run"] if dry_run else [])]
    me = [sys.executable, "-m", "hpcprobe"]
    line = run_line(families, c, w)
    if w.command:
        return [*me, w.family, w.name, *line, *common, "--", *c.wrap, *w.command]
    return [*([] if dry_run else c.wrap), *me, "run", w.family, *line, *common]


def run_line(families: Mapping[str, Family], c: Configuration, w: Workload) -> list[str]:
    """The options a workload's child runs with under a configuration (`hpcprobe run FAMILY`'s
    or `hpcprobe app NAME`'s): the workload's own and the configuration's that the family
    takes (an application's `layout`, say)."""
    fam = families[w.family]
    takes = {f.flag for _, f in flags(fam.options)}
    mine = {k: v for k, v in c.options.items() if "--" + k.lstrip("-") in takes}
    return [*family_argv(fam, w.options, w.name), *family_argv(fam, mine, c.name)]


def refusal(ran: command.Ran) -> str | None:
    """What hpcprobe said when a workload's child refused its options (exit 2: a mistake in the
    sweep file, not a failure of the workload); None for any other outcome."""
    if ran.code != EXIT_USAGE:
        return None
    said = [x for x in ran.output.splitlines() if x.startswith(ERROR_PREFIX)]
    return said[-1][len(ERROR_PREFIX):] if said else ran.tail()


def check(s: Sweep, families: Mapping[str, Family], c: Configuration, w: Workload
          ) -> str | None:
    """Why the workload's own dry run under the configuration (its environment, in the
    machine's state now) refuses it; None when it does not."""
    with tempfile.TemporaryDirectory(prefix="hpcprobe-sweep-") as tmp:
        ran = command.run(workload_argv(s, families, c, w, Path(tmp) / "RUN.json", True),
                          env=c.env, timeout=300)
    return refusal(ran)


class Runner:
    def __init__(self, sweep: Sweep, families: Mapping[str, Family], topo: Topology, isa: str,
                 store: Store | None, ignore: NotJoined, progress: Progress,
                 say: Callable[[str], None], boot: str | None = None, analyse: bool = False):
        self.s, self.families, self.topo, self.isa = sweep, families, topo, isa
        self.store, self.ignore, self.progress, self.say = store, ignore, progress, say
        self.boot = boot
        self.id = uuid.uuid4().hex[:12]
        self.parts: list[Run] = []
        self.log: list[dict[str, Any]] = []  # every step, in order: the interleaving on record
        self.hooks: list[dict[str, Any]] = []  # sets, pre, post, restores
        self.skipped: dict[str, str] = {}
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.here = [] if analyse else \
            [c for c in sweep.configurations.values() if c.boot == boot]
        if analyse:
            if store is None:
                raise OptionError("<analyse> joins the stored runs: it needs the store (not "
                                  "<no_store>)")
        elif sweep.boots() and boot is None:
            raise OptionError(f"{sweep.path}: its configurations need boots "
                              f"{', '.join(sweep.boots())}: run it once in each with <boot> NAME "
                              "(or <analyse> to join what is stored)")
        if boot is not None and not self.here:
            raise OptionError(f"<boot> {boot}: no configuration of {sweep.path} names it; boots: "
                              f"{', '.join(sweep.boots()) or 'none'}")

    # -- one configuration's workloads

    def workload(self, rnd: int, c: Configuration, w: Workload, tmp: Path) -> None:
        doc = tmp / f"{rnd}-{c.name}-{w.name}.json"
        started = datetime.now(UTC).isoformat(timespec="seconds")
        ran = command.run(workload_argv(self.s, self.families, c, w, doc), env=c.env,
                          timeout=max(600.0, self.s.budget_s))
        step = {"round": rnd, "configuration": c.name, "workload": w.name, "started": started,
                "seconds": round(ran.seconds, 1), "run": None}
        self.log.append(step)
        where = f"round {rnd}, {c.name}, {w.name}"
        run = read_json(doc) if doc.is_file() else None
        why = refusal(ran) if run is None else None
        if why is not None:  # the same in every round: said now, before more time is spent
            raise OptionError(f"{self.s.path}: [workloads.{w.name}] under {c.name}: {why} (the "
                              "sweep stopped, every state restored; `hpcprobe sweep <dry_run>` "
                              "checks every workload)")
        if run is None or (ran.code not in (0, None) and not run.metrics):
            self.failures.append(f"{where}: {ran.failure()}")
            step["error"] = ran.tail()
            return
        self.failures += [f"{where}: {e}" for e in run.errors]
        wrong = mismatches(fingerprint.fingerprint(run), c.expect, env_too=True)
        if wrong:  # the child saw another state than declared: not a figure of this config
            raise state.PreFailed(f"its run's fingerprint: {'; '.join(wrong)}")
        run.provenance[BENCHMARK] = {"id": self.id, "name": self.s.name, "configuration": c.name,
                                     "workload": w.name, "round": rnd, "boot": c.boot}
        if self.store is not None:
            self.store.save(run)
        self.parts.append(run)
        step["run"] = run.run_id
        for benchmark, ratio in sentinel.changes(run.findings).items():
            self._warn(f"{where}: the node's DRAM triad (its sentinel) moved while {benchmark} "
                       f"ran (x{ratio:.2f}): its figures may mix two states of the node; the "
                       "interleaved rounds spread such a change over the configurations, and "
                       "more rounds (max_rounds) outweigh it")

    def visit(self, rnd: int, c: Configuration, tmp: Path) -> None:
        """The configuration's state, its check and its workloads; a failed pre or a state
        other than declared skips it for the rest of the sweep (its state restored)."""
        try:
            with state.applied(c, self._warn, self.hooks):
                wrong = mismatches(live_fingerprint(self.topo, self.isa), c.expect, False)
                if wrong:
                    raise state.PreFailed(f"after its pre: {'; '.join(wrong)}")
                for w in self.s.workloads.values():
                    self.progress.advance(f"round {rnd}: {c.name}, {w.name}")
                    self.workload(rnd, c, w, tmp)
        except state.PreFailed as exc:
            self.skipped[c.name] = f"{exc} (state restored)"
            self._warn(f"{c.name}: skipped for the rest of the sweep: {exc}")

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        self.say(text)

    # -- the rounds

    def execute(self) -> Outcome:
        s = self.s
        t0 = time.monotonic()
        rounds, why = 0, ""
        per_round = len(self.here) * len(s.workloads)
        self.progress.start(f"sweep {s.name}", per_round * s.rounds)
        with tempfile.TemporaryDirectory(prefix="hpcprobe-sweep-") as tmp:
            while True:
                rounds += 1
                r0 = time.monotonic()
                for c in self.here:
                    if c.name not in self.skipped:
                        self.visit(rounds, c, Path(tmp))
                took = time.monotonic() - r0
                active = [c for c in self.here if c.name not in self.skipped]
                if len(active) == 0:
                    why = "every configuration was skipped"
                    break
                if rounds < s.rounds:
                    continue
                rows = self.rows()
                if not rows:
                    why = (f"nothing to compare with {s.baseline} yet (the other configurations "
                           "run in other boots)")
                    break
                if recommend.decided(rows):
                    why = f"decided after {rounds} round(s)"
                    break
                if rounds >= s.max_rounds:
                    why = f"the most rounds ({s.max_rounds}) taken, not every comparison decided"
                    break
                if time.monotonic() - t0 + took > s.budget_s:
                    why = (f"the time budget ({s.budget_s:g} s) allows no further round of "
                           f"~{took:.0f} s; not every comparison decided")
                    break
                self.say(f"Round {rounds}: not every comparison decided; one more round.")
                self.progress.start(f"sweep {s.name}, round {rounds + 1}", per_round)
        return self.outcome(rounds, why, time.monotonic() - t0)

    # -- the comparison

    def runs(self) -> list[Run]:
        """This sweep's runs, and for the configurations of other boots their latest sweep's
        stored runs."""
        out = list(self.parts)
        if self.store is None:
            return out
        for c in self.s.configurations.values():
            if c in self.here:
                continue
            theirs = self.store.load_all(Selection(tag=tag(self.s, c.name)))
            ids = [r.provenance.get(BENCHMARK, {}).get("id") for r in theirs]
            latest = ids[-1] if ids else None
            out += [r for r, i in zip(theirs, ids, strict=True) if i == latest and i]
        return out

    def figures(self, runs: list[Run]) -> list[recommend.Figure]:
        return figures(runs, self.s, self.ignore | set_by_configurations(self.s))

    def analyse(self) -> Outcome:
        """The comparison of what is stored, measuring nothing."""
        runs = self.runs()
        if not runs:
            raise UserError(f"no stored runs of sweep {self.s.name} (tags "
                            f"{tag(self.s, '*')}): run it first")
        for r in runs:
            info = r.provenance[BENCHMARK]
            self.log.append({"round": info.get("round", 1), "configuration":
                             info["configuration"], "workload": info["workload"],
                             "started": r.created, "seconds": r.duration_s, "run": r.run_id})
        rounds = max(step["round"] for step in self.log)
        return self.outcome(rounds, "joined from the store (--analyse)", 0.0)

    def rows(self) -> list[recommend.Row]:
        return recommend.rows(self.figures(self.runs()), self.s.baseline, self.s.alpha,
                              self.s.resolution)

    def outcome(self, rounds: int, why: str, seconds: float) -> Outcome:
        s = self.s
        runs = self.runs()
        figs = self.figures(runs)
        rows = recommend.rows(figs, s.baseline, s.alpha, s.resolution)
        recs = recommend.recommend(rows, s.baseline, rounds)
        if s.baseline in self.skipped:
            self.failures.append(f"the baseline {s.baseline} was skipped: nothing to compare with")
        for w in s.workloads.values():  # its runs measured, its figures/where kept nothing
            measured = [m for r in runs if r.provenance[BENCHMARK]["workload"] == w.name
                        for m in r.metrics]
            if not measured or any(f.workload == w.name for f in figs):
                continue
            params = sorted({k for m in measured for k in m.params})
            if w.by != "time" and not any(energy_figure(m.name) for m in measured):
                self.warnings.append(
                    f"[workloads.{w.name}]: by {w.by}: none of its figures has a figure per "
                    "watt (no energy counter was read: the runs' Energy line says why); no "
                    "recommendation by energy")
                continue
            self.warnings.append(f"[workloads.{w.name}]: " + (
                f"no figure of its runs has the params of its where ("
                f"{', '.join(f'{k} = {v!r}' for k, v in w.where.items())}); their params: "
                f"{', '.join(params) or 'none'}" if w.where else
                f"its runs measured none of its figures ({', '.join(w.figures)})"))
        missing = [c for c in s.configurations if c not in {f.configuration for f in figs}]
        if figs and missing and not self.skipped.keys() >= set(missing):
            self.warnings.append(f"no figures yet of {', '.join(missing)} (another boot: run "
                                 "the sweep there with --boot)")
        summary = Run(self.id, datetime.now(UTC).isoformat(timespec="seconds"),
                      socket.gethostname(), s.profile, [BENCHMARK],
                      node_provenance(self.topo, self.isa), self.topo.to_dict(),
                      tag=f"{s.name}:sweep", duration_s=round(seconds, 1))
        summary.metrics = [Metric(BENCHMARK, f.figure.split(" ", 1)[0], f.unit,
                                  {"workload": f.workload, "configuration": f.configuration,
                                   "figure": f.figure}, list(f.samples), f.better)
                           for f in figs]
        summary.warnings = list(self.warnings)
        summary.errors = list(self.failures) + [f"{c}: skipped: {why}"
                                                for c, why in self.skipped.items()]
        summary.provenance[BENCHMARK] = {
            "id": self.id, "name": s.name, "file": str(s.path), "baseline": s.baseline,
            "boot": self.boot, "rounds": rounds, "stopped": why, "alpha": s.alpha,
            "resolution": s.resolution, "budget_s": s.budget_s, "min_rounds": s.rounds,
            "max_rounds": s.max_rounds,
            "configurations": {n: c.to_dict() for n, c in s.configurations.items()},
            "workloads": {n: {"family": w.family, "options": w.options,
                              "command": [secrets.redact(x) for x in w.command],
                              "figures": list(w.figures),
                              "where": w.where} for n, w in s.workloads.items()},
            "order": self.log, "hooks": self.hooks, "skipped": self.skipped,
            "runs": [r.run_id for r in runs],
            "joined_from_store": sorted({r.run_id for r in runs} -
                                        {r.run_id for r in self.parts}),
            "recommendations": [r.text for r in recs]}
        return Outcome(summary, self.parts, rows, recs, dict(self.skipped), self.failures,
                       self.warnings)


def set_by_configurations(s: Sweep) -> frozenset[str]:
    """The params a configuration's options set (placement, threads ...): what differs between
    configurations by design, so a figure is joined across them without these."""
    return frozenset(k.lstrip("-").replace("-", "_") for c in s.configurations.values()
                     for k in c.options)


def chosen(w: Workload, metrics: list[Metric]) -> list[Metric]:
    """A workload's figures as its criterion weighs them: those it names (and its `where`
    keeps); by energy each one's figure per watt instead, by EDP each one times its figure per
    watt (work squared per joule-second); a figure without its per-watt figure (no counter
    was read) is then left out. The power and per-watt figures are never figures of their own
    here unless named."""
    picked = [m for m in metrics if (m.name in w.figures if w.figures else
                                     not energy_figure(m.name))
              and all(m.params.get(k) in (v if isinstance(v, list) else [v])
                      for k, v in w.where.items())]
    if w.by == "time":
        return picked
    out = []
    for m in picked:
        watt = next((x for x in metrics if x.benchmark == m.benchmark and
                     x.name == m.name + PER_WATT and m.params.items() <= x.params.items()),
                    None)
        if watt is None or len(watt.samples) != len(m.samples):
            continue
        out.append(watt if w.by == "energy" else Metric(
            m.benchmark, f"{m.name}_squared{PER_WATT}", f"({m.unit})²/W", dict(watt.params),
            [a * b for a, b in zip(m.samples, watt.samples, strict=True)]))
    return out


def figures(runs: list[Run], s: Sweep, ignore: NotJoined) -> list[recommend.Figure]:
    """Each workload's figures per configuration as its criterion weighs them, samples pooled
    over its rounds (and boots)."""
    pooled: dict[tuple[str, str, str], recommend.Figure] = {}
    for run in runs:
        info = run.provenance.get(BENCHMARK) or {}
        w = s.workloads.get(info.get("workload", ""))
        if w is None:
            continue
        for m in chosen(w, run.metrics):
            label = describe_params(joined_params(m.params, ignore.of(m.benchmark)))
            figure = f"{m.benchmark}.{m.name}" + (f" {label}" if label else "")
            key = (w.name, figure, info["configuration"])
            got = pooled.get(key)
            samples = [*(got.samples if got else []), *m.samples]
            pooled[key] = recommend.Figure(w.name, figure, m.unit, m.better,
                                           info["configuration"], samples)
    return list(pooled.values())


def write_json(outcome: Outcome, path: str) -> None:
    from hpcprobe.common import files, jsondoc

    files.atomic_write(path, (jsondoc.dumps(outcome.document(), indent=1) + "\n").encode(),
                       "--json")
