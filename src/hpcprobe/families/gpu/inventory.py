"""The GPUs this node has, as `hpcprobe topology` shows them and as a campaign groups peers: the
family's Inventory capability over machine.gpus."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcprobe.machine import gpus
from hpcprobe.measure.family import Inventory


def discover() -> gpus.Inventory | None:
    """This node's GPUs and what is near them; None where it has none."""
    inv = gpus.discover()
    return inv if inv.gpus else None


def document(inv: gpus.Inventory) -> dict[str, Any]:
    return inv.to_dict()


def hardware(provenance: Mapping[str, Any]) -> list[str]:
    """The GPU models a run measured (not their count: a node short of a GPU stays among its
    peers, whose figures it lacks)."""
    return sorted({g.get("name", "?") for g in (provenance.get("gpu") or {}).get("gpus", [])})


INVENTORY = Inventory("gpus", discover, gpus.render, document, hardware)
