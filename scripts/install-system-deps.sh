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

# promtool (`promtool check metrics` lints the Prometheus export in the tests), taken from
# Debian's prometheus package alone: installing the package would start its server as a daemon
fetch_promtool() {
    command -v promtool >/dev/null 2>&1 && return 0
    local dir
    dir=$(mktemp -d) || return 0
    download() { apt-get download -qq prometheus >/dev/null 2>&1; }
    # the package lists may be stale (a fresh image's): updated once where the download fails
    if (cd "$dir" && { download || { apt-get update -qq >/dev/null 2>&1 && download; }; } \
            && dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool); then
        install -m 755 "$dir/usr/bin/promtool" /usr/local/bin/promtool
    else
        echo "warning: could not fetch promtool (Debian's prometheus); its test will skip" >&2
    fi
    rm -rf "$dir"
}

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    fetch_promtool
fi

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
