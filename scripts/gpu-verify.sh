#!/usr/bin/env bash
# The GPU family's runtime check on a node with NVIDIA GPUs, in one go, for a node lent for a
# few minutes (a device machine without network): set up from a wheelhouse, the GPU tests, the
# family's default run, its check, and what the driver says, all written into OUT.
#
# usage: scripts/gpu-verify.sh OUT [WHEELHOUSE]
#   OUT         a directory for the results: summary.txt (the figures to read first),
#               pytest-gpu.txt, gpu.txt and gpu.json (`hpcprobe gpu`), check.txt (`gpu check`),
#               vs-torch.txt (benchmarks/gpu_vs_torch.py), nvidia-smi.xml (`-q -x`) and
#               nvlink.txt (`nvlink -s`)
#   WHEELHOUSE  wheels for the set-up where the node has no network: on a machine with it,
#               `make wheelhouse WHEELHOUSE=DIR WHEEL_PYTHON=<the node's Python, e.g. 3.12>`,
#               less the wheels of packages the node's python3 already has
# Each step's exit code is in summary.txt; a failing step does not stop the others.
set -uo pipefail
[[ $# -ge 1 && $# -le 2 && -n $1 ]] || { echo "usage: scripts/gpu-verify.sh OUT [WHEELHOUSE]" >&2; exit 2; }
out=$(realpath -m "$1")
mkdir -p "$out" || exit 2
cd "$(dirname "$0")/.." || exit 2
summary=$out/summary.txt
: >"$summary"
step() {  # step NAME FILE COMMAND...: run it, its output into FILE, its exit code into the summary
    local name=$1 file=$2
    shift 2
    local t0=$SECONDS
    "$@" >"$file" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - t0)) s" >>"$summary"
    ((rc == 0)) || tail -n 3 "$file" | sed 's/^/    /' >>"$summary"
}

# the Python set-up alone: the Debian packages are not needed here, and apt on a node without
# network can wait minutes for a mirror. The venv reuses what the node's python3 has (a GPU
# image's NumPy, SciPy, PyTorch), so the wheelhouse need hold only what it lacks
step setup "$out/setup.txt" make .venv/.hpcprobe-installed VENV_FLAGS=--system-site-packages \
    ${2:+WHEELHOUSE="$2"}
step nvidia-smi "$out/nvidia-smi.xml" nvidia-smi -q -x
step nvlink "$out/nvlink.txt" nvidia-smi nvlink -s
step pytest "$out/pytest-gpu.txt" .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gpu.py
step "hpcprobe gpu" "$out/gpu.txt" .venv/bin/hpcprobe gpu --no-store --json "$out/gpu.json"
step "hpcprobe gpu check" "$out/check.txt" .venv/bin/hpcprobe gpu check
# beside PyTorch on the same GPU, where the node's Python has it (it says so where not)
step "gpu_vs_torch" "$out/vs-torch.txt" timeout 300 .venv/bin/python benchmarks/gpu_vs_torch.py
tail -n 1 "$out/pytest-gpu.txt" | sed 's/^/pytest: /' >>"$summary"
rm -f "$out/setup.txt"  # its last lines are in the summary where it failed

# the figures to compare with docs/gpu.md (scripts/gpu_summary.py)
[[ -s $out/gpu.json ]] && .venv/bin/python scripts/gpu_summary.py "$out/gpu.json" >>"$summary" 2>&1
cat "$summary"
