#!/usr/bin/env bash
# Downloads, as wheels into DIR, every Python package that setting hpcprobe up needs: its
# dependencies, the test extra, and its build backend with CMake and ninja. On a node without
# network (a compute or GPU node), `make setup WHEELHOUSE=DIR` then installs from DIR alone.
#
# usage: scripts/wheelhouse.sh DIR [PYTHON_VERSION [GLIBC]]
#   PYTHON_VERSION  the target node's Python, "3.12" (default: this python3's)
#   GLIBC           the target node's glibc, "2.28" (default: this node's); wheels built for a
#                   newer glibc than the target's are not taken
# The target's architecture is this node's (uname -m).
set -euo pipefail
usage="usage: scripts/wheelhouse.sh DIR [PYTHON_VERSION [GLIBC]]"
[[ $# -ge 1 && $# -le 3 && -n $1 ]] || { echo "$usage" >&2; exit 2; }
dir=$1
here=$(dirname "$0")/..
py=${PYTHON:-python3}
ver=${2:-$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
glibc=${3:-$(getconf GNU_LIBC_VERSION | awk '{print $2}')}
[[ $ver =~ ^3\.[0-9]+$ ]] || { echo "Python version '$ver': say it as 3.12" >&2; exit 2; }
[[ $glibc =~ ^2\.([0-9]+)$ ]] || { echo "glibc '$glibc': say it as 2.28" >&2; exit 2; }
arch=$(uname -m)

# the requirements, from pyproject.toml: dependencies, the test extra, the build system's
mapfile -t reqs < <("$py" - "$here/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    meta = tomllib.load(f)
reqs = (meta["project"]["dependencies"] + meta["project"]["optional-dependencies"]["test"]
        + meta["build-system"]["requires"] + ["cmake>=3.18", "ninja"])
print("\n".join(dict.fromkeys(reqs)))
EOF
)

# manylinux wheels for every glibc from 2.17 up to the target's
platforms=()
for ((minor = 17; minor <= BASH_REMATCH[1]; minor++)); do
    platforms+=(--platform "manylinux_2_${minor}_${arch}")
done
platforms+=(--platform "manylinux2014_${arch}" --platform "linux_${arch}")

mkdir -p "$dir"
echo "downloading wheels for CPython $ver, glibc $glibc, $arch into $dir" >&2
"$py" -m pip download -q --disable-pip-version-check -d "$dir" --only-binary=:all: \
    --python-version "$ver" --implementation cp "${platforms[@]}" "${reqs[@]}"
echo "$(ls "$dir" | wc -l) wheels, $(du -sh "$dir" | cut -f1); on the node: make setup WHEELHOUSE=$dir" >&2
