"""The view: HEAD's files written under `.beads/` so people and tools can `cat` and `grep` them.

Every file is written atomically (a temporary file in `.runtime/tmp`, then a rename), so a
reader never sees half a bead. The commit the view reflects is recorded in
`.runtime/view-applied`, with the setting it was made under; a view behind HEAD (a crash, a
push into the store) is brought forward from the tree diff, and one made under another
setting is rebuilt.

`store.view` says which bead files the view holds: `full` (all), `recent` (open beads and
those changed in the last `store.view_days` days) or `off` (none); files that are not beads
(`config.yaml`) are always there. One small file costs a 4 KiB block of disk, so at 100k beads
the full view is most of a store's size. Commands never read the view: it is for people.
Beads that age out of a `recent` view are removed by `View.prune` (`gc doctor` and the
store's maintenance call it).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from beads import files
from beads.records.ids import parse_bead_path
from beads.records.record import TIME_RE
from beads.records.times import stamp_at
from beads.settings.config import CONFIG_PATH, DEFAULT_VIEW, DEFAULT_VIEW_DAYS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from beads.index.index import Index

# Names under `.beads/` that belong to gc itself, never to the view.
RESERVED_NAMES = frozenset({".git", ".runtime"})


def git_blob_sha(data: bytes) -> bytes:
    """The sha git gives a blob with this content (to compare a view file with HEAD)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest().encode()


# A bead file's status and last change, read from its canonical text without parsing it (top
# level keys sit in the first column; a block scalar's lines are indented). Compiled on first
# use: only a `recent` view needs them, and compiling them would slow every command that writes.
_FIELDS: list[re.Pattern[bytes]] = []


def _closed_at(data: bytes) -> str | None:
    """When a closed bead file last changed; None when it is open or cannot be read."""
    if not _FIELDS:
        _FIELDS.append(re.compile(rb"^status: (\S+)$", re.MULTILINE))
        _FIELDS.append(re.compile(rb"^updated_at: '([^']+)'$", re.MULTILINE))
    status, updated = _FIELDS[0].search(data), _FIELDS[1].search(data)
    if status is None or updated is None or status.group(1) != b"closed":
        return None
    return updated.group(1).decode("ascii", "replace")


def in_layout(path: str) -> bool:
    """Whether `path` is one the store's layout holds: `config.yaml` or a bead file."""
    return path == CONFIG_PATH or parse_bead_path(path) is not None


