"""Writing the store's git objects: a commit built from the trees on its paths, its objects
stored loose (one file each) or, for a large batch, as one pack, and the packs kept few.

`GitRepo` writes through `ObjectWriter` (a mixin over its object lookups, its cache of trees
and its object store). A tree is edited as bytes (`beads/git/objects.py`); a loose object is
written with `dulwich.objects` and `dulwich.file` alone, without dulwich's object store, so a
send never pays for the pack machinery it does not use.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dulwich.file import FileLocked, GitFile
from dulwich.objects import Blob, Commit, ShaFile, Tree

from beads.errors import StorageError
from beads.faults import fault
from beads.git.objects import TREE, TreeCache, TreeData, is_group_store, loose_path
from beads.git.trees import DIR_MODE

if TYPE_CHECKING:
    from dulwich.object_store import DiskObjectStore

    from beads.git.maintenance import Repacked

FILE_MODE = 0o100644
# Past this many objects one commit writes a pack instead of loose objects (batches).
PACK_OBJECTS_AT = 64
# Loose objects are stored, not compressed (git's core.looseCompression 0): a loose object
# lives only until the next repack, which compresses it into the pack, and a write's trees
# (mostly 20-byte ids, 8 KiB at 256 entries) shrink by under a fifth for the time it takes.
LOOSE_COMPRESSION = 0
# Tries at writing one loose object (see `GitRepo.add_loose`).
ADD_ATTEMPTS = 3
# The mode a loose object file is created with (less the umask), as git and dulwich make it.
LOOSE_MODE = 0o444
# Who made a commit when the opener named no committer.
DEFAULT_COMMITTER = b"gc-beads <gc-beads@localhost>"


class ObjectWriter:
    """The object writers of `GitRepo` (a mixin over its object lookups and object store)."""

    git_dir: Path
    trees: TreeCache
    _objects_dir: str
    _committer: bytes | None
    _committer_of: Callable[[Path], bytes] | None
    _object_mode: int | None
    _umask_allows: bool | None
    tree_of: Callable[[bytes | None], bytes | None]
    has_object: Callable[[bytes], bool]
    objects: DiskObjectStore

    def build_commit(
        self,
        parent: bytes | None,
        files: dict[str, bytes | None],
        message: str,
        author: str,
        *,
        blobs: dict[str, bytes | None] | None = None,
        merged: bytes | None = None,
        root_of_parent: bytes | None = None,
    ) -> tuple[Commit, list[ShaFile]]:
        """Build, not store, a commit applying `files` (path -> content, None deletes) to `parent`.

        `blobs` sets paths to blobs already stored (path -> blob id); `merged` makes it a
        merge commit, `merged` its second parent; `root_of_parent`, the parent's tree when
        the caller knows it. Returns the commit and every new object it needs, the commit
        last. The new trees are kept (`tree`): the next commit starts from them.
        """
        new_objects: list[ShaFile] = []
        by_path = {tuple(path.split("/")): sha for path, sha in (blobs or {}).items()}
        for path, content in files.items():
            if content is None:
                by_path[tuple(path.split("/"))] = None
            else:
                blob = Blob.from_string(content)
                new_objects.append(blob)
                by_path[tuple(path.split("/"))] = blob.id
        root_tree = root_of_parent if root_of_parent is not None else self.tree_of(parent)
        root = self._rebuild_tree(root_tree, by_path, new_objects, is_root=True)
        commit = Commit()
        assert root is not None  # the root tree is kept even when empty
        commit.tree = root
        commit.parents = [parent] if parent else []
        if merged is not None:
            commit.parents.append(merged)
        commit.author = f"{author} <{author}@gc-beads>".encode()
        commit.committer = self.committer()
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.rstrip("\n").encode() + b"\n"
        new_objects.append(commit)
        return commit, new_objects

    def committer(self) -> bytes:
        """This machine as the committer of its commits (what the opener's `committer` says:
        the store names the machine, so a commit that arrived by sync says where it was made)."""
        if self._committer is None:
            if self._committer_of is None:
                self._committer = DEFAULT_COMMITTER
            else:
                self._committer = self._committer_of(self.git_dir)
        return self._committer

    def store_objects(self, objects: Sequence[ShaFile]) -> None:
        """Write objects: loose for a small commit, one pack for a large batch."""
        try:
            if len(objects) >= PACK_OBJECTS_AT:
                self.write_pack(objects, points=("mid-pack", "before-idx"))
                self.maintain()
                return
            for obj in objects:
                self.add_loose(obj)
        except OSError as exc:  # a full disk, say: the branch has not moved
            raise StorageError(
                f"cannot write git objects: {exc.strerror or exc}; nothing was changed"
            ) from None

    def add_loose(self, obj: ShaFile) -> None:
        """Write one object as a loose file (as dulwich's `add_object` does: a lock file
        renamed into place, so no reader sees half an object), readable by the store's users
        only."""
        path = loose_path(self._objects_dir, obj.id)
        for attempt in range(ADD_ATTEMPTS):
            try:
                _write_loose(obj, path)
                break
            except FileLocked as exc:
                # We hold the store's write lock: the lock file is a killed writer's (git
                # writes objects under other temporary names). Removed, and written again.
                if attempt == ADD_ATTEMPTS - 1:
                    raise StorageError(
                        f"cannot write git objects: {exc.lockfilename!s} stays locked; "
                        "nothing was changed"
                    ) from None
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(exc.lockfilename)
            except FileNotFoundError:
                # `git repack` (its prune-packed) removes a fan-out directory it emptied,
                # perhaps between dulwich making sure it is there and writing into it: git
                # itself makes it again and retries, and so does this.
                if attempt == ADD_ATTEMPTS - 1:
                    raise
        if self._chmod_needed():
            with contextlib.suppress(OSError):  # another member's object, in a group store
                os.chmod(path, self.object_mode())

    def _chmod_needed(self) -> bool:
        """Whether an object file dulwich makes (mode 0444 less the umask) may be readable
        by more than `object_mode` allows: the process umask, read once (Linux shows it in
        /proc; elsewhere every object file is given its mode)."""
        if self._umask_allows is None:
            umask = None
            with contextlib.suppress(OSError, ValueError):
                with open("/proc/self/status", "rb") as status:
                    for line in status:
                        if line.startswith(b"Umask:"):
                            umask = int(line.split()[1], 8)
            allowed = self.object_mode()
            self._umask_allows = umask is not None and 0o444 & ~umask & ~allowed == 0
        return not self._umask_allows

    def object_mode(self) -> int:
        """The mode of an object file: read-only, for the owner alone unless the store is
        shared with its group (its directory then has group rights: `store.shared`)."""
        if self._object_mode is None:
            self._object_mode = 0o440 if is_group_store(self.git_dir) else 0o400
        return self._object_mode

    def write_pack(self, objects: Sequence[ShaFile], *, points: tuple[str, str]) -> str | None:
        """Write `objects` as one pack (dulwich writes the pack, then its `.idx`: a crash
        leaves no pack without its index under a pack's name). The fault points `points`
        are passed halfway through the objects and once they are all written. Returns the
        pack's path without its suffix (None for no objects)."""
        from dulwich.pack import PackFileDisappeared, full_unpacked_object

        unique = list({obj.id: obj for obj in objects}.values())
        mid, written = points

        def records() -> Iterator[object]:
            for number, obj in enumerate(unique):
                if number == len(unique) // 2:
                    fault(mid)
                yield full_unpacked_object(obj)
            fault(written)

        for attempt in range(2):
            # dulwich compares the new pack with every pack it holds open, and reads the new
            # one back, before it returns: the packs are dropped first, so one a background
            # repack removed is not among them. That repack may also take in and remove the
            # new pack itself as soon as its `.idx` is there: its objects are then in the
            # repack's pack, which is all a write needs.
            self.objects.close()
            try:
                pack = self.objects.add_pack_data(len(unique), records())  # type: ignore[arg-type]
                break
            except (PackFileDisappeared, FileNotFoundError):
                self.objects.close()
                if all(self.has_object(obj.id) for obj in unique):
                    return None
                if attempt:
                    raise StorageError(
                        "cannot write a pack: its files vanished as it was written; retry"
                    ) from None
        if pack is None:
            return None
        try:
            base = os.path.join(self._objects_dir, "pack", "pack-" + pack.name().decode())
        except PackFileDisappeared:  # already taken in by a background repack
            return None
        self.give_mode(
            base + ".pack", base + ".idx", os.path.join(self._objects_dir, "info", "packs")
        )
        return base

    def give_mode(self, *paths: str) -> None:
        """Give files dulwich wrote (a pack, its `.idx`, the list of packs) the mode of an
        object file, when the umask may have left them readable by more."""
        if not self._chmod_needed():
            return
        for path in paths:
            with contextlib.suppress(OSError):  # gone (repacked), or another member's
                os.chmod(path, self.object_mode())

    def discard_commit(self, commit_id: bytes) -> None:
        """Delete the loose object of a commit whose ref update failed: the writer was told
        it failed, so `gc doctor`, restoring a lost branch from the objects alone, must not
        find it as the newest commit. (Its trees and blobs are unreachable and harmless.)"""
        with contextlib.suppress(OSError):
            self.objects.delete_loose_object(commit_id)

    def maintain(self, *, loose: bool = False) -> None:
        """Keep the packs few after a write (`beads/git/maintenance.py`): start the background
        repack when the packs are out of progression, or, with `loose`, to pack the loose
        objects."""
        from beads.git.maintenance import after_write

        # A full disk, a damaged pack: upkeep never fails a write. The packs stay as they
        # are (every step of a merge is safe to interrupt) until a later write.
        with contextlib.suppress(Exception):
            after_write(self, loose=loose)

    def pack_loose_objects(self) -> int:
        """Move the loose objects into a pack now; returns how many were packed.

        An unreadable loose object (cut short by a full disk or a power cut) is left where it
        is for `gc doctor` to report: it must not fail every write that packs."""
        from beads.git.maintenance import locked, pack_loose

        with locked(self.git_dir):
            return pack_loose(self)

    def repack(self, *, use_git: bool = True) -> Repacked:
        """Repack every object into one pack, with deltas (`gc doctor --gc`)."""
        from beads.git.maintenance import full

        return full(self, use_git=use_git)

    def _rebuild_tree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[str, ...], bytes | None],
        new_objects: list[ShaFile],
        *,
        is_root: bool = False,
    ) -> bytes | None:
        old = self.trees.get(tree_id) if tree_id is not None else TreeData({})
        if old is None:
            raise StorageError(
                f"object {tree_id!r} stands where the store expects a directory; run 'gc doctor'"
            )
        edits: dict[bytes, tuple[int, bytes] | None] = {}
        children: dict[str, dict[tuple[str, ...], bytes | None]] = {}
        for parts, sha in changes.items():
            if len(parts) == 1:
                edits[parts[0].encode()] = None if sha is None else (FILE_MODE, sha)
            else:
                children.setdefault(parts[0], {})[parts[1:]] = sha
        for child, child_changes in children.items():
            name = child.encode()
            entry = old.entries.get(name)
            old_child = entry[1] if entry is not None and entry[0] == DIR_MODE else None
            new_child = self._rebuild_tree(old_child, child_changes, new_objects)
            edits[name] = None if new_child is None else (DIR_MODE, new_child)
        tree = old.changed(edits)
        if not tree.entries and not is_root:
            return None  # git has no empty directories
        obj = Tree.from_raw_string(TREE, tree.raw)
        new_objects.append(obj)
        self.trees.forget(tree_id)  # the version this commit replaces
        self.trees.keep(obj.id, tree)
        return obj.id


def refreshed(path: str) -> bool:
    """Whether the loose object at `path` is there; its time is refreshed if so, so that a
    prune by age does not take it before a ref names it."""
    try:
        os.utime(path, None)
    except (FileNotFoundError, PermissionError):  # absent; or another member's, left stale
        return False
    return True


def _write_loose(obj: ShaFile, path: str) -> None:
    """Write `obj` at `path` as a loose object, unless it is there already (then its time is
    refreshed, so that a prune by age does not take it before a ref names it). The bytes are
    dulwich's (`as_legacy_object`); the file is dulwich's `GitFile`, a lock file renamed into
    place: the steps of dulwich's `DiskObjectStore.add_object`, without its object store."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(os.path.dirname(path))
    if refreshed(path):
        return
    with GitFile(path, "wb", mask=LOOSE_MODE, fsync=False) as handle:
        handle.write(obj.as_legacy_object(compression_level=LOOSE_COMPRESSION))
