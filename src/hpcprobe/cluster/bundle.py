"""hpcprobe staged on each node's own disk for a campaign (`cluster run --stage DIR`): one file,
a tar of a relocatable environment (hpcprobe and its runtime dependencies, as installed here:
each distribution's files from its RECORD; a `pyvenv.cfg` and `bin/python`, a link to the
interpreter this one was made from), broadcast once to the nodes of an allocation with Slurm's
`sbcast`, else copied by each node job from the work directory (one file read, not the
install's thousands), and unpacked there once. The node jobs then start hpcprobe from the
node's disk, isolated from the user's environment (`python -I`): nothing of it is read from
the checkout or the shared file system at start-up."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import os
import secrets
import shlex
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hpcprobe.common.errors import UserError

#: The environment's name on the nodes; a digest of what it holds follows it
NAME = "hpcprobe"


@dataclass(frozen=True)
class Bundle:
    """The bundle made in the work directory (`tar`) and where it lives on each node."""

    tar: Path
    digest: str
    stage: Path  # the directory on each node's own disk
    #: this campaign's own, in the tar's name on the nodes: a shared directory (/tmp) holds no
    #: file of that name another user could have made first
    token: str = field(default_factory=lambda: secrets.token_hex(4))

    @property
    def name(self) -> str:
        return f"{NAME}-{self.digest}"

    @property
    def on_node(self) -> Path:
        """The tar's path on a node (broadcast there, or copied by its first job)."""
        return self.stage / f".{self.name}.{self.token}.tar"


def _key(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


def closure(root: str = "hpcprobe") -> list[md.Distribution]:
    """`root` and every distribution it needs at run time (no extras), as installed here."""
    from packaging.requirements import Requirement  # a dependency of matplotlib's

    seen: dict[str, md.Distribution] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise UserError(f"{name}, which hpcprobe needs, is not installed here to stage; "
                            "make setup") from None
        seen[_key(name)] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return sorted(seen.values(), key=lambda d: _key(d.metadata["Name"]))


def editable(dist: md.Distribution) -> bool:
    """An install that points at its sources (pip install -e): its files are not its code."""
    import json

    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return bool(url.get("dir_info", {}).get("editable"))


def _files(dists: list[md.Distribution]) -> Iterator[tuple[Path, str]]:
    """(the file here, its path under site-packages) of each distribution's installed files
    (its scripts outside site-packages are not taken: `python -m hpcprobe` starts it)."""
    for dist in dists:
        for f in dist.files or []:
            if f.parts and f.parts[0] == "..":
                continue
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                yield path, f.as_posix()


def digest(dists: list[md.Distribution]) -> str:
    """What the environment holds, in 12 hex digits: each distribution's name, version and
    RECORD (its files' hashes), and the interpreter it runs under."""
    h = hashlib.sha256(f"{_interpreter()} {sys.version}".encode())
    for d in dists:
        h.update(f"{d.metadata['Name']} {d.version}\n{d.read_text('RECORD') or ''}".encode())
    return h.hexdigest()[:12]


def _interpreter() -> Path:
    """The interpreter this one was made from (a venv's base), which the nodes' image has."""
    return Path(getattr(sys, "_base_executable", sys.executable)).resolve()


def _add_text(tf: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tf.addfile(info, io.BytesIO(data))


def make(workdir: Path, stage: Path) -> Bundle:
    """The bundle for the nodes, in `workdir` (made once per content: a campaign's second pass
    reuses it)."""
    dists = closure()
    if any(editable(d) for d in dists):
        names = ", ".join(d.metadata["Name"] for d in dists if editable(d))
        raise UserError(f"{names}: an editable install (pip install -e) points at its sources, "
                        "which the nodes would read; stage an install of its own (make setup)")
    key = digest(dists)
    b = Bundle(workdir / f"{NAME}-{key}.tar", key, stage)
    if b.tar.is_file():
        return b
    python = _interpreter()
    site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"  # a venv's
    fd, part = tempfile.mkstemp(dir=workdir, prefix=f".{b.name}-", suffix=".tar")
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w") as tf:
            _add_text(tf, f"{b.name}/pyvenv.cfg", f"home = {python.parent}\n"
                      "include-system-site-packages = false\n"
                      f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
            link = tarfile.TarInfo(f"{b.name}/bin/python")
            link.type, link.linkname = tarfile.SYMTYPE, str(python)
            tf.addfile(link)
            for path, rel in _files(dists):
                tf.add(path, f"{b.name}/{site}/{rel}", recursive=False)
        os.chmod(part, 0o644)
        os.replace(part, b.tar)
    finally:
        Path(part).unlink(missing_ok=True)
    return b


def launcher(b: Bundle, workdir: Path) -> Path:
    """The script a node job starts hpcprobe with: the bundle unpacked on the node's disk once
    (from the broadcast tar, else copied from the work directory), then its Python, isolated
    from the user's environment, runs hpcprobe with the job's arguments."""
    q = shlex.quote
    dest, tar = b.stage / b.name, b.on_node
    script = workdir / f"{b.name}.sh"
    script.write_text(f"""#!/bin/sh
# written by hpcprobe (cluster run --stage): hpcprobe from this node's own disk
set -e
dest={q(str(dest))}
tar={q(str(tar))}
mine() {{  # what another user made in a shared directory (/tmp) is never used
    if [ -L "$1" ] || {{ [ -e "$1" ] && [ ! -O "$1" ]; }}; then
        echo "hpcprobe: $1 is not this user's: not used (remove it, or stage elsewhere)" >&2
        exit 2
    fi
}}
mine "$dest"
if [ ! -x "$dest/bin/python" ]; then
    mkdir -p {q(str(b.stage))}
    mine "$tar"
    if [ ! -f "$tar" ]; then  # not broadcast: this job copies it
        part=$(mktemp {q(str(b.stage))}/.{b.name}.XXXXXX)
        cp {q(str(b.tar))} "$part" && mv -f "$part" "$tar"
    fi
    tmp=$(mktemp -d {q(str(b.stage))}/.{b.name}.XXXXXX)
    tar -xf "$tar" -C "$tmp"
    mv -T "$tmp/{b.name}" "$dest" 2>/dev/null || true  # another job's came first
    rm -rf "$tmp"
    mine "$dest"
fi
unset HPCPROBE_NATIVE_LIB
exec "$dest/bin/python" -I -m hpcprobe "$@"
""")
    script.chmod(0o755)
    return script
