"""A module imported when first used, not when named (importlib's LazyLoader, the recipe of
the importlib documentation): NumPy, which a few families and the cluster verdict need, then
costs nothing to the many commands that start without it (a tenth of a second of every
`hpcprobe` start here, in every prolog and node job of a fleet)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def module(name: str) -> ModuleType:
    """`name`, loaded on its first attribute access (at once where it is loaded already or
    cannot be found: an import error then says so where it is named)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return importlib.import_module(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    loader.exec_module(mod)
    return mod
