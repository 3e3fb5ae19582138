"""The view: HEAD's files written under `.beads/` so people and tools can `cat` and `grep` them.

Every file is written atomically (a temporary file in `.runtime/tmp`, then a rename), so a
reader never sees half a bead. The commit the view reflects is recorded in
`.runtime/view-applied`; a view behind HEAD (a crash, a push into the store) is brought
forward from the tree diff.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from beads import files

# Names under `.beads/` that belong to gc itself, never to the view.
RESERVED_NAMES = frozenset({".git", ".runtime"})


def git_blob_sha(data: bytes) -> bytes:
    """The sha git gives a blob with this content (to compare a view file with HEAD)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest().encode()


class View:
    """The files under the store's directory that mirror HEAD."""

    def __init__(self, root: Path, runtime: Path) -> None:
        self.root = root
        self.tmp = runtime / "tmp"
        self.applied_file = runtime / "view-applied"
        self._root = str(root)
        self._tmp = str(self.tmp)
        # A link met in the view was replaced by a directory, so files that were behind it
        # are missing: the view is no longer known to match, and the next open rebuilds it.
        self._stale = False

    def applied(self) -> bytes | None:
        """The commit the view reflects, or None when unknown."""
        try:
            fd = os.open(self.applied_file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            return os.read(fd, 100).strip() or None
        finally:
            os.close(fd)

    def mark_applied(self, commit_id: bytes) -> None:
        if self._stale:
            self._stale = False
            try:
                self.applied_file.unlink()
            except FileNotFoundError:
                pass
            return
        files.write_atomic(self._root, str(self.applied_file), commit_id + b"\n", self._tmp)

    def write(self, path: str, data: bytes) -> None:
        # No fsync: the view is derived from git, so a file lost to a power cut is found and
        # rewritten by `gc doctor --restore-view`; the rename still means no process ever
        # reads half a file, and a killed process loses nothing (the page cache survives it).
        # Directories are checked once per process (never through a link), so a batch of
        # thousands of files pays a set lookup per file.
        target = os.path.join(self._root, path)
        if files.write_atomic(self._root, target, data, self._tmp, replace_links=True):
            self._stale = True

    def remove(self, path: str) -> None:
        target = os.path.join(self._root, path)
        parent = os.path.dirname(target)
        if not files.real_dir(self._root, parent):
            return  # missing, or behind a link: nothing of the view's is there
        try:
            os.unlink(target)  # a link at `target` is removed, never followed
        except FileNotFoundError:
            pass
        # Drop shard directories left empty, never the store's own directory.
        while parent != self._root:
            try:
                os.rmdir(parent)
            except OSError:
                break
            files.forget(parent)
            parent = os.path.dirname(parent)

    def read(self, path: str) -> bytes | None:
        """The view's file, or None when missing or behind a link (never followed)."""
        target = os.path.join(self._root, path)
        if not files.real_dir(self._root, os.path.dirname(target)):
            return None
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # missing, a link (ELOOP), a directory
            return None
        try:
            with open(fd, "rb", closefd=False) as handle:
                return handle.read()
        except OSError:
            return None
        finally:
            os.close(fd)

    def files(self) -> list[str]:
        """Every file of the view (relative paths), gc's own directories excluded; links
        are not files of the view (`links` lists them)."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root:
                dirnames[:] = [d for d in dirnames if d not in RESERVED_NAMES]
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                if not os.path.islink(os.path.join(dirpath, name)):
                    out.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
        return out

    def links(self) -> list[str]:
        """Symbolic links in the view (relative paths)."""
        return files.links(self._root, RESERVED_NAMES)
