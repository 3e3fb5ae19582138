"""The bead store: git-backed YAML records, one dulwich commit per change, a sqlite index.

Public surface: `Store` (open, init, get, list, create, update, close_bead, reopen, batch,
log), `Bead`, the errors, and `doctor`. Heavy modules (dulwich, ruamel.yaml) load on first use,
so importing `beads` stays cheap for commands that never touch the store.
"""

from __future__ import annotations

from beads.errors import Conflict, GcError, InvalidInput, NoMatch, NotFound, StorageError

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

    from beads.doctor import Problem, doctor
    from beads.record import Bead
    from beads.store import Batch, Store

__all__ = [
    "Batch",
    "Bead",
    "Conflict",
    "GcError",
    "InvalidInput",
    "NoMatch",
    "NotFound",
    "Problem",
    "StorageError",
    "Store",
    "doctor",
]

_LAZY = {
    "Bead": "beads.record",
    "Store": "beads.store",
    "Batch": "beads.store",
    "doctor": "beads.doctor",
    "Problem": "beads.doctor",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'beads' has no attribute {name!r}")
