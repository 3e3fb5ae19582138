"""The one door to `.git`: the store's bare repository, on dulwich's public API.

Nothing else in the project imports dulwich or reads or writes under `.git`; it goes through
`GitRepo` (objects, the branch, history) and the modules beside it: `trees` (files and
differences read out of trees), `refs` (the branch ref and its lock, the remotes' refs),
`objects` (trees kept as bytes, loose objects checked),
`maintenance` (packs kept few, by `git repack` where git is installed, else by dulwich),
`config` (the repository's config: remotes, local settings, the marker), `hooks`,
`transport` (fetch and push through dulwich's clients, with `packcheck` and `localfetch`),
`history` (walks; `cutwalk`, a history cut at missing commits), `program` (the `git`
program reading in bulk) and `repair` (what `gc doctor` puts right). This package imports
nothing of the rest of `beads` but `beads.errors` and `beads.faults`.

Names load on first use, so a hook that reads only the branch ref never imports dulwich.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from beads.git.repo import GitRepo, LogEntry, init_bare
    from beads.git.trees import FileChange, PathTree

__all__ = ["FileChange", "GitRepo", "LogEntry", "PathTree", "init_bare"]
_HOMES = {name: "beads.git.repo" for name in __all__}
_HOMES.update(FileChange="beads.git.trees", PathTree="beads.git.trees")


def __getattr__(name: str) -> Any:
    """Import each public name from its module when it is first asked for."""
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'beads.git' has no attribute {name!r}")
