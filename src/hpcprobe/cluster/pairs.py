"""Which node pairs the link test measures, b_eff style: rounds of disjoint pairs (a matching),
so that the pairs of one round can measure at once. Every pair when the cluster is small (a
round-robin tournament, n - 1 rounds); else the ring (2 rounds, 3 when n is odd) and rotating
random matchings, so that every node meets several partners in O(n) pairs, not O(n^2)."""

from __future__ import annotations

import os
import random
from typing import Any

#: Up to this many nodes, every pair is measured.
ALL_PAIRS_UPTO = 16
#: Random matchings on top of the ring (each node meets 2 + this many partners).
RANDOM_ROUNDS = 3

Round = list[tuple[int, int]]


def round_robin(n: int) -> list[Round]:
    """Every pair of n nodes exactly once, in n - 1 rounds (n rounds when n is odd): the
    circle method, node 0 fixed and the others rotating."""
    players = list(range(n)) + ([-1] if n % 2 else [])
    m = len(players)
    out = []
    for _ in range(m - 1):
        pairs = [(players[i], players[m - 1 - i]) for i in range(m // 2)]
        out.append([(min(a, b), max(a, b)) for a, b in pairs if a >= 0 and b >= 0])
        players = [players[0], players[-1], *players[1:-1]]
    return out


def matchings(pairs: list[tuple[Any, Any]]) -> list[list[tuple[Any, Any]]]:
    """Pairs grouped into rounds in which no node appears twice (greedy, in order)."""
    rounds: list[list[tuple[Any, Any]]] = []
    for a, b in pairs:
        for r in rounds:
            if all(a not in pr and b not in pr for pr in r):
                r.append((a, b))
                break
        else:
            rounds.append([(a, b)])
    return rounds


def ring(n: int) -> list[Round]:
    """Each node with its two neighbours on the ring 0-1-...-(n-1)-0, in disjoint rounds."""
    edges = [(i, (i + 1) % n) for i in range(n)] if n > 2 else [(0, 1)]
    return matchings([(min(a, b), max(a, b)) for a, b in edges])


def schedule(n: int, random_rounds: int = RANDOM_ROUNDS, all_pairs_upto: int = ALL_PAIRS_UPTO,
             seed: int = 0) -> list[Round]:
    """The rounds for n nodes (deterministic for a seed)."""
    if n < 2:
        return []
    if n <= all_pairs_upto:
        return round_robin(n)
    out = ring(n)
    seen = {p for r in out for p in r}
    rng = random.Random(seed)
    for _ in range(random_rounds):
        best: Round = []
        for _attempt in range(20):  # prefer a matching that repeats no pair measured already
            order = list(range(n))
            rng.shuffle(order)
            pairs = [(min(a, b), max(a, b)) for a, b in zip(order[::2], order[1::2], strict=False)]
            fresh = [p for p in pairs if p not in seen]
            if len(fresh) > len(best):
                best = fresh
            if len(fresh) == len(pairs):
                break
        seen.update(best)
        out.append(best)
    return out


def write(rounds: list[list[tuple[Any, Any]]], path: str | os.PathLike[str]) -> None:
    """The file the MPI program reads: one round per line, `a b a b ...` (host names)."""
    with open(path, "w") as f:
        for r in rounds:
            f.write(" ".join(f"{a} {b}" for a, b in r) + "\n")
