"""The bead store: git-backed YAML records, one dulwich commit per change, a sqlite index.

Public surface: `Store` (open, init, get, list, create, update, close_bead, reopen, batch,
log), `Batch`, `Query` (what `list` takes), `Bead`, the errors, and `doctor`. Heavy modules
(dulwich, ruamel.yaml) load on first use, so importing `beads` stays cheap for commands that
never touch the store.
"""

from __future__ import annotations

from beads.errors import Conflict, GcError, InvalidInput, NoMatch, NotFound, StorageError
from beads.lazy import lazy_attributes

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from beads.batch import Batch
    from beads.health.checkup import Problem, doctor
    from beads.index.query import Query
    from beads.records.record import Bead
    from beads.store import Store

__all__ = [
    "Batch",
    "Bead",
    "Conflict",
    "GcError",
    "InvalidInput",
    "NoMatch",
    "NotFound",
    "Problem",
    "Query",
    "StorageError",
    "Store",
    "doctor",
]

_LAZY = {
    "Bead": "beads.records.record",
    "Store": "beads.store",
    "Batch": "beads.batch",
    "doctor": "beads.health.checkup",
    "Problem": "beads.health.checkup",
    "Query": "beads.index.query",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
