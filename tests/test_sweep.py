"""Tuning sweeps: the file checked whole (each mistake one line, exit 2), the statistics behind a
recommendation, state switched in and restored (pre/post, sysfs-like files, a failing pre, a
failing post, Ctrl-C), interleaved rounds with rounds added while undecided, the comparison
and a recommendation per workload in Markdown/JSON/HTML and the store; reboot-only states
joined by tag; and, as root, the worked example of docs/sweep.md: two THP settings x two
OpenMP bindings with the memory family and pgbench, the THP setting restored."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, assert_user_error, hpcprobe
from hpcprobe.analysis import recommend
from hpcprobe.common.errors import UserError
from hpcprobe.results.store import Selection, Store
from hpcprobe.tuning import state
from hpcprobe.tuning.config import Configuration

EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "thp-omp.toml"
THP = "/sys/kernel/mm/transparent_hugepage/enabled"

APP_SWEEP = """
[sweep]
name = "envs"
baseline = "slow"
rounds = 2
max_rounds = 3
budget = "10m"

[workloads.calc]
command = ["sh", "-c", "echo value = $SPEED"]
fom = "value = ([0-9.]+)"
unit = "ops/s"
repeat = 2

[configurations.slow]
env = { SPEED = "10" }
pre = [["touch", "{marker}"]]
post = [["rm", "-f", "{marker}"]]

[configurations.fast]
env = { SPEED = "20" }

[configurations.same]
env = { SPEED = "10" }
"""


def write(tmp: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp / name
    p.write_text(text)
    return p


# -- the file


BAD = [
    ("[sweep\nname = 1", "not valid TOML"),
    ("[sweep]\nnmae = 'x'\n", "unknown key 'nmae'"),
    ("[workloads.m]\nfamily = 'nosuch'\n[configurations.a]\n[configurations.b]\n",
     "family 'nosuch' is unknown"),
    ("[workloads.m]\nfamily = 'memory'\noptions = { colour = 'red' }\n"
     "[configurations.a]\n[configurations.b]\n", "'colour' is not an option of memory"),
    ("[workloads.m]\nfamily = 'memory'\noptions = { threads = 0 }\n"
     "[configurations.a]\n[configurations.b]\n", "threads = 0"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\nexpect = { Colour = 'x' }\n"
     "[configurations.b]\n", "'Colour' is not a fingerprint label"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\n", "a sweep compares at least two"),
    ("[sweep]\nbaseline = 'z'\n[workloads.m]\nfamily = 'memory'\n[configurations.a]\n"
     "[configurations.b]\n", "baseline = 'z' is not a configuration"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\nset = { '/etc/passwd' = 'x' }\n"
     "[configurations.b]\n", "only files under /sys and /proc/sys"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\nset = { '/proc/sys/../../etc/"
     "passwd' = 'x' }\n[configurations.b]\n", "named without . or .."),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\npre = 'tuned-adm'\n"
     "[configurations.b]\n", "give a list of commands"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\nboot = 'NPS4'\n"
     "[configurations.b]\n", "every configuration names the boot"),
    ("[workloads.m]\nfamily = 'memory'\nfigures = ['speed']\n[configurations.a]\n"
     "[configurations.b]\n", "'speed' is not a metric of memory"),
    ("[workloads.a]\ncommand = ['true']\nfom = '([0-9]'\n[configurations.a]\n"
     "[configurations.b]\n", "not a regular expression"),
    ("[workloads.m]\nfamily = 'memory'\n[configurations.a]\noptions = { pg-time = 3 }\n"
     "[configurations.b]\n", "no workload's family takes 'pg-time'"),
    ("[workloads.a]\ncommand = ['true']\n[configurations.sweep]\n[configurations.b]\n",
     "the summary's tag"),
    ("[sweep]\nbudget = 'soon'\n[workloads.m]\nfamily = 'memory'\n[configurations.a]\n"
     "[configurations.b]\n", "give a duration"),
    ("[workloads.m]\nfamily = 'memory'\nby = 'joules'\n[configurations.a]\n"
     "[configurations.b]\n", "by = 'joules': give one of time, energy, edp"),
]


@pytest.mark.parametrize(("text", "needle"), BAD, ids=[n for _, n in BAD])
def test_a_bad_sweep_file_is_one_line(tmp_path, text, needle):
    assert_user_error(hpcprobe("sweep", str(write(tmp_path, text)), "--dry-run"), needle)


def test_a_missing_file_and_a_boot_not_named(tmp_path):
    assert_user_error(hpcprobe("sweep", str(tmp_path / "none.toml")), "no such sweep file")
    f = write(tmp_path, "[workloads.a]\ncommand = ['true']\n[configurations.nps1]\n"
                        "boot = 'NPS1'\n[configurations.nps4]\nboot = 'NPS4'\n")
    assert_user_error(hpcprobe("sweep", str(f), "--db", str(tmp_path / "r.sqlite")),
                      "need boots NPS1, NPS4", "--boot")
    assert_user_error(hpcprobe("sweep", str(f), "--boot", "NPS2", "--db",
                               str(tmp_path / "r.sqlite")), "--boot NPS2")


@pytest.mark.parametrize("extra, needle", [
    ("pre = [['/nonexistent/tool', '--on']]\n", "no executable '/nonexistent/tool'"),
    ("post = [['no-such-command-here']]\n", "no executable 'no-such-command-here'"),
    ("set = { '/sys/kernel/mm/no-such-knob' = '1' }\n", "not writable here"),
])
def test_the_dry_run_refuses_what_the_sweep_refuses(tmp_path, extra, needle):
    f = write(tmp_path, "[workloads.a]\ncommand = ['true']\n[configurations.y]\n"
              "[configurations.x]\n" + extra)
    db = tmp_path / "r.sqlite"
    for args in (["--dry-run"], ["--db", str(db)]):
        assert_user_error(hpcprobe("sweep", str(f), *args), needle)
    assert not db.exists()
    boots = write(tmp_path, "[workloads.a]\ncommand = ['true']\n[configurations.n1]\n"
                  "boot = 'NPS1'\n[configurations.n4]\nboot = 'NPS4'\n", "boots.toml")
    assert_user_error(hpcprobe("sweep", str(boots), "--boot", "NPS2", "--dry-run"),
                      "--boot NPS2")
    assert_user_error(hpcprobe("sweep", str(boots), "--dry-run"), "need boots NPS1, NPS4")


def test_the_dry_run_shows_each_configurations_steps_in_order(tmp_path):
    r = hpcprobe("sweep", str(EXAMPLE), "--dry-run")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    names = [ln.strip().rstrip(":") for ln in lines if re.match(r"^  \S+:$", ln)]
    assert names == ["madvise-close", "madvise-spread", "always-close", "always-spread"]
    assert f"set {THP} = always (restored after)" in r.out
    assert "OMP_PROC_BIND=spread" in r.out and "--placement spread" in r.out
    assert "run pgbench --pg-time 2" in r.out


def test_the_mpi_example_sets_each_configurations_mca_variable():
    r = hpcprobe("sweep", str(EXAMPLE.with_name("mpi-eager.toml")), "--dry-run")
    assert r.code == 0, r.err
    runs = [ln.strip() for ln in r.out.splitlines() if "pt2pt:" in ln]
    assert len(runs) == 3 and all("run mpi --tests latency,bandwidth" in ln for ln in runs)
    assert "OMPI_MCA" not in runs[0]
    assert "OMPI_MCA_btl_vader_eager_limit=32768" in runs[1]
    assert "OMPI_MCA_btl_vader_single_copy_mechanism=none" in runs[2]


def test_the_collective_example_forces_each_allreduce_algorithm():
    r = hpcprobe("sweep", str(EXAMPLE.with_name("mpi-allreduce.toml")), "--dry-run")
    assert r.code == 0, r.err
    runs = [ln.strip() for ln in r.out.splitlines() if ln.strip().startswith("allreduce:")]
    assert len(runs) == 4 and all("run mpi --tests allreduce" in ln for ln in runs)
    assert "OMPI_MCA" not in runs[0]
    for line, algorithm in zip(runs[1:], "346", strict=True):
        assert "OMPI_MCA_coll_tuned_use_dynamic_rules=1" in line
        assert f"OMPI_MCA_coll_tuned_allreduce_algorithm={algorithm}" in line


REFUSED = APP_SWEEP + """
[workloads.typo]
family = "memory"
options = { kernel = "daxpy", threads = 1 }

