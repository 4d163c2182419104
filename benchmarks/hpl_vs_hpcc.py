#!/usr/bin/env python3
"""hpcprobe's HPL figure side by side with the same hpcc run by hand with the same input,
interleaved; then DGEMM and HPL against the peak model under each BLAS and OpenBLAS core type
installed here.

Part 1, per round in alternating order: `hpcprobe hpl --n N --runs 1 --blas B` (its Rmax), and
by hand what an HPL user types: hpccinf.txt with the N, NB and P x Q of hpcprobe's run (the
other lines as hpcc's example file has them), `mpirun -np R --bind-to core hpcc` with the BLAS
first on LD_LIBRARY_PATH and one BLAS thread per rank, HPL_Tflops read from hpccoutf.txt. The
median of the within-round ratios hpcprobe / by hand should be 1.00: it is the same program.

Part 2, one `hpcprobe hpl` run over every BLAS: DGEMM on one core and on all as % of the model
peak (FLOP/cycle of the widest FMA x cores x the clock measured under its load), its kernels,
and HPL at one N as % of the measured-clock Rpeak; hpcc's SingleDGEMM of the run by hand is
printed beside hpcprobe's one-core DGEMM of the same BLAS.

Usage: benchmarks/hpl_vs_hpcc.py [--rounds 3] [--n 8000] [--n-all 5000]
Needs Debian's hpcc, Open MPI and a BLAS (make setup installs them as root).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from sidebyside import hpcprobe_json, in_turn, missing, round_ratios

from hpcprobe import native
from hpcprobe.families.hpl import blas

HPCC_EXAMPLE = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt")


def hpcprobe(args: list[str]) -> dict:
    """`hpcprobe hpl ARGS` as a user runs it: its JSON document."""
    return hpcprobe_json(["hpl", *args])


def by_hand(library: str, n: int, nb: int, p: int, q: int) -> dict[str, float]:
    """hpcc as a user runs it: the example input with N, NB, P and Q set, mpirun binding to
    cores; its summary (HPL_Tflops, SingleDGEMM_Gflops ...)."""
    lines = HPCC_EXAMPLE.read_text().splitlines()
    for i, value in ((5, n), (7, nb), (10, p), (11, q)):  # Ns, NBs, Ps, Qs
        lines[i] = f"{value}  {lines[i].split(maxsplit=1)[1]}"
    env = {**os.environ, "LD_LIBRARY_PATH": str(Path(library).parent),
           "OPENBLAS_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    with tempfile.TemporaryDirectory(prefix="hpcc-") as tmp:
        (Path(tmp) / "hpccinf.txt").write_text("\n".join(lines) + "\n")
        subprocess.run(["mpirun", "-np", str(p * q), "--bind-to", "core", "--map-by", "core",
                        "-x", "LD_LIBRARY_PATH", "-x", "OPENBLAS_NUM_THREADS",
                        "-x", "BLIS_NUM_THREADS", "-x", "OMP_NUM_THREADS", "hpcc"],
                       cwd=tmp, env=env, check=True, capture_output=True, timeout=3600)
        text = (Path(tmp) / "hpccoutf.txt").read_text()
    return {k: float(v) for k, v in re.findall(r"^(\w+)=([-\d.eE+]+)$", text, re.M)}


def metric(doc: dict, name: str, **params: object) -> dict | None:
    return next((m for m in doc["metrics"] if m["name"] == name and
                 all(m["params"].get(k) == v for k, v in params.items())), None)


def median(m: dict | None) -> float:
    return statistics.median(m["samples"]) if m else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=8000, help="HPL's N of part 1")
    ap.add_argument("--n-all", type=int, default=5000, help="HPL's N of part 2 (every BLAS)")
    a = ap.parse_args()
    if missing("hpcc"):
        return 2
    have = blas.installed()
    if not have:
        print(f"no BLAS installed: {blas.HOW_TO}")
        return 2
    system = blas.choose(None)[0]
    env_core = os.environ.get("OPENBLAS_CORETYPE")
    print(f"BLAS of part 1: the system's, {system.library}"
          + (f" (OPENBLAS_CORETYPE={env_core} in the environment)" if env_core else ""))
    ours, theirs, dgemm_hand = [], [], []
    params: dict = {}
    for r in range(a.rounds):
        for step in in_turn("hpcprobe", "hand", r):
            if step == "hpcprobe":
                doc = hpcprobe(["--n", str(a.n), "--runs", "1", "--quick"])
                rmax = metric(doc, "rmax")
                if rmax is None:
                    raise SystemExit(f"hpcprobe gave no Rmax: {doc['errors']}")
                params = rmax["params"]
                ours.append(median(rmax))
            else:
                if not params:  # the first round's hpcprobe run gives the input
                    doc = hpcprobe(["--n", str(a.n), "--runs", "1", "--quick"])
                    params = metric(doc, "rmax")["params"]  # type: ignore[index]
                got = by_hand(system.library, params["n"], params["nb"], params["p"],
                              params["q"])
                theirs.append(got["HPL_Tflops"] * 1000)
                dgemm_hand.append(got["SingleDGEMM_Gflops"])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    ratio, lo, hi = round_ratios(ours, theirs)
    print(f"\nPart 1: HPL N {params['n']}, NB {params['nb']}, P x Q {params['p']} x "
          f"{params['q']}, {params['ranks']} rank(s), {a.rounds} interleaved rounds")
    print(f"  hpcprobe hpl Rmax   {statistics.median(ours):9.2f} GFLOP/s")
    print(f"  hpcc by hand        {statistics.median(theirs):9.2f} GFLOP/s")
    print(f"  ratio hpcprobe / by hand: median {ratio:.3f} (rounds {lo:.3f} to {hi:.3f})")

    names = [f"openblas:{c}" for c in ("Haswell", "SkylakeX")
             if "openblas" in have and (c != "SkylakeX" or "avx512" in native.supported_isas())]
    names += [n for n in ("blis", "reference") if n in have]
    doc = hpcprobe(["--n", str(a.n_all), "--runs", "1", "--quick", "--blas", ",".join(names)])
    cores = max(m["params"]["threads"] for m in doc["metrics"] if m["name"] == "dgemm")
    print(f"\nPart 2: every BLAS, DGEMM on 1 and {cores} core(s), HPL at N {a.n_all}; % of the "
          "model on the clock measured under the widest ISA's load")
    print(f"  {'BLAS':20s} {'kernels':18s} {'DGEMM 1c':>9s} {'% peak':>7s} {'DGEMM all':>10s} "
          f"{'% peak':>7s} {'HPL':>8s} {'% Rpeak':>8s}")
    for b in names:
        one, allc = metric(doc, "dgemm", blas=b, threads=1), metric(doc, "dgemm", blas=b,
                                                                   threads=cores)
        kern = f"{one['params']['blas_kernels']} ({one['params']['blas_isa']})" if one else "-"
        print(f"  {b:20s} {kern:18s} {median(one):9.1f} "
              f"{median(metric(doc, 'dgemm_fraction', blas=b, threads=1)):7.1f} "
              f"{median(allc):10.1f} "
              f"{median(metric(doc, 'dgemm_fraction', blas=b, threads=cores)):7.1f} "
              f"{median(metric(doc, 'rmax', blas=b)):8.1f} "
              f"{median(metric(doc, 'efficiency', blas=b)):8.1f}")
    ours_1c = median(metric(hpcprobe(["--n", "1000", "--runs", "1", "--quick"]), "dgemm",
                            threads=1))
    print(f"\n  the system BLAS's one-core DGEMM: hpcprobe {ours_1c:.1f} GFLOP/s, hpcc's "
          f"SingleDGEMM (runs by hand) {statistics.median(dgemm_hand):.1f} GFLOP/s, ratio "
          f"{ours_1c / statistics.median(dgemm_hand):.3f} (hpcc's n follows its HPL N)")
    for e in doc["errors"]:
        print(f"  error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