class View:
    """The files under the store's directory that mirror HEAD (those `store.view` keeps)."""

    def __init__(self, root: Path, runtime: Path) -> None:
        self.root = root
        self.tmp = runtime / "tmp"
        self.applied_file = runtime / "view-applied"
        self.pruned_file = runtime / "view-pruned"
        self._root = str(root)
        self._tmp = str(self.tmp)
        # A link met in the view was replaced by a directory, so files that were behind it
        # are missing: the view is no longer known to match, and the next open rebuilds it.
        self._stale = False
        self.mode = DEFAULT_VIEW
        self.days = DEFAULT_VIEW_DAYS
        self.cutoff = ""  # `recent`: beads closed and last changed before this are left out
        self._made_under: bytes | None = None  # the setting the view on disk was made under

    def configure(self, mode: str, days: int) -> None:
        """Follow `store.view` and `store.view_days` (`beads.settings.config.view_policy`); a view
        made
        under another setting is rebuilt by the next `Store.refresh`."""
        self.mode, self.days = mode, days
        self.cutoff = stamp_at(time.time() - days * 86400) if mode == "recent" else ""

    @property
    def setting(self) -> bytes:
        """The setting as `view-applied` records it."""
        return b"recent %d" % self.days if self.mode == "recent" else self.mode.encode()

    def keeps(self, path: str, data: bytes | None) -> bool:
        """Whether the view holds the file `path` (with content `data`) under its setting;
        a bead file whose status or time cannot be read is kept."""
        if self.mode == "full" or parse_bead_path(path) is None:
            return True
        if self.mode == "off":
            return False
        changed = None if data is None else _closed_at(data)
        return changed is None or changed >= self.cutoff

    def expected(self, paths: Iterable[str], index: Index) -> set[str]:
        """Which of HEAD's `paths` the view holds, judged by the index (the lock held, the
        index up to date); a name outside the layout never (`write` refuses it)."""
        if self.mode == "full":
            return {path for path in paths if in_layout(path)}
        kept = set(index.recent_paths(self.cutoff)) if self.mode == "recent" else set()
        return {path for path in paths if path == CONFIG_PATH or path in kept}

    def prune(self, index: Index) -> int:
        """Remove the files of beads that aged out of a `recent` view: closed, last changed
        before the cutoff and after the previous prune's (the index says which, so the cost
        is in what aged out, not in the store's size). Call with the write lock held and the
        index up to date (`Store.refresh`); returns how many files were removed."""
        if self.mode != "recent":
            return 0
        mark = (self._read(self.pruned_file) or b"").decode("ascii", "replace")
        since = mark if TIME_RE.fullmatch(mark) and mark <= self.cutoff else None  # else all
        removed = 0
        for path in index.aged_out(since, self.cutoff):
            if self.remove(path):
                removed += 1
        self._mark_pruned()
        return removed

    def _mark_pruned(self) -> None:
        if self.mode == "recent":
            data = self.cutoff.encode() + b"\n"
            files.write_atomic(self._root, str(self.pruned_file), data, self._tmp)

    def _read(self, path: Path) -> bytes | None:
        try:  # non-blocking: a FIFO planted there would block the reader until written
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            return os.read(fd, 200).strip() or None
        except OSError:
            return None
        finally:
            os.close(fd)

    def marker(self) -> bytes | None:
        """`view-applied` as it is (never through a link, never waiting on a FIFO)."""
        return self._read(self.applied_file)

    def applied(self) -> bytes | None:
        """The commit the view reflects, or None when unknown or made under another setting
        (a view of an older gc, which records the commit alone, is a `full` one)."""
        content = self.marker()
        if content is None:
            return None
        # Two lines; anything after them is the tail of a longer marker a killed writer was
        # rewriting in place (`mark_applied`).
        commit, _, rest = content.partition(b"\n")
        self._made_under = rest.partition(b"\n")[0].strip() or b"full"
        return commit.strip() or None if self._made_under == self.setting else None

    def mark_applied(self, commit_id: bytes, *, rebuilt: bool = False) -> None:
        """Record that the view reflects `commit_id`; `rebuilt` when it was just made under
        the current setting (otherwise the setting it was made under is kept)."""
        if self._stale:
            self._stale = False
            try:
                self.applied_file.unlink()
            except FileNotFoundError:
                pass
            return
        if rebuilt or self._made_under is None:
            self._made_under = self.setting
            self._mark_pruned()  # what the rebuild left out needs no pruning
        data = commit_id + b"\n" + self._made_under + b"\n"
        # A new file renamed into place: a reader sees the old marker or the new, never a mix.
        files.write_atomic(self._root, str(self.applied_file), data, self._tmp)

    def write(self, path: str, data: bytes) -> None:
        """Write HEAD's file `path`, or remove it when the setting leaves it out."""
        # No fsync: the view is derived from git, so a file lost to a power cut is found and
        # rewritten by `gc doctor --restore-view`; the rename still means no process ever
        # reads half a file, and a killed process loses nothing (the page cache survives it).
        # Directories are checked once per write (never through a link), so a batch of
        # thousands of files pays a set lookup per file (`beads.files.checking`).
        if not files.contained(path) or not in_layout(path):
            # Outside the store, inside its .git or .runtime, or a name the store's layout
            # does not hold (a `city.toml` would be read as the project's own file): never
            # written, whatever HEAD's tree says.
            return
        if self.mode != "full" and not self.keeps(path, data):
            self.remove(path)
            return
        target = os.path.join(self._root, path)
        if files.write_atomic(self._root, target, data, self._tmp, replace_links=True):
            self._stale = True

    def remove(self, path: str) -> bool:
        """Remove the view's file `path`; returns whether there was one."""
        if not files.contained(path):
            return False  # never outside the store, nor inside its .git or .runtime
        target = os.path.join(self._root, path)
        parent = os.path.dirname(target)
        if not files.real_dir(self._root, parent):
            return False  # missing, or behind a link: nothing of the view's is there
        try:
            os.unlink(target)  # a link at `target` is removed, never followed
        except FileNotFoundError:
            return False
        # Drop shard directories left empty, never the store's own directory.
        while parent != self._root:
            try:
                os.rmdir(parent)
            except OSError:
                break
            files.forget(parent)
            parent = os.path.dirname(parent)
        return True

    def read(self, path: str) -> bytes | None:
        """The view's file, or None when missing or behind a link (never followed)."""
        if not files.contained(path):
            return None
        target = os.path.join(self._root, path)
        if not files.real_dir(self._root, os.path.dirname(target)):
            return None
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # missing, a link (ELOOP), a directory
            return None
        try:  # os.read, not a file object: doctor reads every file of a 100k-bead view
            chunks = []
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError:  # a directory (EISDIR), an I/O error
            return None
        finally:
            os.close(fd)

    def files(self) -> list[str]:
        """Every file of the view (relative paths), gc's own directories excluded; links
        are not files of the view (`links` lists them)."""
        return self.scan()[0]

    def links(self) -> list[str]:
        """Symbolic links in the view (relative paths), sorted."""
        return self.scan()[1]

    def scan(self) -> tuple[list[str], list[str]]:
        """The view's files and its symbolic links (relative paths, the links sorted), in one
        walk that never follows a link (a directory entry tells its kind without a stat)."""
        found: list[str] = []
        linked: list[str] = []
        todo = [("", self._root)]
        while todo:
            rel, directory = todo.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError:  # gone, or unreadable: as os.walk, nothing to list there
                continue
            for entry in entries:
                name = entry.name
                if not rel and name in RESERVED_NAMES:
                    continue
                path = f"{rel}/{name}" if rel else name
                if entry.is_symlink():
                    linked.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    todo.append((path, entry.path))
                else:
                    found.append(path)
        return found, sorted(linked)
