"""The store's bare git repository, driven through dulwich's public object store.

Commits are built from objects (blobs, the trees on their paths, a commit; the trees edited
as bytes in `beads/git/objects.py`), stored by dulwich (a loose object, or one pack for a
large batch), and installed with a compare-and-swap of the branch ref (`beads/git/refs.py`).
Git's index and dulwich's porcelain are never used: they cost time proportional to the
store's size, this route costs time proportional to the change.

A loose object is read and written with `dulwich.objects` alone (`ShaFile.from_path`,
`ShaFile.as_legacy_object` through `dulwich.file.GitFile`): dulwich's object store, with its
pack, multi-pack-index and diff modules, is imported only when a command first needs a packed
object or the store itself (`GitRepo.objects`). A send reads the few trees on its path, often
still loose, and writes loose objects: it never pays for the pack machinery it does not use.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from dulwich.objects import Blob, Commit, ShaFile

from beads.errors import StorageError
from beads.git.objects import (
    DamagedObject,
    HistoryCut,
    TreeCache,
    damaged,
    hashes_to,
    loose_path,
)
from beads.git.refs import STALE_LOCK_SECONDS, BranchRef
from beads.git.trees import TreeReader
from beads.git.writing import LOOSE_COMPRESSION, ObjectWriter

if TYPE_CHECKING:
    from dulwich.object_store import DiskObjectStore


# Calls to close an object store, each of which drops at least one pack (`_close_stores`).
CLOSE_ATTEMPTS = 1000


class LogEntry(NamedTuple):
    """One commit of the history."""

    commit: str
    author: str
    time: int
    message: str

    def to_json(self) -> dict[str, object]:
        """The entry as JSON replies show it (the time as RFC 3339 UTC, as beads show theirs)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.time)) + ".000000Z"
        return {
            "commit": self.commit,
            "author": self.author,
            "time": stamp,
            "message": self.message,
        }


def init_bare(
    git_dir: Path, *, marker: bytes, committer: Callable[[Path], bytes] | None = None
) -> GitRepo:
    """Create the bare repository `git_dir` with our settings and return it; `marker` names
    the config section that tells the store's repository from any other."""
    from dulwich.repo import Repo  # only `init` needs the repository layer

    repo = Repo.init_bare(str(git_dir), mkdir=True, default_branch=b"main")
    config = repo.get_config()
    config.set((b"core",), b"bare", True)
    # No automatic gc: it would run inside some unlucky writer's command. We pack ourselves.
    config.set((b"gc",), b"auto", b"0")
    # A reflog for every ref move, ours and those of a `git push` into the store.
    config.set((b"core",), b"logAllRefUpdates", True)
    config.set((marker,), b"format", b"1")
    config.write_to_path()
    repo.close()
    return GitRepo(git_dir, committer=committer)


