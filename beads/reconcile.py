"""Catching the index and the view up with git, the source of truth.

Both are derived data: each records the commit it reflects, and a store brings each forward
from the tree diff between that commit and the branch's (or rebuilds it from the branch's
tree when its commit is unknown). `Store.sync` calls these under the write lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beads.config import CONFIG_PATH, parse_config
from beads.errors import InvalidInput
from beads.faults import fault
from beads.ids import parse_bead_path
from beads.view import git_blob_sha

if TYPE_CHECKING:
    from beads.gitrepo import GitRepo
    from beads.index import Index
    from beads.record import Bead
    from beads.view import View


def catch_up_index(git: GitRepo, index: Index, old: bytes | None, new: bytes) -> None:
    """Index the files that changed from commit `old` to `new` (everything, from an empty
    index, when `old` is None), in one transaction."""
    from beads.codec import load_bead  # lazy, like every YAML use: reads never parse YAML

    upserts: list[tuple[Bead, str, str]] = []
    deleted: list[str] = []
    invalid: dict[str, str | None] = {}
    types: set[str] = set()  # of every bead file changed, as its path says
    config = None
    if old is None:
        changed = ((path, None, sha) for path, sha in git.files(new))
    else:
        changed = ((c.path, c.old_sha, c.new_sha) for c in git.changes(old, new))
    for path, old_sha, new_sha in changed:
        if path == CONFIG_PATH:
            if new_sha is not None:
                config, invalid[path] = parse_config(git.read(new_sha))
            continue
        located = parse_bead_path(path)
        if located is None:
            continue
        types.add(located[0])
        if old_sha is not None:
            deleted.append(path)
        if new_sha is None:
            continue
        try:
            # Committed elsewhere already: indexed whatever its size, never refused.
            bead = load_bead(git.read(new_sha), what=path, max_body=1 << 62)
            if (bead.type, bead.id) != located:
                raise InvalidInput(f"{path} holds {bead.type} {bead.id}, not what its path says")
        except InvalidInput as exc:
            invalid[path] = exc.message
            continue
        invalid[path] = None
        upserts.append((bead, path, new_sha.decode()))
    index.apply(
        head=new,
        upserts=upserts,
        deleted_paths=deleted,
        invalid=invalid,
        config=config,
        reset=old is None,
        link=None if old is None else (old, types),
    )


def catch_up_view(git: GitRepo, view: View, old: bytes, new: bytes) -> None:
    """Write and remove the view's files that changed from commit `old` to `new`."""
    for change in git.changes(old, new):
        if change.new_sha is None:
            view.remove(change.path)
        else:
            view.write(change.path, git.read(change.new_sha))
        fault("mid-view-catch-up")
    view.mark_applied(new)


def rebuild_view(git: GitRepo, view: View, head: bytes) -> None:
    """Make the view hold exactly the files of commit `head` (its own commit is unknown)."""
    wanted = dict(git.files(head))
    for path in view.files():
        if path not in wanted:
            view.remove(path)
    for path, sha in wanted.items():
        current = view.read(path)
        if current is None or git_blob_sha(current) != sha:
            view.write(path, git.read(sha))
    view.mark_applied(head)