[workloads.gone]
command = ["/nonexistent/bin/solver"]
"""


def test_the_dry_run_runs_each_workloads_own_dry_run(tmp_path):
    # what only a family's planning or the app's command check knows: said before any run
    r = hpcprobe("sweep", str(write(tmp_path, REFUSED.replace("{marker}", "m"))), "--dry-run")
    assert_user_error(r, "6 step(s) refused")
    refused = [ln.strip() for ln in r.out.splitlines() if "refused" in ln]
    assert len(refused) == 6  # two workloads under three configurations
    assert sum("--kernel 'daxpy' is unknown" in ln for ln in refused) == 3
    assert sum("/nonexistent/bin/solver is not an executable" in ln for ln in refused) == 3


def test_a_refused_workload_stops_the_sweep_at_once_and_restores(tmp_path):
    marker = tmp_path / "m"
    text = REFUSED.replace("{marker}", str(marker))
    db = tmp_path / "r.sqlite"
    r = hpcprobe("sweep", str(write(tmp_path, text)), "--db", str(db))
    # found after the first workload ran: that run's warnings (a busy host's) may come first
    assert_user_error(r, "[workloads.typo] under slow: --kernel 'daxpy' is unknown",
                      "the sweep stopped", measured=True)
    assert not marker.exists()  # the post of the configuration ran: its state restored
    with Store.open(db, create=False) as st:  # the workload before it ran, once
        assert [i.tag for i in st.runs()] == ["envs:slow"]


#: A wrapper that runs its child, then sets in the child's run document the findings of its
#: node sentinel: none (the host's own moves dropped: a host cannot be made to hold still, nor
#: to change on cue), or, with MOVED set, the one a sentinel that moved would have left.
MOVED = """\
import json, subprocess, sys
rc = subprocess.call(sys.argv[1:])
doc = sys.argv[sys.argv.index("--json") + 1]
with open(doc) as f:
    d = json.load(f)
