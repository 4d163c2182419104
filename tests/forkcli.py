"""The installed CLI, started without its import: a server process imports `hpcprobe` once and
forks a child per command, which runs the console entry point as the `hpcprobe` script does
(its argv, environment, working directory, exit status, stdout and stderr in files). Python's
start-up and the CLI's imports took 0.55 s of every command's 0.6 s here, the suite's largest
single cost; a fork takes a few milliseconds.

What differs from the script is only what is fixed at import (and the result schema's validator,
built once in the server from the same registry): the environment that loads the
native core and the libraries (`IMPORT_TIME`). A command whose environment differs from the
server's there is run as the script (`tests/conftest.py` decides); so are the README's commands.

Run as `python forkcli.py SOCKET PARENT_PID`: it imports the CLI, listens on SOCKET, and serves
one command at a time until its parent ends."""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

#: Read when the CLI is imported (the native core's path, the interpreter's, the BLAS threads)
IMPORT_TIME = ("HPCPROBE_NATIVE_LIB", "PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH",
               "LD_LIBRARY_PATH", "LD_PRELOAD", "OPENBLAS_", "OMP_", "GOTO", "MKL_")


def import_time(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME)}


# ---------------------------------------------------------------- the server


def _child(req: dict) -> None:
    """In the forked child: become the command, run it, exit with its status."""
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = ["hpcprobe", *req["argv"]]
        from hpcprobe.console import main

        code = main()
    except SystemExit as exc:  # argparse, and sys.exit as the script's own
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
    except BaseException:  # what the script's interpreter prints
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def _serve_one(conn: socket.socket) -> None:
    req = json.loads(conn.makefile().readline())
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(req)
    fd = os.pidfd_open(pid)
    try:
        done, _, _ = select.select([fd], [], [], req["timeout"])
    finally:
        os.close(fd)
    if not done:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status),
                             "timeout": not done}).encode() + b"\n")


#: What the CLI imports where first used, imported here once: a child that judges a history
#: (ruptures, 1.7 s here), a sweep's or a comparison's statistics (scipy.stats, 1.5 s), a
#: report's plots (matplotlib, 0.8 s) or a PostgreSQL store (psycopg, 0.3 s) would import it
#: again. The command line's own start-up without them is tests/test_cli.py's (a fresh process).
USED_LATER = ("numpy", "scipy.special", "scipy.stats", "ruptures", "matplotlib.figure",
              "matplotlib.backends.backend_agg", "psycopg", "jsonschema")


def serve(path: str) -> None:
    import importlib

    from hpcprobe import cli
    from hpcprobe.results import model

    cli.build_parser()  # every command's module, which a child's CLI imports as it parses
    model._fast_validator()  # and the schema's validator
    for name in USED_LATER:  # each a dependency of the package's
        importlib.import_module(name)

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    # the suite's end, however it ends, is the server's: PR_SET_PDEATHSIG (a child of the
    # server's is not bound by it)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != int(sys.argv[2]):  # the suite went before the line above
        return
    while True:
        conn, _ = srv.accept()
        with conn:
            try:
                _serve_one(conn)
            except (OSError, ValueError, KeyError):  # a client gone, a request cut short
                pass


# ---------------------------------------------------------------- the client


class Lost(Exception):
    """The server cannot be reached."""


class Server:
    """The server process, started on first use (`serves`)."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.path = str(where / "cli.sock")
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.ready = False

    def _start(self) -> None:
        self.env = import_time(dict(os.environ))
        self.proc = subprocess.Popen([sys.executable, __file__, self.path, str(os.getpid())],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(1200):  # its imports: a few seconds
            if os.path.exists(self.path) or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.ready = os.path.exists(self.path) and self.proc.poll() is None

    def lost(self) -> None:
        """The server cannot be reached: the rest of the suite runs the script."""
        self.ready = False
        self.close()

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a command with this environment can be forked from the server."""
        if self.proc is None:
            self._start()
        return self.ready and import_time(env) == self.env

    def run(self, argv: list[str], env: dict[str, str], timeout: float
            ) -> tuple[int, str, str]:
        with tempfile.TemporaryDirectory(dir=self.where) as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            req = {"argv": argv, "env": env, "cwd": os.getcwd(), "timeout": timeout,
                   "out": str(out), "err": str(err)}
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                try:
                    s.connect(self.path)
                except OSError as exc:  # before the command ran: it may run as the script
                    raise Lost(str(exc)) from exc
                s.sendall(json.dumps(req).encode() + b"\n")
                said = json.loads(s.makefile().readline())
            if said["timeout"]:
                raise subprocess.TimeoutExpired(["hpcprobe", *argv], timeout)
            return (said["code"], out.read_text(errors="replace"),
                    err.read_text(errors="replace"))

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # by its recorded PID
            self.proc.wait()


if __name__ == "__main__":
    serve(sys.argv[1])
