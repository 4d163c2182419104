#!/usr/bin/env bash
# The test suite in two passes (`make test`): first every test but those marked `alone`, on all
# CPUs at once (pytest-xdist, a test file on one worker, and the files that start a namespace
# Slurm cluster together on one, tests/conftest.py); then the `alone` ones, with nothing beside
# them: they measure figures and judge them, and a test running beside them makes the node busy
# (its figures then go unjudged, and a campaign's injected slow node is not found).
# Usage: scripts/test-suite.sh PYTHON [PYTEST ARGUMENTS...]; exit status: pytest's.
set -u
py=$1
shift
# a worker per CPU (one more gained 25 s of 12 min here, and made a timed test fail)
workers=$(nproc)
((workers > 1)) || workers=0  # one CPU: no worker processes
# pytest keeps the test modules it rewrote (their asserts) only where Python may write bytecode:
# otherwise each of the passes' three pytest processes rewrites all of them again (8 s here)
export PYTHONDONTWRITEBYTECODE=
rest=0
alone=0
"$py" -m pytest -n "$workers" --dist loadfile -m "not alone" "$@" || rest=$?
"$py" -m pytest -m alone "$@" || alone=$?
# 5: a pass that collected nothing (arguments naming tests of one kind only)
for code in "$rest" "$alone"; do
    if ((code != 0 && code != 5)); then
        exit "$code"
    fi
done
((rest == 5 && alone == 5)) && exit 5
exit 0
