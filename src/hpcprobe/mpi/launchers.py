"""Launchers by name: each turns a rank layout into an argv list (no shell) with explicit
binding (a CPU per rank, or a set of CPUs per rank for threaded ranks) and the environment the
ranks need, exported to every host: Open MPI's mpirun (a rankfile of OS CPU numbers),
MPICH/Intel MPI's mpiexec (Hydra), Slurm's srun."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hpcprobe.common.errors import OptionError
from hpcprobe.mpi.find import Mpi


@dataclass(frozen=True)
class Layout:
    """Rank i runs on CPU cpus[i] of host hosts[i] (no hosts: this host); with sets, rank i
    runs its threads on the CPUs sets[i] (cpus[i] its first)."""

    cpus: tuple[int, ...]
    hosts: tuple[str, ...] | None = None
    sets: tuple[tuple[int, ...], ...] | None = None

    def cpuset(self, rank: int) -> tuple[int, ...]:
        return self.sets[rank] if self.sets else (self.cpus[rank],)

    def masks(self) -> list[str]:
        """Each rank's CPUs as a hexadecimal affinity mask."""
        return [hex(sum(1 << c for c in self.cpuset(i))) for i in range(self.ranks)]

    @property
    def ranks(self) -> int:
        return len(self.cpus)

    @property
    def oversubscribed(self) -> bool:
        places = list(zip(self.hosts or ("",) * self.ranks, self.cpus, strict=True))
        return len(set(places)) < len(places)


@dataclass(frozen=True)
class Launch:
    """What to execute: the argv and the environment it needs on top of ours."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def _unique(xs: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(xs))


def _mpirun(path: str, mpi: Mpi, layout: Layout, command: list[str], workdir: Path,
            env: Mapping[str, str]) -> Launch:
    """Open MPI: a rankfile pins rank i to its OS CPUs (physical numbering); -x exports the
    environment to the ranks of other hosts."""
    hosts = layout.hosts or ("localhost",) * layout.ranks
    rankfile = workdir / "rankfile"
    rankfile.write_text("".join(f"rank {i}={h} slot={','.join(map(str, layout.cpuset(i)))}\n"
                                for i, h in enumerate(hosts)))
    argv = [path, "-np", str(layout.ranks), "--rankfile", str(rankfile),
            "--mca", "rmaps_rank_file_physical", "1"]
    if layout.hosts:
        argv += ["--host", ",".join(f"{h}:{layout.hosts.count(h)}"
                                    for h in _unique(layout.hosts))]
    if layout.oversubscribed:
        # busy-polling ranks sharing a CPU starve each other (20x slower collectives here)
        argv += ["--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    for name in env:
        argv += ["-x", name]
    out = dict(env)
    if os.geteuid() == 0:  # Open MPI refuses root unless told; CI runs as root
        out.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return Launch(argv + command, out)


def _mpiexec(path: str, mpi: Mpi, layout: Layout, command: list[str], workdir: Path,
             env: Mapping[str, str]) -> Launch:
    """Hydra: -bind-to user:a+b,c+d pins rank i to the i-th CPU set; Intel MPI reads its
    pinning from I_MPI_PIN_DOMAIN / I_MPI_PIN_PROCESSOR_LIST; -genvlist exports the
    environment."""
    argv = [path, "-n", str(layout.ranks)]
    out = dict(env)
    if mpi.implementation == "Intel MPI":
        out["I_MPI_PIN"] = "1"
        if layout.sets:
            out["I_MPI_PIN_DOMAIN"] = "[" + ",".join(layout.masks()) + "]"
        else:
            out["I_MPI_PIN_PROCESSOR_LIST"] = ",".join(map(str, layout.cpus))
    else:
        argv += ["-bind-to", "user:" + ",".join("+".join(map(str, layout.cpuset(i)))
                                                for i in range(layout.ranks))]
    if layout.hosts:
        argv += ["-hosts", ",".join(f"{h}:{layout.hosts.count(h)}" for h in _unique(layout.hosts))]
    if env:
        argv += ["-genvlist", ",".join(env)]
    return Launch(argv + command, out)


#: Open MPI's ranks started by srun (Slurm's PMIx server) do one background modex fence instead
#: of two blocking ones, so a rank handles no peer's message before its PML registered its
#: receive callbacks (mca_pml_ob1_add_procs, between the two fences). With two, a rank of a
#: 4-node job handled a peer's first message (PML tag 0x41, a match) inside MPI_Init's first
#: fence, before that registration, and died of SIGSEGV on the NULL callback in the TCP BTL's
#: receive handler: 3 of 332 launches on this project's namespace cluster (Open MPI 4.1.4,
#: Slurm 22.05 mpi/pmix_v4), 0 of 700 with the background fence. A value the user set wins.
SRUN_OPEN_MPI_ENV = {"OMPI_MCA_pmix_base_async_modex": "1"}


def srun_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for ranks that srun starts, with SRUN_OPEN_MPI_ENV where the caller's
    environment does not set those variables (other MPIs ignore them)."""
    return {**{k: v for k, v in SRUN_OPEN_MPI_ENV.items() if k not in os.environ}, **env}