class GitRepo(BranchRef, TreeReader, ObjectWriter):
    """The bare repository under `.beads/.git`: its object store and its refs.

    Opened as those two parts rather than as a dulwich `Repo`, whose opening parses the git
    config, probes for worktrees and imports their modules: several ms on every command, for
    nothing this store uses (it made the repository itself, bare, with our settings).
    """

    def __init__(
        self,
        git_dir: Path,
        *,
        stale_lock_seconds: float = STALE_LOCK_SECONDS,
        committer: Callable[[Path], bytes] | None = None,
        objects_dir: Path | None = None,
    ) -> None:
        """Open the repository at `git_dir`. `committer` names this machine as the committer
        of the commits made here (`git_dir` -> `name <email>`), read on the first commit.
        `objects_dir`: keep objects there instead of the repository's own objects directory
        (a fetch's quarantine, `beads.git.quarantine`, which reads the store's itself)."""
        self.git_dir = git_dir
        self.stale_lock_seconds = stale_lock_seconds
        self._committer_of = committer
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
        self._objects_dir = str(git_dir / "objects" if objects_dir is None else objects_dir)
        # dulwich's object store, opened on first use (`objects`); kept in a list the
        # finalizer shares, which cannot hold the repository itself.
        self._opened: list[_Rereading] = []
        self.trees = TreeCache(self.get_raw)
        self._committer: bytes | None = None
        self._object_mode: int | None = None
        self._umask_allows: bool | None = None
        # Close pack files at exit even if the caller forgot, before interpreter teardown
        # (dulwich's own finalizers complain when they run that late).
        weakref.finalize(self, _close_stores, self._opened)

    @property
    def objects(self) -> DiskObjectStore:
        """dulwich's object store of the repository (its packs and loose objects), opened
        the first time it is asked for: reading a loose object or writing one needs none of
        it (see the module's docstring). Its reads look again after a miss (`_Rereading`):
        a background repack may move an object while they look."""
        if not self._opened:
            from dulwich.object_store import DiskObjectStore

            try:
                store = DiskObjectStore(
                    self._objects_dir, loose_compression_level=LOOSE_COMPRESSION
                )
            except Exception as exc:  # dulwich raises several kinds for a damaged repository
                raise StorageError(
                    f"cannot open the store's git repository {self.git_dir}: {exc}"
                ) from None
            self._opened.append(_Rereading(store))
        return self._opened[0]  # type: ignore[return-value]  # it answers as the store does

    def close(self) -> None:
        """Close the pack files dulwich holds open (the repository stays usable: a later
        read opens what it needs again)."""
        _close_stores(self._opened)

    # -- reading ------------------------------------------------------------------------

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        """The type and bytes of object `sha`; KeyError when it is absent.

        A background repack may move an object between two looks (a loose object packed
        and deleted; a pack listed, then removed before its index was opened): the object
        store looks once more after a miss (`_Rereading`).

        Until the object store is open, a loose object that reads whole and hashes to its
        name is returned without opening it (an object's bytes are the same wherever they are
        kept); any other is looked up by dulwich's object store, packs first, and once it is
        open every look goes there (a reader of many packed objects pays no failed open of a
        loose file for each)."""
        if not self._opened:
            found = self._loose_raw(sha)
            if found is not None:
                return found
        found = self._stored_raw(sha)
        if found is None:
            raise KeyError(sha)
        return found

    def _stored_raw(self, sha: bytes) -> tuple[int, bytes] | None:
        """The type and bytes of `sha` as dulwich's object store reads them; None when it
        is absent (or a pack was removed under us), DamagedObject when dulwich cannot read
        it (a pack cut short, say).

        The DamagedObject is raised once dulwich's exception is dropped: its traceback holds
        views of the pack's memory map, and while they live the pack cannot be closed (the
        close would fail with a BufferError that hides the damage)."""
        try:
            return self.objects.get_raw(sha)
        except (KeyError, FileNotFoundError):
            return None
        except StorageError:  # the object store cannot be opened: said as it is
            raise
        except Exception:  # zlib.error, ChecksumMismatch, ...: dulwich raises several kinds
            pass
        raise damaged(sha)

    def _loose_raw(self, sha: bytes) -> tuple[int, bytes] | None:
        """The type and bytes of `sha` (hex) read from its loose file, or None when it is not
        there, cannot be read whole, or does not hash to its name."""
        if len(sha) != 40:
            return None
        try:
            obj = ShaFile.from_path(loose_path(self._objects_dir, sha))
            if obj.id != sha:  # the hash of what was read: not this object's bytes
                return None
            return obj.type_num, obj.as_raw_string()
        except Exception:  # absent, cut short, not zlib: dulwich raises several kinds
            return None

    def get(self, sha: bytes) -> ShaFile:
        """Object `sha` as a dulwich object; KeyError when it is absent."""
        type_num, raw = self.get_raw(sha)
        return ShaFile.from_raw_string(type_num, raw, sha)

    def commit_of(self, sha: bytes) -> Commit | None:
        """The commit with this id, or None when it is absent, unreadable or not a commit."""
        try:
            obj = self.get(sha)
        except Exception:  # absent, or a damaged object: dulwich raises several kinds
            return None
        return obj if isinstance(obj, Commit) else None

    def has_object(self, sha: bytes) -> bool:
        """Whether object `sha` is in the store (loose or packed).

        dulwich looks in the packs (listing them again when none holds it), then for the
        loose file: a background repack that packs a loose object between the two looks,
        and deletes its file once the pack is in place, made it absent. After a miss the
        packs are looked in once more (they list the new one), as reads look again
        (`_Rereading`); the store never deletes an object's last copy, so a hit stands."""
        try:
            if sha in self.objects:
                return True
        except FileNotFoundError:  # a pack removed under us by a repack
            self.objects.close()
            if sha in self.objects:
                return True
        return self.objects.contains_packed(sha)

    def tree_of(self, commit_id: bytes | None) -> bytes | None:
        if commit_id is None:
            return None
        commit = self.commit_of(commit_id)
        if commit is None:  # a ref set by hand, or an object lost to a power cut
            raise StorageError(
                f"commit {commit_id.decode()} is missing from the store's objects or is not a "
                "commit; run 'gc doctor' to restore the branch to the last good commit"
            )
        return commit.tree

    def read(self, sha: bytes) -> bytes:
        """The content of a blob; KeyError when it is absent or not a blob, StorageError
        naming `gc doctor` when its bytes cannot be read or do not hash to its name (dulwich
        reads a loose object without checking it)."""
        try:
            type_num, raw = self.get_raw(sha)
        except KeyError:
            raise
        except Exception:  # cut short, not zlib: dulwich raises several kinds
            raise damaged(sha) from None
        if not hashes_to(sha, type_num, raw):
            raise damaged(sha)
        if type_num != Blob.type_num:
            raise KeyError(sha)
        return raw

    def log(
        self,
        path: str | None = None,
        limit: int | None = None,
        grep: str | None = None,
        start: bytes | None = None,
    ) -> list[LogEntry]:
        """Commits from newest to oldest: only those that touched `path`, and whose message
        starts with `grep`, when given; at most `limit` (the walk stops there); from commit
        `start` (the next page of a history) instead of the branch's head."""
        head = start or self.head()
        if head is None:
            return []
        paths = [path.encode()] if path else None
        prefix = grep.encode() if grep else b""
        out: list[LogEntry] = []
        from dulwich.errors import MissingCommitError
        from dulwich.walk import Walker

        missing: bytes | None = None
        try:
            for entry in Walker(self.objects, include=[head], paths=paths):
                commit = entry.commit
                if not commit.message.startswith(prefix):
                    continue
                out.append(_entry(commit))
                if limit is not None and len(out) >= limit:
                    break
            return out
        except StorageError:
            raise
        except MissingCommitError as exc:
            missing = exc.sha
        except Exception:  # a damaged object: dulwich raises several kinds
            pass
        # Raised once dulwich's exception is dropped (see `_stored_raw`).
        if missing is not None and not self.has_object(missing):  # absent, not unreadable
            return self._log_to_cut(head, paths, prefix, limit)
        after = f" past commit {out[-1].commit}" if out else ""
        raise DamagedObject(f"the history cannot be read{after}: a git object is damaged")

    def _log_to_cut(
        self, head: bytes, paths: list[bytes] | None, prefix: bytes, limit: int | None
    ) -> list[LogEntry]:
        """`log` over a history that names missing commits: the entries read before the
        walk met them are returned when they fill `limit`; else HistoryCut carries them."""
        from beads.git.cutwalk import readable_history

        cut: list[bytes] = []
        out: list[LogEntry] = []
        for commit in readable_history(self, head, cut, paths[0] if paths else None):
            if commit.message.startswith(prefix):
                out.append(_entry(commit))
                if limit is not None and len(out) >= limit:
                    return out
        raise HistoryCut(cut, out)


