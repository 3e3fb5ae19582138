"""The store's bare git repository, driven through dulwich objects directly.

Commits are built from objects (blobs, the trees on their paths, a commit) and installed with
a compare-and-swap of the branch ref. Git's index and dulwich's porcelain are never used: they
cost time proportional to the store's size, this route costs time proportional to the change.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from dulwich.errors import NotTreeError
from dulwich.file import GitFile
from dulwich.object_store import PACK_MODE, DiskObjectStore, tree_lookup_path
from dulwich.objects import Blob, Commit, ShaFile, Tree
from dulwich.pack import iter_sha1, write_pack_index, write_pack_objects
from dulwich.refs import DiskRefsContainer

from beads.errors import Conflict, StorageError
from beads.location import MARKER_SECTION

BRANCH = b"refs/heads/main"
FILE_MODE = 0o100644
DIR_MODE = 0o040000
# Past this many objects one commit writes a pack instead of loose objects (batches).
PACK_OBJECTS_AT = 64


class FileChange(NamedTuple):
    """A file that differs between two commits; a side is None where the file is absent."""

    path: str
    old_sha: bytes | None
    new_sha: bytes | None


class LogEntry(NamedTuple):
    """One commit of the history."""

    commit: str
    author: str
    time: int
    message: str

    def to_json(self) -> dict[str, object]:
        return {
            "commit": self.commit,
            "author": self.author,
            "time": self.time,
            "message": self.message,
        }


def init_bare(git_dir: Path) -> GitRepo:
    """Create the bare repository `git_dir` with our settings and return it."""
    from dulwich.repo import Repo  # only `init` needs the repository layer

    repo = Repo.init_bare(str(git_dir), mkdir=True, default_branch=b"main")
    config = repo.get_config()
    config.set((b"core",), b"bare", True)
    # No automatic gc: it would run inside some unlucky writer's command. We pack ourselves.
    config.set((b"gc",), b"auto", b"0")
    config.set((MARKER_SECTION,), b"format", b"1")
    config.write_to_path()
    repo.close()
    return GitRepo(git_dir)


class GitRepo:
    """The bare repository under `.beads/.git`: its object store and its refs.

    Opened as those two parts rather than as a dulwich `Repo`, whose opening parses the git
    config, probes for worktrees and imports their modules: several ms on every command, for
    nothing this store uses (it made the repository itself, bare, with our settings).
    """

    def __init__(self, git_dir: Path) -> None:
        for part in ("objects", "refs"):
            if not (git_dir / part).is_dir():
                raise StorageError(f"the store's git repository {git_dir} has no {part}/ directory")
        try:  # gc made the repository without extensions: one that has them was changed
            if b"[extensions]" in (git_dir / "config").read_bytes():
                raise StorageError(
                    f"the store's git repository {git_dir} uses git extensions (a different ref "
                    "or object format) that gc-beads does not read"
                )
        except OSError as exc:
            raise StorageError(f"cannot read {git_dir / 'config'}: {exc.strerror}") from None
        try:
            self.objects = DiskObjectStore(str(git_dir / "objects"))
            self.refs = DiskRefsContainer(str(git_dir))
        except Exception as exc:  # dulwich raises several kinds for a damaged repository
            raise StorageError(f"cannot open the store's git repository {git_dir}: {exc}") from None
        # Close pack files at exit even if the caller forgot, before interpreter teardown
        # (dulwich's own finalizers complain when they run that late).
        self._finalizer = weakref.finalize(self, self.objects.close)

    def close(self) -> None:
        self._finalizer()

    # -- reading ------------------------------------------------------------------------

    def head(self) -> bytes | None:
        """The commit the branch points at, or None before the first commit."""
        try:
            return self.refs[BRANCH]
        except KeyError:
            return None

    def has_object(self, sha: bytes) -> bool:
        return sha in self.objects

    def tree_of(self, commit_id: bytes | None) -> bytes | None:
        if commit_id is None:
            return None
        commit = self.objects[commit_id]
        assert isinstance(commit, Commit)
        return commit.tree

    def read(self, sha: bytes) -> bytes:
        """The content of a blob."""
        blob = self.objects[sha]
        assert isinstance(blob, Blob)
        return blob.as_raw_string()

    def read_path(self, commit_id: bytes, path: str) -> bytes | None:
        """The content of `path` at `commit_id`, or None when it is not there."""
        tree = self.tree_of(commit_id)
        try:
            _mode, sha = tree_lookup_path(self.objects.__getitem__, tree, path.encode())
        except (KeyError, NotTreeError):
            return None
        return self.read(sha)

    def files(self, commit_id: bytes | None) -> Iterator[tuple[str, bytes]]:
        """Every file of the commit as `(path, blob sha)`."""
        tree = self.tree_of(commit_id)
        if tree is None:
            return
        for entry in self.objects.iter_tree_contents(tree):
            yield entry.path.decode(), entry.sha

    def changes(self, old_commit: bytes | None, new_commit: bytes) -> Iterator[FileChange]:
        """Files that differ between two commits; identical subtrees are skipped unread."""
        from dulwich.diff_tree import tree_changes  # only catch-up needs it: lazy for start-up

        for change in tree_changes(
            self.objects, self.tree_of(old_commit), self.tree_of(new_commit)
        ):
            old, new = change.old, change.new
            path = (new.path if new is not None and new.path is not None else old.path).decode()
            yield FileChange(path, old.sha if old else None, new.sha if new else None)

    def log(
        self, path: str | None = None, limit: int | None = None, grep: str | None = None
    ) -> list[LogEntry]:
        """Commits from newest to oldest: only those that touched `path`, and whose message
        starts with `grep`, when given; at most `limit` (the walk stops there)."""
        head = self.head()
        if head is None:
            return []
        paths = [path.encode()] if path else None
        prefix = grep.encode() if grep else b""
        out: list[LogEntry] = []
        from dulwich.walk import Walker

        for entry in Walker(self.objects, include=[head], paths=paths):
            commit = entry.commit
            if not commit.message.startswith(prefix):
                continue
            author = commit.author.decode("utf-8", "replace")
            message = commit.message.decode("utf-8", "replace").rstrip("\n")
            out.append(LogEntry(commit.id.decode(), author, commit.commit_time, message))
            if limit is not None and len(out) >= limit:
                break
        return out

    # -- writing ------------------------------------------------------------------------

    def build_commit(
        self, parent: bytes | None, files: dict[str, bytes | None], message: str, author: str
    ) -> tuple[Commit, list[ShaFile]]:
        """Build, not store, a commit applying `files` (path -> content, None deletes) to `parent`.

        Returns the commit and every new object it needs, the commit last.
        """
        new_objects: list[ShaFile] = []
        by_path: dict[tuple[str, ...], bytes | None] = {}
        for path, content in files.items():
            if content is None:
                by_path[tuple(path.split("/"))] = None
            else:
                blob = Blob.from_string(content)
                new_objects.append(blob)
                by_path[tuple(path.split("/"))] = blob.id
        root = self._rebuild_tree(self.tree_of(parent), by_path, new_objects, is_root=True)
        commit = Commit()
        assert root is not None  # the root tree is kept even when empty
        commit.tree = root
        commit.parents = [parent] if parent else []
        identity = f"{author} <{author}@gc-beads>".encode()
        commit.author = commit.committer = identity
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.rstrip("\n").encode() + b"\n"
        new_objects.append(commit)
        return commit, new_objects

    def store_objects(self, objects: list[ShaFile]) -> None:
        """Write objects: loose for a small commit, one pack for a large batch."""
        if len(objects) >= PACK_OBJECTS_AT:
            self._write_pack(objects)
        else:
            for obj in objects:
                self.objects.add_object(obj)

    def _write_pack(self, objects: list[ShaFile]) -> None:
        """Write `objects` as one pack, named as git names packs.

        Not `add_objects`: dulwich 1.2 compares a new pack's name with every existing pack's,
        hashing all their object ids, so each batch would cost O(store size). A pack counts
        once its `.idx` exists, and the `.idx` is written last, so a crash leaves no half pack.
        """
        import tempfile  # lazy: it loads shutil, bz2 and lzma, and only batches write packs

        store = self.objects
        fd, temp = tempfile.mkstemp(dir=store.pack_dir, prefix="tmp_pack_")
        try:
            with os.fdopen(fd, "wb") as handle:
                entries, checksum = write_pack_objects(
                    handle, [(obj, None) for obj in objects], object_format=store.object_format
                )
            index = sorted((sha, offset, crc) for sha, (offset, crc) in entries.items())
            base = os.path.join(store.pack_dir, "pack-" + iter_sha1(e[0] for e in index).decode())
            os.chmod(temp, PACK_MODE)  # as dulwich's packs: mkstemp's 0600 hides it from a group
            os.replace(temp, base + ".pack")
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise
        with GitFile(base + ".idx", "wb") as handle:
            write_pack_index(handle, index, checksum)
        store._update_pack_cache()

    def swap_head(self, old: bytes | None, new: bytes) -> None:
        """Move the branch from `old` to `new`, failing if someone moved it meanwhile."""
        if old is None:
            ok = self.refs.add_if_new(BRANCH, new)
        else:
            ok = self.refs.set_if_equals(BRANCH, old, new)
        if not ok:
            raise Conflict("the store's branch moved during the write; nothing was changed, retry")

    def pack_loose_objects(self) -> int:
        """Move loose objects into a pack; returns how many were packed."""
        store = self.objects
        loose = [store._get_loose_object(sha) for sha in store._iter_loose_objects()]
        objects = [obj for obj in loose if obj is not None]
        if objects:
            self._write_pack(objects)
            for obj in objects:  # only once the pack holding them is in place
                store.delete_loose_object(obj.id)
        return len(objects)

    def repack(self) -> None:
        """Consolidate every pack and loose object into one pack (`gc doctor --gc`)."""
        self.objects.repack()

    def _rebuild_tree(
        self,
        tree_id: bytes | None,
        changes: dict[tuple[str, ...], bytes | None],
        new_objects: list[ShaFile],
        *,
        is_root: bool = False,
    ) -> bytes | None:
        tree = self.objects[tree_id] if tree_id is not None else Tree()
        assert isinstance(tree, Tree)
        children: dict[str, dict[tuple[str, ...], bytes | None]] = {}
        for parts, sha in changes.items():
            if len(parts) == 1:
                name = parts[0].encode()
                if sha is None:
                    if name in tree:
                        del tree[name]
                else:
                    tree[name] = (FILE_MODE, sha)
            else:
                children.setdefault(parts[0], {})[parts[1:]] = sha
        for child, child_changes in children.items():
            name = child.encode()
            old_child = tree[name][1] if name in tree else None
            new_child = self._rebuild_tree(old_child, child_changes, new_objects)
            if new_child is None:
                if name in tree:
                    del tree[name]
            else:
                tree[name] = (DIR_MODE, new_child)
        if len(tree) == 0 and not is_root:
            return None  # git has no empty directories
        new_objects.append(tree)
        return tree.id