def _srun(path: str, mpi: Mpi, layout: Layout, command: list[str], workdir: Path,
          env: Mapping[str, str]) -> Launch:
    """Slurm: --cpu-bind=map_cpu (mask_cpu for CPU sets) pins the i-th task of a node; srun
    exports the whole environment by default. --kill-on-bad-exit: a rank that dies (a signal,
    a non-zero exit) ends the step; srun's default lets the others wait for it in their next
    collective for ever (a 4-node CG job hung so: rank 0 died of SIGSEGV a second after its
    start, the other three sat in MPI_Comm_split_type until the campaign cancelled the job)."""
    bind = ("mask_cpu:" + ",".join(layout.masks()) if layout.sets else
            "map_cpu:" + ",".join(map(str, layout.cpus)))
    argv = [path, "-n", str(layout.ranks), "--kill-on-bad-exit=1", "--cpu-bind=" + bind]
    if layout.hosts:
        hosts = _unique(layout.hosts)
        argv += ["--nodelist", ",".join(hosts), "--nodes", str(len(hosts))]
        if layout.ranks % len(hosts) == 0:
            argv += ["--ntasks-per-node", str(layout.ranks // len(hosts))]
    if layout.oversubscribed:
        argv.append("--overcommit")
    return Launch(argv + command, srun_env(env))


@dataclass(frozen=True)
class Launcher:
    """A registered launcher: its name, the MPIs it goes with, how it is found and used."""

    name: str
    description: str
    implementations: tuple[str, ...]  # empty: any
    locate: Callable[[Mpi], str | None]
    #: (path, MPI, layout, command, work directory, environment for every rank) -> Launch
    build: Callable[[str, Mpi, Layout, list[str], Path, Mapping[str, str]], Launch]

    def path(self, mpi: Mpi) -> str | None:
        if self.implementations and mpi.implementation not in self.implementations:
            return None
        return self.locate(mpi)


LAUNCHERS: dict[str, Launcher] = {
    ln.name: ln for ln in (
        Launcher("mpirun", "Open MPI's mpirun (rankfile binding)", ("Open MPI",),
                 lambda m: m.bin("mpirun"), _mpirun),
        Launcher("mpiexec", "MPICH / Intel MPI mpiexec (Hydra, -bind-to user:)",
                 ("MPICH", "Intel MPI"), lambda m: m.bin("mpiexec"), _mpiexec),
        Launcher("srun", "Slurm's srun (--cpu-bind=map_cpu)", (),
                 lambda m: shutil.which("srun"), _srun),
    )
}


def available(mpi: Mpi) -> dict[str, str | None]:
    """Each launcher's path for this MPI, None where it does not go with it or is missing."""
    return {name: ln.path(mpi) for name, ln in LAUNCHERS.items()}


def unknown(name: str) -> str | None:
    """Why `name` is no launcher; None when it is one (whether it goes with the MPI is known
    once the MPI is found)."""
    return None if name in LAUNCHERS else \
        f"{name!r} is unknown; launchers: {', '.join(LAUNCHERS)}"


def choose(mpi: Mpi, name: str | None) -> tuple[Launcher, str]:
    """The launcher asked for, or the default: srun inside a Slurm allocation, else the one that
    goes with the MPI."""
    if name is not None:
        if (why := unknown(name)) is not None:
            raise OptionError(f"<launcher> {why}")
        ln = LAUNCHERS[name]
        path = ln.path(mpi)
        if path is None:
            fits = [n for n, p in available(mpi).items() if p]
            raise OptionError(f"<launcher> {name}: not usable with {mpi.implementation} "
                              f"{mpi.version} at {mpi.prefix}; usable here: "
                              f"{', '.join(fits) or 'none'}")
        return ln, path
    order = (["srun"] if os.environ.get("SLURM_JOB_ID") else []) + ["mpirun", "mpiexec"]
    for n in order:
        path = LAUNCHERS[n].path(mpi)
        if path:
            return LAUNCHERS[n], path
    raise OptionError(f"no launcher for {mpi.implementation} {mpi.version} at {mpi.prefix} "
                      "(no mpirun/mpiexec in its bin/, no srun on PATH); use <launcher>")
