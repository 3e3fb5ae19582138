"""Read a store through its index alone: no dulwich, no YAML parser.

Hooks run on every prompt and must start fast, so they read beads and the configuration from
the sqlite index. When the branch has moved past the index (a commit made elsewhere), the
full `Store` is opened once to catch the index up; only then are the heavy modules loaded.
"""

from __future__ import annotations

from pathlib import Path

from beads.branch import BRANCH, branch_head, branch_problem, is_sha, require_head
from beads.index.index import Index
from beads.records.record import Bead
from beads.settings.config import check_config

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BRANCH", "IndexReader", "branch_head", "branch_problem", "is_sha", "require_head"]


class IndexReader:
    """Read-only access to one store's beads and configuration through its index."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index = Index(root / ".runtime" / "index.sqlite3", recover=self._rebuild)
        if not self.fresh():
            require_head(root)  # a lost branch is an error, never an empty store
            from beads.store import Store  # the slow path: catch the index up from git

            store = Store(root)
            try:
                store._refresh_if_moved()  # raises for a branch that names no commit
            finally:
                store.close()

    def _rebuild(self) -> None:
        # A query found the file damaged: a new, empty file, which the store fills from git.
        from beads.store import Store

        self.index.drop_file()
        Store(self.root).close()

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> IndexReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fresh(self) -> bool:
        """True when the index reflects the branch's current commit."""
        head = self.index.head()
        return head is not None and head == branch_head(self.root)

    def get(self, bead_id: str) -> Bead | None:
        """The bead with this full id, or None."""
        return self.index.get(bead_id)

    def config(self) -> dict[str, Any]:
        """The settings in force on this machine: `config.yaml` as the index recorded it, with
        the defaults filled in and unapproved guarded settings held (`beads.settings.trust`)."""
        from beads.settings.trust import in_force

        return in_force(self.root, check_config(self.index.config() or {"format": 1}))
