"""`gc doctor` and a branch whose newest commit object was lost (a power cut took its loose
file, a hand deleted it): the commit is made again on its parent, from what the index
recorded of it, so no bead it held is lost.

Every write records its commit in the index (`head`, and a link to its parent) with the
blob id of every bead file; the view holds the files themselves. When the branch (or, for a
lost ref, the reflog's last entry) names a commit that cannot be read and the index is at
that very commit, its files are known: the parent's tree (the reflog entry that made the
lost commit names it, else the index's link) with the index's bead files put in. A blob lost
too is written again from the view file whose bytes hash to it; a file the index keeps no
blob id of (`config.yaml`, an unparsable bead file) comes from the view when the view is at
the lost commit, else from the parent when it did not change. A new commit with that tree
goes on the parent (`gc doctor: redo lost commit X (what it did)`), and the branch moves to
it; the reflog's entries naming the lost commit are dropped (git fsck fails on them), so it
reads as the parent, then the commit made again.

When the index is elsewhere, or a file cannot be found, nothing is made: the branch goes
back to the last good commit as for a lost ref, the view's files that differ from it are
copied to `.runtime/lost-commits/<commit>/` first, and the problem is reported as not fixed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NamedTuple

from beads import files
from beads.errors import StorageError
from beads.git import repair
from beads.records.ids import parse_bead_path
from beads.refresh import tree_files
from beads.settings.config import CONFIG_PATH, parse_config
from beads.view.view import git_blob_sha

if TYPE_CHECKING:
    from beads.store import Store

LOST_DIR = "lost-commits"


class Redone(NamedTuple):
    """The commit made again: its new id, its parent, and what the lost one did."""

    sha: bytes
    parent: bytes
    subject: str


def lost_commit(store: Store, head: bytes | None) -> bytes | None:
    """The commit the branch last held when its object cannot be read: `head`, or for a
    lost ref the reflog's last entry; None when that commit reads, or when no record says
    the branch held it (the reflog, the index, the view): a ref garbled into some other id
    lost no commit."""
    git = store.git
    named = head if head is not None else repair.last_reflog_entry(git.git_dir)
    if named is None or git.commit_of(named) is not None:
        return None
    held = (
        repair.reflog_entry_making(git.git_dir, named) is not None
        or store.index.head() == named
        or store.view.applied() == named
    )
    return named if held else None


def redo(store: Store, lost: bytes) -> Redone | None:
    """Make the lost commit `lost` again on its parent from the index's record of its files,
    and move the branch to it (the write lock held); None when the index is not at `lost`
    or a file of it cannot be found (nothing is made)."""
    git, index = store.git, store.index
    if index.head() != lost:
        return None
    made = repair.reflog_entry_making(git.git_dir, lost)
    parent = made[0] if made is not None else index.link_parent(lost)
    if parent is None or git.commit_of(parent) is None:
        return None
    changes = _changes(store, lost, parent)
    if changes is None:
        return None
    subject = _subject(made[1]) if made is not None else ""
    title = f"gc doctor: redo lost commit {lost.decode()[:12]}"
    if subject:
        title += f" ({subject})"
    message = (
        f"{title}\n\nThe object of commit {lost.decode()} was lost; its files are the ones "
        "the index recorded of it (and the view held)."
    )
    commit, objects = git.build_commit(parent, {}, message, store.agent, blobs=changes)
    git.store_objects(objects)
    # The entries naming the lost commit go (git fsck fails on them; the new commit's
    # message names it): the reflog reads as the parent, then the commit made again.
    git.drop_reflog_entries(lost)
    git.swap_head(None, commit.id, title, store.agent, force=True, logged_from=parent)
    # The index's rows are the new tree's bead files, and a view at the lost commit holds
    # its files: both are at the new commit as they are.
    types = {located[0] for path in changes if (located := parse_bead_path(path)) is not None}
    index.apply(head=commit.id, link=(parent, types))
    if store.view.applied() == lost:
        store.view.mark_applied(commit.id)
    return Redone(commit.id, parent, subject)


def _changes(store: Store, lost: bytes, parent: bytes) -> dict[str, bytes | None] | None:
    """What the lost commit changed from `parent`, path -> blob id (None: deleted), each blob
    stored; None when a file's content cannot be found."""
    git, index, view = store.git, store.index, store.view
    before = tree_files(git, parent)
    rows = {path: blob.encode() for path, blob in index.rows(beads=False)}
    invalid = index.invalid()
    changes: dict[str, bytes | None] = {
        path: None
        for path in before
        if parse_bead_path(path) is not None and path not in rows and path not in invalid
    }
    for path, sha in rows.items():
        if before.get(path) != sha:
            changes[path] = sha
    # The files the index keeps no blob id of: from the view at the lost commit, else the
    # parent's when they did not change.
    unknown = set(invalid)
    if not _same_config(store, before.get(CONFIG_PATH)):
        unknown.add(CONFIG_PATH)
    view_at_lost = view.applied() == lost
    for path in sorted(unknown):
        data = view.read(path) if view_at_lost else None
        if data is not None:
            changes[path] = git_blob_sha(data)
            repair.restore_blob(git, changes[path], data)
        elif path not in before or path == CONFIG_PATH:
            return None  # a file of the lost commit that nothing holds
    for path, sha in changes.items():
        if sha is not None and not _readable(store, sha):
            data = view.read(path)
            if data is None or not repair.restore_blob(git, sha, data):
                return None
    return changes


def _same_config(store: Store, sha: bytes | None) -> bool:
    """Whether the parent's `config.yaml` (blob `sha`) holds the settings the index recorded
    of the lost commit."""
    recorded = store.index.config()
    if sha is None or recorded is None:
        return sha is None and recorded is None
    try:
        settings = parse_config(store.git.read(sha))[0]
    except (KeyError, StorageError):
        return False
    return settings is not None and json.loads(json.dumps(settings)) == recorded


def _readable(store: Store, sha: bytes) -> bool:
    try:
        store.git.read(sha)
    except (KeyError, StorageError):
        return False
    return True


def _subject(reflog_message: str) -> str:
    """What a reflog entry says the commit did (`commit: bead create ...` -> `bead create
    ...`), on one line."""
    text = reflog_message.splitlines()[0] if reflog_message else ""
    kind, sep, rest = text.partition(": ")
    return rest if sep and kind.startswith("commit") else text


def keep_view_files(store: Store, lost: bytes, restored: bytes) -> tuple[str, int]:
    """Copy the view's files that differ from commit `restored` (the view at the lost
    commit `lost`: what it held of it) to `.runtime/lost-commits/<lost>/`, before the branch
    goes back and the view follows; returns that folder (as shown) and how many were kept."""
    view = store.view
    folder = store.runtime / LOST_DIR / lost.decode()
    shown = folder.relative_to(store.root).as_posix()
    if view.applied() != lost:
        return shown, 0
    tree = tree_files(store.git, restored)
    kept = 0
    for path in view.files():
        data = view.read(path)
        if data is None or tree.get(path) == git_blob_sha(data):
            continue
        target = folder / path
        files.make_dirs(str(store.root), str(target.parent))
        files.write_atomic(str(store.root), str(target), data, str(store.runtime / "tmp"))
        kept += 1
    return shown, kept
