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

    def applied(self) -> bytes | None:
        """The commit the view reflects, or None when unknown."""
        try:
            return self.applied_file.read_bytes().strip() or None
        except OSError:
            return None

    def mark_applied(self, commit_id: bytes) -> None:
        self._atomic_write(self.applied_file, commit_id + b"\n")

    def write(self, path: str, data: bytes) -> None:
        # No fsync: the view is derived from git, so a file lost to a power cut is found and
        # rewritten by `gc doctor --restore-view`; the rename still means no process ever
        # reads half a file, and a killed process loses nothing (the page cache survives it).
        # Plain string paths and no mkdir per file: a batch writes thousands of files into
        # directories that nearly always exist, so they are made only when a write finds one
        # missing (a new shard, or one `remove` emptied).
        target = os.path.join(self._root, path)
        tmp = os.path.join(self._tmp, f"{os.path.basename(path)}.{os.getpid()}.tmp")
        try:
            _write_and_replace(tmp, target, data)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.makedirs(self._tmp, exist_ok=True)
            _write_and_replace(tmp, target, data)

    def remove(self, path: str) -> None:
        target = self.root / path
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        # Drop shard directories left empty, never the store's own directory.
        parent = target.parent
        while parent != self.root:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def read(self, path: str) -> bytes | None:
        try:
            return (self.root / path).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def files(self) -> list[str]:
        """Every file of the view (relative paths), gc's own directories excluded."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            if Path(dirpath) == self.root:
                dirnames[:] = [d for d in dirnames if d not in RESERVED_NAMES]
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                out.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
        return out

    def _atomic_write(self, target: Path, data: bytes) -> None:
        self.tmp.mkdir(parents=True, exist_ok=True)
        tmp = self.tmp / f"{target.name}.{os.getpid()}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)


def _write_and_replace(tmp: str, target: str, data: bytes) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, target)