d["findings"] = [f for f in d["findings"] if f["kind"] != "node_changed"]
if MOVED:
    d["findings"].append({"benchmark": "frequency", "kind": "node_changed", "before": 50.0,
                          "after": 30.0, "ratio": 0.6, "message": "moved"})
with open(doc, "w") as f:
    json.dump(d, f)
sys.exit(rc)
"""


def test_a_workload_run_during_which_the_node_changed_is_a_warning(tmp_path):
    for name, moved in (("steady", False), ("moved", True)):
        (tmp_path / f"{name}.py").write_text(f"MOVED = {moved}\n" + MOVED)
    text = ("[sweep]\nname = 'moves'\nbaseline = 'a'\nrounds = 2\nmax_rounds = 2\n"
            "profile = 'quick'\n[workloads.clock]\nfamily = 'frequency'\n"
            "options = { threads = '1' }\n"
            f"[configurations.a]\nwrap = ['{sys.executable}', '{tmp_path / 'steady.py'}']\n"
            f"[configurations.b]\nwrap = ['{sys.executable}', '{tmp_path / 'moved.py'}']\n")
    out = tmp_path / "sweep.json"
    r = hpcprobe("sweep", str(write(tmp_path, text)), "--no-store", "--json", str(out))
    assert r.code == 0, r.err
    said = [w for w in json.loads(out.read_text())["warnings"] if "sentinel" in w]
    assert said == [f"round {n}, b, clock: the node's DRAM triad (its sentinel) moved while "
                    "frequency ran (x0.60): its figures may mix two states of the node; the "
                    "interleaved rounds spread such a change over the configurations, and more "
                    "rounds (max_rounds) outweigh it" for n in (1, 2)]


def test_a_setting_outside_its_choice_list_is_refused(tmp_path):
    choices = tmp_path / "enabled"  # a sysfs choice list, as the kernel shows THP's
    choices.write_text("always [madvise] never\n")
    assert state.refused_value(str(choices), "never") is None
    assert "it takes one of always, madvise, never" in state.refused_value(str(choices), "on")
    if not os.path.exists(THP):
        return
    text = ("[workloads.a]\ncommand = ['true']\n[configurations.a]\n"
            f"set = {{ '{THP}' = 'sometimes' }}\n[configurations.b]\n")
    r = hpcprobe("sweep", str(write(tmp_path, text)), "--dry-run")
    assert_user_error(r, "1 step(s) refused")
    assert f"refused: set {THP} = sometimes: it takes one of always" in r.out


# -- the statistics


def test_holm_adjusts_in_order_and_stays_monotone():
    assert recommend.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert recommend.holm([0.5]) == [0.5]


def fig(config: str, samples: list[float], better: str = "higher") -> recommend.Figure:
    return recommend.Figure("w", "f", "x", better, config, samples)


def test_verdicts_better_worse_none_and_undecided():
    base = [100.0, 101, 99, 100.5, 99.5, 100.2, 99.8, 100.1]
    figs = [fig("base", base), fig("up", [x * 1.13 for x in base]),
            fig("down", [x * 0.8 for x in base]), fig("same", [x * 1.001 for x in base]),
            fig("noisy", [60.0, 150, 95, 130, 70, 120, 80, 140])]
    rows = {r.configuration: r for r in recommend.rows(figs, "base")}
    assert rows["up"].verdict == "better" and rows["up"].gain == pytest.approx(0.13, abs=0.01)
    assert rows["down"].verdict == "worse"
    assert rows["same"].verdict == "~"
    assert rows["noisy"].verdict == "undecided"
    assert not recommend.decided(list(rows.values()))
    [rec] = recommend.recommend(list(rows.values()), "base", 3)
    assert rec.choice == "up" and rec.decided and "+13.0%" in rec.text and "p < 0.001" in rec.text


def test_lower_is_better_turns_the_gain_around():
    base = [10.0, 10.1, 9.9, 10.05, 9.95, 10.0]
    rows = recommend.rows([fig("base", base, "lower"), fig("quick", [x / 2 for x in base],
                                                            "lower")], "base")
    assert rows[0].verdict == "better" and rows[0].gain == pytest.approx(1.0, abs=0.02)
    lo, hi = rows[0].gain_ci
    assert lo <= rows[0].gain <= hi


def test_no_difference_recommends_the_baseline():
    base = [5.0] * 6
    rows = recommend.rows([fig("base", base), fig("other", list(base))], "base")
    [rec] = recommend.recommend(rows, "base", 2)
    assert rec.choice == "base" and rec.decided and "no detectable difference (~)" in rec.text


# -- state in and out


def config(tmp: Path, **kw: object) -> Configuration:
    return Configuration("c", **kw)  # type: ignore[arg-type]


def test_a_setting_is_restored_and_pre_post_run_in_order(tmp_path):
    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    log = tmp_path / "log"
    c = config(tmp_path, sysfs={str(f): "never"},
               pre=(("sh", "-c", f"echo pre >> {log}"),),
               post=(("sh", "-c", f"echo post >> {log}"),))
    steps: list[dict] = []
    with state.applied(c, print, steps):
        assert f.read_text() == "never\n"
        assert log.read_text() == "pre\n"
    assert f.read_text() == "madvise\n"  # the selected value of the choice list
    assert log.read_text() == "pre\npost\n"
    assert [s["step"] for s in steps] == ["set", "pre", "post", "restore"]


def test_a_pattern_sets_every_cpus_file_and_restores_each(tmp_path):
    """`cpu*/cpufreq/scaling_governor` (a per-CPU setting, as tuned's profiles make it) sets
    each CPU's file and puts back each one's own value; a pattern that matches nothing is
    refused before anything runs."""
    for cpu, gov in enumerate(("powersave", "schedutil", "powersave")):
        (tmp_path / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    files = sorted(tmp_path.glob("cpu*/cpufreq/scaling_governor"))
    pattern = str(tmp_path / "cpu*" / "cpufreq" / "scaling_governor")
    c = config(tmp_path, sysfs={pattern: "performance"})
    state.check_settable(c.sysfs, "[configurations.c]")
    steps: list[dict] = []
    with state.applied(c, print, steps):
        assert [f.read_text() for f in files] == ["performance\n"] * 3
    assert [f.read_text() for f in files] == ["powersave\n", "schedutil\n", "powersave\n"]
    assert [s["what"] for s in steps if s["step"] == "restore"] == [str(f) for f in files][::-1]
    with pytest.raises(UserError, match=r"cpu9\*/x: matches no file here"):
        state.check_writable({str(tmp_path / "cpu9*" / "x"): "1"}, "[configurations.c]")


def test_a_failing_pre_restores_and_says_why(tmp_path):
    f = tmp_path / "knob"
    f.write_text("1\n")
    log = tmp_path / "log"
    c = config(tmp_path, sysfs={str(f): "0"}, pre=(("sh", "-c", "echo nope; exit 3"),),
               post=(("sh", "-c", f"echo post >> {log}"),))
    with pytest.raises(state.PreFailed, match="exited with 3.*nope"):
        with state.applied(c, print, []):
            raise AssertionError("the body must not run")
    assert f.read_text() == "1\n" and log.read_text() == "post\n"


def test_ctrl_c_in_the_body_restores_state(tmp_path):
    f = tmp_path / "knob"
    f.write_text("on\n")
    c = config(tmp_path, sysfs={str(f): "off"})
    with pytest.raises(KeyboardInterrupt):
        with state.applied(c, print, []):
            raise KeyboardInterrupt
    assert f.read_text() == "on\n"


def test_a_failing_post_is_a_loud_warning_naming_the_state(tmp_path):
    said: list[str] = []
    c = config(tmp_path, post=(("false",),), expect={"THP": "never"})
    with state.applied(c, said.append, []):
        pass
    assert len(said) == 1 and said[0].startswith("WARNING: c: post `false` exited with 1")
    assert "THP = never" in said[0]


# -- whole sweeps (user applications: no root needed)


def test_a_sweep_interleaves_decides_and_recommends(tmp_path):
    marker = tmp_path / "pre-ran"
    f = write(tmp_path, APP_SWEEP.replace("{marker}", str(marker)))
    db = tmp_path / "r.sqlite"
    out = {k: tmp_path / f"out.{k}" for k in ("md", "json", "html")}
    r = hpcprobe("sweep", str(f), "--db", str(db), "--markdown", str(out["md"]), "--json",
                 str(out["json"]), "--report", str(out["html"]))
    assert r.code == 0, r.out[-3000:] + r.err
    assert not marker.exists()  # post ran after the last visit
    doc = json.loads(out["json"].read_text())
    order = [(s["round"], s["configuration"]) for s in doc["sweep"]["order"]]
    assert order == [(1, "slow"), (1, "fast"), (1, "same"), (2, "slow"), (2, "fast"),
                     (2, "same")]  # A B C A B C, and decided after the two rounds asked for
    assert doc["decided"] and doc["sweep"]["stopped"] == "decided after 2 round(s)"
    verdicts = {r["configuration"]: r["verdict"] for r in doc["rows"]}
    assert verdicts == {"fast": "better", "same": "~"}
    [rec] = doc["recommendations"]
    assert rec["choice"] == "fast"
    assert rec["text"].startswith("for calc (app.app:calc): fast (+100.0%")
    assert "fast (+100.0%" in out["md"].read_text()
    assert "Every configuration against slow" in out["html"].read_text()
    with Store.open(db) as st:
        runs = st.load_all(Selection(tag="envs:fast"))
        assert len(runs) == 2 and all(r.select("app", "app:calc")[0].samples == [20.0, 20.0]
                                      for r in runs)
        assert st.load_all(Selection(tag="envs:sweep"))[0].benchmarks == ["sweep"]
    hooks = [(h["configuration"], h["step"]) for h in doc["sweep"]["hooks"]]
    assert hooks == [("slow", "pre"), ("slow", "post")] * 2


def test_rounds_are_added_while_undecided_up_to_the_most(tmp_path):
    text = APP_SWEEP.replace('command = ["sh", "-c", "echo value = $SPEED"]',
                             'command = ["sh", "-c", "echo value = $(( $$ % 7 + $SPEED ))"]')
    text = text.replace('env = { SPEED = "20" }', 'env = { SPEED = "10" }')
    f = write(tmp_path, text.replace("{marker}", str(tmp_path / "m")))
    r = hpcprobe("sweep", str(f), "--no-store", "--json", "-")
    assert r.code == 0, r.err
    doc = json.loads(r.out)  # the document alone on standard output, the tables on stderr
    assert "Recommend" in r.err
    rounds = doc["sweep"]["rounds"]
    assert 2 <= rounds <= 3
    if not doc["decided"]:  # noise of process ids: the most rounds were taken
        assert rounds == 3 and "not every comparison decided" in doc["sweep"]["stopped"]
        assert "Round 2: not every comparison decided; one more round." in r.err


def test_a_failing_pre_and_a_wrong_state_skip_their_configuration_only(tmp_path):
    text = APP_SWEEP.replace("{marker}", str(tmp_path / "m"))
    text = text.replace('[configurations.fast]\nenv = { SPEED = "20" }',
                        '[configurations.fast]\nenv = { SPEED = "20" }\n'
                        'pre = [["sh", "-c", "echo cannot switch; exit 4"]]\n'
                        f'post = [["touch", "{tmp_path / "restored"}"]]')
    text = text.replace('[configurations.same]\nenv = { SPEED = "10" }',
                        '[configurations.same]\nenv = { SPEED = "10", OMP_PROC_BIND = "spread" }'
                        '\nexpect = { "env OMP_PROC_BIND" = "close" }')
    f = write(tmp_path, text)
    r = hpcprobe("sweep", str(f), "--db", str(tmp_path / "r.sqlite"), "--json",
                 str(tmp_path / "o.json"))
    assert r.code == 2, r.err
    doc = json.loads((tmp_path / "o.json").read_text())
    skipped = doc["sweep"]["skipped"]
    assert set(skipped) == {"fast", "same"}
    assert "exited with 4" in skipped["fast"] and "cannot switch" in skipped["fast"]
    assert "env OMP_PROC_BIND is spread, not close" in skipped["same"]
    assert (tmp_path / "restored").exists()  # its post ran: state restored
    assert "fast: skipped for the rest of the sweep" in r.err
    # the baseline's runs are kept, and nothing of a skipped configuration counted
    with Store.open(tmp_path / "r.sqlite") as st:
        assert len(st.load_all(Selection(tag="envs:slow"))) == 2
        assert st.load_all(Selection(tag="envs:same")) == []


def test_a_failing_workload_is_reported_and_the_others_go_on(tmp_path):
    # two configurations (each workload's child is a whole `hpcprobe app` run: 1.7 s here)
    text = APP_SWEEP.replace("{marker}", str(tmp_path / "m")).split("[configurations.same]")[0] \
        + """
[workloads.broken]
command = ["sh", "-c", "echo disk on fire; exit 5"]
"""
    r = hpcprobe("sweep", str(write(tmp_path, text)), "--no-store", "--json",
                 str(tmp_path / "o.json"))
    assert r.code == 1, r.err
    doc = json.loads((tmp_path / "o.json").read_text())
    assert {x["workload"] for x in doc["recommendations"]} == {"calc"}
    errors = [s for s in doc["sweep"]["order"] if s.get("error")]
    assert len(errors) == 4 and all("disk on fire" in s["error"] for s in errors)


def test_sigterm_mid_sweep_restores_state_and_keeps_what_ran(tmp_path):
    marker = tmp_path / "pre-ran"
    text = APP_SWEEP.replace("{marker}", str(marker)).replace(
        'command = ["sh", "-c", "echo value = $SPEED"]',
        'command = ["sh", "-c", "sleep 0.3; echo value = $SPEED"]').replace(
        'baseline = "slow"', 'baseline = "fast"')
    db = tmp_path / "r.sqlite"
    p = subprocess.Popen([sys.executable, "-m", "hpcprobe", "sweep",
                          str(write(tmp_path, text)), "--db", str(db)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:  # inside "slow", after its pre
        time.sleep(0.05)
    assert marker.exists()
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "state was restored" in err and "Traceback" not in err
    assert not marker.exists()  # its post ran


# -- reboot-only states


def test_boots_are_run_apart_and_joined_by_tag(tmp_path):
    text = APP_SWEEP.replace("{marker}", str(tmp_path / "m"))
    text = text.replace('[configurations.slow]\n', '[configurations.slow]\nboot = "NPS1"\n')
    text = text.replace('[configurations.fast]\n', '[configurations.fast]\nboot = "NPS4"\n')
    text = text.replace('[configurations.same]\n', '[configurations.same]\nboot = "NPS4"\n')
    f = write(tmp_path, text)
    db = str(tmp_path / "r.sqlite")
    first = hpcprobe("sweep", str(f), "--boot", "NPS1", "--db", db)
    assert first.code == 0, first.err
    second = hpcprobe("sweep", str(f), "--boot", "NPS4", "--db", db, "--json",
                      str(tmp_path / "o.json"))
    assert second.code == 0, second.err
    doc = json.loads((tmp_path / "o.json").read_text())
    assert len(doc["sweep"]["joined_from_store"]) == 2  # the NPS1 boot's two runs
    assert {(s["configuration"]) for s in doc["sweep"]["order"]} == {"fast", "same"}
    assert doc["recommendations"][0]["choice"] == "fast"
    again = hpcprobe("sweep", str(f), "--analyse", "--db", db, "--json",
                     str(tmp_path / "a.json"))
    assert again.code == 0, again.err
    assert json.loads((tmp_path / "a.json").read_text())["recommendations"][0]["choice"] == "fast"


# -- the worked example, as root


@pytest.mark.alone  # it switches the machine's THP setting under every test beside it
@pytest.mark.skipif(os.geteuid() != 0 or not os.access(THP, os.W_OK),
                    reason="the worked example writes the THP setting: root only")
def test_the_worked_example_sweeps_thp_and_binding_and_restores_thp(tmp_path, pg_url):
    before = Path(THP).read_text()
    # the documented file, made shorter: one round (the rounds a sweep adds are
    # test_rounds_are_added_while_undecided_up_to_the_most's), small sizes, one one-second
    # pgbench a visit, against the session's PostgreSQL server (a throwaway server each visit
    # took 3 s; test_tools starts one): 24 s, where two rounds with throwaway servers took 63
    text = EXAMPLE.read_text().replace("rounds = 2", "rounds = 1").replace(
        "max_rounds = 4", "max_rounds = 1").replace('size = "256MiB"', 'size = "64MiB"').replace(
        "pg-time = 2", f'pg-time = 1, pg-url = "{pg_url}"').replace("repeat = 3", "repeat = 1")
    assert pg_url in text and "max_rounds = 1" in text
    f = write(tmp_path, text, "thp-omp.toml")
    r = hpcprobe("sweep", str(f), "--db", str(tmp_path / "r.sqlite"), "--json",
                 str(tmp_path / "o.json"), "--markdown", str(tmp_path / "o.md"), timeout=900)
    assert Path(THP).read_text() == before  # restored
    assert r.code in (0, 1), r.err
    doc = json.loads((tmp_path / "o.json").read_text())
    configs = ["madvise-close", "madvise-spread", "always-close", "always-spread"]
    order = [(s["round"], s["configuration"]) for s in doc["sweep"]["order"]]
    assert order == [(1, c) for c in configs for _ in range(2)]
    assert doc["sweep"]["skipped"] == {}
    sets = [h for h in doc["sweep"]["hooks"] if h["step"] == "set"]
    assert [h["value"] for h in sets] == ["madvise", "madvise", "always", "always"]
    restores = [h for h in doc["sweep"]["hooks"] if h["step"] == "restore"]
    assert len(restores) == 4
    rows = {(x["workload"], x["configuration"]) for x in doc["rows"]}
    assert rows == {(w, c) for w in ("memory", "oltp") for c in configs[1:]}
    assert {x["workload"] for x in doc["recommendations"]} == {"memory", "oltp"}
    md = (tmp_path / "o.md").read_text()
    assert "for memory (memory.bandwidth" in md and "for oltp (pgbench.tps" in md


def test_two_documents_on_standard_output_are_refused_before_any_work(tmp_path):
    marker = tmp_path / "m"
    text = APP_SWEEP.replace('post = [["rm", "-f", "{marker}"]]\n', "")
    f = write(tmp_path, text.replace("{marker}", str(marker)))
    r = hpcprobe("sweep", str(f), "--no-store", "--json", "-", "--markdown", "-")
    assert_user_error(r, "--json and --markdown", "standard output")
    assert not marker.exists()  # no configuration was switched to


def test_where_keeps_the_figures_whose_params_have_one_of_its_values():
    from hpcprobe import registry
    from hpcprobe.results.model import Metric, Run
    from hpcprobe.tuning import config, sweep

    s = config.load(EXAMPLE.with_name("mpi-eager.toml"), registry.families(), [])
    assert s.workloads["pt2pt"].where == {"size_bytes": [8, 4096, 65536, 1048576]}
    params = {"ranks": 2, "placement": "one-per-core", "pair": "intra-l3", "cpus": "0-1",
              "hosts": "", "pairs": 1, "launcher": "mpirun", "binding": "0;1", "mpi": "x"}
    run = Run("r1", "2026-01-01T00:00:00+00:00", "n1", "quick", ["mpi"],
              {sweep.BENCHMARK: {"configuration": "defaults", "workload": "pt2pt"}}, {},
              metrics=[Metric("mpi", name, "us", dict(params, size_bytes=size), [1.0, 1.1])
                       for name in ("latency", "bibw") for size in (4, 8, 4096, 8192)])
    got = sweep.figures([run], s, registry.not_joined())
    assert sorted((f.figure.split()[0], f.figure.split("size=")[1]) for f in got) == [
        ("mpi.latency", "4 KiB"), ("mpi.latency", "8 B")]  # bibw is not among its figures


def test_a_where_that_keeps_no_figure_says_what_the_runs_have(tmp_path):
    text = APP_SWEEP.replace("{marker}", str(tmp_path / "m")).replace(
        'repeat = 2\n', 'repeat = 2\nwhere = { sizes = [1, 2] }\n').replace(
        "max_rounds = 3", "max_rounds = 2")
    f = write(tmp_path, text)
    r = hpcprobe("sweep", str(f), "--no-store", "--json", str(tmp_path / "o.json"))
    assert r.code == 0, r.err
    doc = json.loads((tmp_path / "o.json").read_text())
    said = [w for w in doc["warnings"] if w.startswith("[workloads.calc]")]
    assert len(said) == 1 and "its where (sizes = [1, 2])" in said[0]
    assert "their params: " in said[0] and "another boot" not in " ".join(doc["warnings"])
    assert "warning: [workloads.calc]: no figure of its runs" in r.err.replace("\n", " ")


def _energy_runs() -> list:
    """Recorded energies of one memory workload under two configurations: `lean` streams
    100 GB/s at 200 W, `fast` 120 GB/s at 260 W (faster, less work per joule, and a better
    energy-delay product)."""
    import random

    from hpcprobe.results.model import Metric, Run
    from hpcprobe.tuning import sweep

    rng, runs = random.Random(7), []
    params = {"kernel": "triad", "stores": "regular", "threads": 2, "placement": "compact",
              "cpus": "0-1", "size_bytes": 1 << 28, "level": "DRAM", "isa": "avx2"}
    for c, gbs, watts in (("lean", 100.0, 200.0), ("fast", 120.0, 260.0)):
        for rnd in range(3):
            bw = [gbs * (1 + rng.gauss(0, 0.005)) for _ in range(8)]
            with_domains = dict(params, domains="package-0")
            runs.append(Run(f"{c}{rnd}", "2026-01-01T00:00:00+00:00", "n1", "quick",
                            ["memory"], {sweep.BENCHMARK: {"configuration": c,
                                                           "workload": "stream"}}, {},
                            metrics=[Metric("memory", "bandwidth", "GB/s", dict(params), bw),
                                     Metric("memory", "power", "W", with_domains, [watts],
                                            "lower"),
                                     Metric("memory", "bandwidth_per_watt", "GB/s/W",
                                            dict(with_domains), [x / watts for x in bw])]))
    return runs


@pytest.mark.parametrize(("by", "choice", "figure"), [
    ("time", "fast", "memory.bandwidth"), ("energy", "lean", "memory.bandwidth_per_watt"),
    ("edp", "fast", "memory.bandwidth_squared_per_watt")])
def test_the_sweep_recommends_by_time_energy_or_energy_delay(tmp_path, by, choice, figure):
    """One sweep's recorded energies, three criteria, and what each trades: the faster
    configuration by time, the leaner by work per joule, the faster again by the energy-delay
    product (20 % faster for 30 % more power)."""
    from hpcprobe import registry
    from hpcprobe.analysis import recommend
    from hpcprobe.tuning import config, sweep

    f = write(tmp_path, "[sweep]\nbaseline = 'lean'\n[workloads.stream]\nfamily = 'memory'\n"
              f"figures = ['bandwidth']\nby = '{by}'\n[configurations.lean]\n"
              "[configurations.fast]\n")
    s = config.load(f, registry.families(), [])
    got = sweep.figures(_energy_runs(), s, registry.not_joined())
    assert {g.figure.split(" ")[0] for g in got} == {figure}  # power never a figure of its own
    [rec] = recommend.recommend(recommend.rows(got, "lean"), "lean", 3)
    assert rec.decided and rec.choice == choice, rec.text


def test_by_energy_without_counters_recommends_nothing_and_says_why(tmp_path):
    from hpcprobe import registry
    from hpcprobe.tuning import config, sweep

    f = write(tmp_path, "[sweep]\nbaseline = 'lean'\n[workloads.stream]\nfamily = 'memory'\n"
              "by = 'energy'\n[configurations.lean]\n[configurations.fast]\n")
    s = config.load(f, registry.families(), [])
    runs = _energy_runs()
    for r in runs:
        r.metrics = [m for m in r.metrics if m.name == "bandwidth"]
    assert sweep.figures(runs, s, registry.not_joined()) == []


def test_a_sweep_by_energy_where_no_counter_is_read_says_so(tmp_path):
    """This kind of VM: no figure per watt, so the workload by energy has no recommendation,
    and one warning says why (never a zero, never a verdict on time instead)."""
    text = APP_SWEEP.replace("{marker}", str(tmp_path / "m")).replace(
        'repeat = 2\n', 'repeat = 2\nby = "energy"\n').replace(
        "rounds = 2\nmax_rounds = 3", "rounds = 1\nmax_rounds = 1").replace(
        '[configurations.same]\nenv = { SPEED = "10" }\n', "")
    r = hpcprobe("sweep", str(write(tmp_path, text)), "--no-store", "--json",
                 str(tmp_path / "o.json"))
    assert r.code == 0, r.err
    doc = json.loads((tmp_path / "o.json").read_text())
    said = [w for w in doc["warnings"] if w.startswith("[workloads.calc]")]
    assert len(said) == 1 and "by energy: none of its figures has a figure per watt" in said[0]
    assert doc["recommendations"] == []


def test_the_energy_example_loads_and_weighs_each_workload_as_it_says():
    """docs/examples/tuned-energy.toml: valid, each workload's criterion as named, each
    configuration's tuned profile in order."""
    from hpcprobe import registry
    from hpcprobe.machine import topology
    from hpcprobe.tuning import config, sweep

    labels = sweep.fingerprint_labels(topology.load_xml(DATA / "tiny-2c.xml"), "scalar")
    s = config.load(EXAMPLE.with_name("tuned-energy.toml"), registry.families(), labels)
    assert {w.name: w.by for w in s.workloads.values()} == {
        "peak-time": "time", "peak-energy": "energy", "peak-edp": "edp",
        "stream-energy": "energy"}
    assert [c.pre for c in s.configurations.values()] == [
        (("tuned-adm", "profile", p),) for p in ("balanced", "throughput-performance",
                                                 "powersave")]


def test_the_sysfs_energy_example_sets_what_tuneds_profiles_set():
    """docs/examples/sysfs-energy.toml: valid; each configuration sets the governor, the
    preference and energy_perf_bias of every CPU (patterns) and turbo; refused here, where no
    cpufreq file exists, in one line before anything runs."""
    from hpcprobe import registry
    from hpcprobe.machine import topology
    from hpcprobe.tuning import config, sweep

    labels = sweep.fingerprint_labels(topology.load_xml(DATA / "tiny-2c.xml"), "scalar")
    s = config.load(EXAMPLE.with_name("sysfs-energy.toml"), registry.families(), labels)
    assert {w.by for w in s.workloads.values()} == {"time", "energy", "edp"}
    cpus = "/sys/devices/system/cpu/cpu*/"
    assert [{k.removeprefix(cpus): v for k, v in c.sysfs.items()}
            for c in s.configurations.values()] == [
        {"cpufreq/scaling_governor": g, "cpufreq/energy_performance_preference": p,
         "power/energy_perf_bias": b, "/sys/devices/system/cpu/intel_pstate/no_turbo": t}
        for g, p, b, t in (("powersave", "balance_performance", "6", "0"),
                           ("performance", "performance", "0", "0"),
                           ("powersave", "power", "15", "1"))]
    if not list(Path("/sys/devices/system/cpu").glob("cpu*/cpufreq/scaling_governor")):
        assert_user_error(hpcprobe("sweep", str(EXAMPLE.with_name("sysfs-energy.toml")),
                                   "--dry-run"), "cpufreq/scaling_governor: matches no file")


def test_the_gpu_power_limit_example_loads_and_restores_the_default_limit():
    """docs/examples/gpu-power-limit.toml: valid (each option one of the GPU family's), each
    workload's criterion as named, each lowered limit set in `pre` and the default put back in
    `post` (which runs whatever happens to the configuration)."""
    from hpcprobe import registry
    from hpcprobe.machine import topology
    from hpcprobe.tuning import config, sweep

    labels = sweep.fingerprint_labels(topology.load_xml(DATA / "tiny-2c.xml"), "scalar")
    s = config.load(EXAMPLE.with_name("gpu-power-limit.toml"), registry.families(), labels)
    assert {w.name: (w.family, w.by) for w in s.workloads.values()} == {
        "gemm-time": ("gpu", "time"), "gemm-energy": ("gpu", "energy"),
        "gemm-edp": ("gpu", "edp"), "hbm-energy": ("gpu", "energy")}
    limit = ("nvidia-smi", "-i", "0", "-pl")
    assert [(c.name, c.pre, c.post) for c in s.configurations.values()] == [
        ("700W", (), ()), ("500W", ((*limit, "500"),), ((*limit, "700"),)),
        ("350W", ((*limit, "350"),), ((*limit, "700"),))]