def _entry(commit: Commit) -> LogEntry:
    """A commit as `log` lists it."""
    author = commit.author.decode("utf-8", "replace")
    message = commit.message.decode("utf-8", "replace").rstrip("\n")
    return LogEntry(commit.id.decode(), author, commit.commit_time, message)


class _Rereading:
    """dulwich's object store as the store's readers use it (`GitRepo.objects`): wrapped, not
    subclassed (dulwich's public API only), so that a read that misses looks once more.

    dulwich looks for an object in the packs it has listed (listing them again only when
    none holds it), then for its loose file. A background repack (`beads/git/maintenance.py`)
    that packs the loose objects between those two looks leaves the object in a pack the
    reader has not listed and deletes its loose file: the read missed an object the branch
    reaches (a history walk said "MissingCommitError"). As git does after a loose miss, the
    packs are listed again (new ones opened, vanished ones dropped) and the object looked up
    once more; a pack removed under the first look is handled the same way."""

    def __init__(self, store: DiskObjectStore) -> None:
        self.store = store

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        """The type and bytes of object `sha`; KeyError when it is absent."""
        return self._again(self.store.get_raw, sha)

    def __getitem__(self, sha: bytes) -> ShaFile:
        return self._again(self.store.__getitem__, sha)

    def _again(self, read: Callable[[bytes], Any], sha: bytes) -> Any:
        """`read(sha)`, and after a miss (or a pack file gone) the same once the packs were
        listed anew."""
        try:
            return read(sha)
        except (KeyError, FileNotFoundError):
            pass
        self.store.packs  # noqa: B018  public: lists the pack directory again
        return read(sha)

    def __contains__(self, sha: object) -> bool:
        return sha in self.store

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _close_stores(opened: list[_Rereading]) -> None:
    """Close the pack files of the object store in `opened`, if it was opened.

    A pack whose memory map is still viewed (by the traceback of an error dulwich raised
    reading it, while that error is being handled) cannot be unmapped: dulwich has dropped
    it from its packs before trying (it is unmapped once the views go), so the close goes
    on with the others, and the error being handled is the one told."""
    for store in opened:
        for _pack in range(CLOSE_ATTEMPTS):
            try:
                store.close()
                break
            except BufferError:
                continue
