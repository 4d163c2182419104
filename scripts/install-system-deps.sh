#!/usr/bin/env bash
# Installs the Debian packages hpcprobe's tests and benchmark scripts use, when run as root on
# Debian/Ubuntu. Unprivileged or elsewhere it says what is missing and succeeds: the core
# (topology from sysfs, kernels, store) needs none of them.
set -u
PACKAGES=(hwloc likwid openmpi-bin libopenmpi-dev hpcc libopenblas0-pthread libblis4-pthread
          chromium postgresql fio iperf3 lammps
          slurmctld slurmd slurm-client munge)
# Debian's python3 has no venv/ensurepip without python3-venv
python3 -c "import ensurepip, venv" 2>/dev/null || PACKAGES+=(python3-venv)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: optional system packages missing (${missing[*]}); as root: apt-get install ${missing[*]}" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "installing system packages: ${missing[*]}" >&2
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || echo "warning: could not install ${missing[*]}; tests that need them will skip" >&2
fi
exit 0
