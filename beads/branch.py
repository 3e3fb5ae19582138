"""The store's branch as its ref files hold it: its commit id, or what is wrong with it."""

from __future__ import annotations

from pathlib import Path

from beads.errors import StorageError
from beads.git.refs import BRANCH, is_sha, read_ref

__all__ = ["BRANCH", "branch_head", "branch_problem", "is_sha", "require_head"]


def branch_head(root: Path) -> bytes | None:
    """The commit id (hex) of the store's branch, read from the ref files; None when the ref
    is missing or holds no commit id (`branch_problem` says which)."""
    sha = read_ref(root / ".git")
    return sha if sha is not None and is_sha(sha) else None


def require_head(root: Path) -> bytes:
    """The branch's commit id, or a StorageError naming `gc doctor` when the ref is lost.

    A store always has its branch (`Store.init` makes the first commit before the store
    exists), so a missing ref is damage: never a reason to start a new history."""
    head = branch_head(root)
    if head is None:
        raise StorageError(
            f"the store's branch {branch_problem(root)}; nothing was changed. "
            "Run 'gc doctor' to restore it from the last good commit"
        )
    return head


def branch_problem(root: Path) -> str:
    """What is wrong with the branch ref, for a message (when `branch_head` is None)."""
    sha = read_ref(root / ".git")
    if sha is None:
        return f"{BRANCH} is missing"
    if not sha:
        return f"{BRANCH} is empty"
    return f"{BRANCH} holds no commit id ({sha[:60]!r})"
