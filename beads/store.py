"""The bead store: open, read through the index, write through the one commit path.

Every mutation, single or batched, goes through `Batch.commit`: under the write lock, bring
the index and view up to HEAD, build the commit from objects, store them, compare-and-swap the
branch, then write the view files and the index. Git is the source of truth: a crash at any
point leaves the branch either before or after the commit, and the next open brings the view
and the index forward from the tree diff.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock

from beads import files
from beads.config import CONFIG_PATH, FORMAT, check_config, default_config
from beads.errors import Conflict, GcError, InvalidInput, NotFound, StorageError
from beads.faults import fault
from beads.ids import (
    ID_RE,
    bead_path,
    check_id,
    check_id_prefix,
    check_prefix,
    new_id,
    parse_bead_path,
)
from beads.index import Index, Query
from beads.location import (
    INIT_PREFIX,
    check_not_foreign,
    exclude_from_project,
    find_store,
    is_store,
    store_dir_for,
)
from beads.reader import branch_head, require_head
from beads.record import Bead, acting_agent, check_agent, check_label, check_meta_key
from beads.times import now_stamp
from beads.view import View, git_blob_sha

if TYPE_CHECKING:
    from dulwich.objects import Tree

    from beads.gitrepo import GitRepo, LogEntry

LOCK_TIMEOUT = 30.0
# filelock's 50 ms default poll would stall bursts of writers; a few ms keeps them moving.
LOCK_POLL = 0.002
# Past this many loose objects a writer packs them (under the lock) so lookups stay fast.
PACK_LOOSE_AT = 1500
# What writing derived data (view files, the index) may raise once a commit is in.
_DERIVED_FAULTS = (OSError, sqlite3.Error, StorageError)
UPDATABLE = (
    "title",
    "body",
    "assignee",
    "cc",
    "labels",
    "priority",
    "thread",
    "reply_to",
    "parent",
)


class Store:
    """An open store. Use `Store.open()` to find one, `Store.init()` to make one."""

    def __init__(self, root: Path, *, agent: str | None = None) -> None:
        self.root = root
        self.runtime = root / ".runtime"
        # Nothing under .runtime is opened through a link (filelock and sqlite open by name).
        lock_path = str(self.runtime / "locks" / "write.lock")
        files.create(str(root), lock_path)
        files.prepare_db(str(root), str(self.runtime / "index.sqlite3"))
        self.agent = acting_agent(agent)
        self._git: GitRepo | None = None
        # Trees its batches read or wrote, by id (so never stale), shared by the batches that
        # prove index rows against git: the upper levels, which most writes read again. The
        # last commit made here and its root tree spare reading the commit back.
        self._trees: dict[bytes, Tree] = {}
        self._written: tuple[bytes, bytes] | None = None
        self.index = Index(self.runtime / "index.sqlite3", recover=self._rebuild_index)
        self.view = View(root, self.runtime)
        self._lock_mode = files.modes(str(root))[1]
        self._lock = filelock.FileLock(lock_path, mode=self._lock_mode)
        self._config: tuple[bytes | None, dict[str, Any]] | None = None
        head = branch_head(root)
        # A lost branch, or one naming no commit, is refused by the first read or write
        # (`sync`), not here, so that `gc doctor` can open the store to restore it.
        if head is not None and (self.index.head() != head or self.view.applied() != head):
            try:
                with self.locked():
                    self.sync()
            except StorageError:
                if self.git.commit_of(head) is not None:
                    raise
            except OSError:
                # Only the view is behind and cannot be written (a full disk, a read-only
                # store): reads need the index alone; the next writer brings the view up.
                if self.index.head() != head:
                    raise
        # Validated now (a store of a newer format is refused at open), and its modes applied.
        files.apply_shared(str(root), self.config["store"].get("shared"))

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, beads_dir: str | Path | None = None, *, agent: str | None = None) -> Store:
        """Open the store found from `beads_dir`, $GC_BEADS_DIR or the working directory."""
        return cls(find_store(beads_dir), agent=agent)

    @classmethod
    def init(
        cls,
        path: str | Path = ".",
        *,
        prefix: str | None = None,
        agent: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> tuple[Store, bool]:
        """Create the store under `path` (or open it if it exists); returns `(store, created)`.

        The repository is built under a temporary name and renamed into place once its first
        commit (`config.yaml`) is in, so a crash never leaves a half-made store.
        """
        from beads.codec import dump_data  # lazy, with git: most commands never make a store
        from beads.gitrepo import init_bare

        root = store_dir_for(Path(path).expanduser().absolute())
        if is_store(root):
            _exclude(root)  # again: a `gc init` killed just after the rename left it out
            return cls(root, agent=agent), False
        check_not_foreign(root)
        settings = check_config(config if config is not None else default_config())
        if prefix is not None:
            settings["store"]["prefix"] = check_prefix(prefix)
        author = acting_agent(agent)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file, or a link to nowhere
            raise InvalidInput(
                f"cannot make {root}: something that is not a directory is in the way "
                "(a file, or a symbolic link to nowhere)"
            ) from None
        files.apply_shared(str(root), settings["store"].get("shared"))
        remove_dead_builds(root)
        building = root / f"{INIT_PREFIX}{os.getpid()}"
        _remove_tree(building)
        git = init_bare(building)
        message = "init: gc-beads store"
        commit, objects = git.build_commit(
            None, {CONFIG_PATH: dump_data(settings)}, message, author
        )
        git.store_objects(objects)
        fault("mid-init")
        git.swap_head(None, commit.id, f"commit (initial): {message}", author)
        git.close()
        try:
            os.rename(building, root / ".git")
        except OSError:
            _remove_tree(building)
            if is_store(root):  # another `gc init` got there first: use its store
                return cls(root, agent=agent), False
            raise
        fault("init-renamed")
        _exclude(root)
        return cls(root, agent=agent), True

    def close(self) -> None:
        self.index.close()
        if self._git is not None:
            self._git.close()

    @property
    def git(self) -> GitRepo:
        """The git repository, opened on first use: reads that a fresh index serves never
        load dulwich (the branch head comes from the ref file)."""
        if self._git is None:
            from beads.gitrepo import GitRepo

            stale = self.config["store"]["stale_lock_seconds"]
            self._git = GitRepo(self.root / ".git", stale_lock_seconds=stale)
        return self._git

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def config(self) -> dict[str, Any]:
        """The settings of `config.yaml` at the index's commit (re-read when it moves)."""
        head = self.index.head()
        if self._config is None or self._config[0] != head:
            self._config = (head, check_config(self.index.config() or {"format": FORMAT}))
        return self._config[1]

    @property
    def prefix(self) -> str:
        return self.config["store"]["prefix"]

    @property
    def max_body(self) -> int:
        return self.config["store"]["max_body_bytes"]

    # -- reading ----------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The full id for an id or an unambiguous prefix of one."""
        self._ensure_fresh()
        return self._resolve(ref)

    def get(self, ref: str) -> Bead:
        """The bead with this id (or unambiguous id prefix); NotFound if none."""
        bead_id = self.resolve(ref)
        bead = self.index.get(bead_id)
        if bead is None:
            raise NotFound(f"no bead {ref}")
        return bead

    def get_many(self, bead_ids: Iterable[str]) -> dict[str, Bead]:
        """The beads with these exact ids (not prefixes), by id, in one index query; ids of no
        bead are left out."""
        self._ensure_fresh()
        return self.index.get_many(bead_ids)

    def list(
        self,
        *,
        type: str | None = None,
        status: str | None = None,
        assignee: str | None = None,
        sender: str | None = None,
        label: str | None = None,
        thread: str | None = None,
        parent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        meta: dict[str, Any] | None = None,
        order: str = "created",
        descending: bool = False,
        limit: int | None = None,
    ) -> list[Bead]:
        """Beads matching every given filter (None = any), from the index.

        `meta` matches scalar meta values exactly (`{"read": False}`); `since`/`until` bound
        `created_at`; `order` is created, updated or priority (then age).
        """
        query = self._query(
            type=type,
            status=status,
            assignee=assignee,
            sender=sender,
            label=label,
            thread=thread,
            parent=parent,
            since=since,
            until=until,
            meta=meta,
        )
        if order not in ("created", "updated", "priority"):
            raise InvalidInput(f"order must be created, updated or priority, not {order!r}")
        # (`type` is a parameter here: isinstance, and bool is no count)
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**63
        ):
            raise InvalidInput("limit must be an integer from 0 to 2**63-1")
        return self.index.query(query._replace(order=order, descending=descending, limit=limit))

    def count(self, **filters: Any) -> int:
        """How many beads match; takes the filters of `list`."""
        return self.index.count_matching(self._query(**filters))

    def known_agents(self) -> list[str]:
        """Agents listed in config.yaml or named in any bead, sorted."""
        self._ensure_fresh()
        return sorted(set(self.config.get("agents") or {}) | set(self.index.agents()))

    def _query(
        self,
        *,
        type: str | None = None,
        status: str | None = None,
        assignee: str | None = None,
        sender: str | None = None,
        label: str | None = None,
        thread: str | None = None,
        parent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Query:
        if status not in (None, "open", "closed"):
            raise InvalidInput(f"status must be open or closed, not {status!r}")
        for what, name in (("assignee", assignee), ("from", sender)):
            if name is not None:
                check_agent(name, what=what)
        if label is not None:
            check_label(label)
        for key, value in (meta or {}).items():
            check_meta_key(key)
            if isinstance(value, list | dict):
                raise InvalidInput(f"meta filter {key!r} must be a scalar")
        self._ensure_fresh()
        return Query(
            type=type,
            status=status,
            assignee=assignee,
            sender=sender,
            label=label,
            thread=self._resolve_filter(thread),
            parent=self._resolve_filter(parent),
            since=since,
            until=until,
            meta=meta,
        )

    def _resolve_filter(self, ref: str | None) -> str | None:
        # A whole id filters as given (a thread may be gone or elsewhere); a prefix resolves.
        if ref is None or ID_RE.fullmatch(ref):
            return ref
        return self._resolve(ref)

    def log(
        self, ref: str | None = None, limit: int | None = None, grep: str | None = None
    ) -> list[LogEntry]:
        """Commits, newest first; with `ref`, only those that changed that bead; with `grep`,
        only those whose message starts with it (`mail ` for the mail history)."""
        path = None
        if ref is not None:
            self._ensure_fresh()
            location = self.index.location(self._resolve(ref))
            assert location is not None
            path = location[0]
        require_head(self.root)  # a lost branch is an error, never an empty history
        return self.git.log(path, limit, grep)

    # -- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self, message: str | None = None) -> Iterator[Batch]:
        """Group mutations into one commit: `with store.batch() as b: b.create(...)`.

        The write lock is held for the whole block; nothing is written if it raises.
        """
        with self.locked():
            self.sync()
            batch = Batch(self, message)
            yield batch
            batch.commit_id = batch.commit()

    def set_setting(self, key: str, value: Any) -> dict[str, Any]:
        """Set one dotted key of `config.yaml` (`agents.mayor.nudge`) in one commit, checked
        as `beads.config.with_setting` says; `beads.config.UNSET` removes the key."""
        from beads.config import UNSET, with_setting

        with self.batch(f"config: {'unset' if value is UNSET else 'set'} {key}") as batch:
            # From what git holds, never from the index's copy (derived data).
            raw = self.git.read_path(batch.base, CONFIG_PATH) if batch.base else None
            held = self._parse_config(raw)[0] if raw is not None else None
            return batch.set_config(with_setting(held if held is not None else self.config,
                                                 key, value))  # fmt: skip

    def create(self, type: str, title: str, body: str = "", **fields: Any) -> Bead:
        """Create one bead (one commit). See `Batch.create` for the fields."""
        with self.batch() as batch:
            return batch.create(type, title, body, **fields)

    def update(self, ref: str, **changes: Any) -> Bead:
        """Change fields, labels or meta of one bead (one commit). See `Batch.update`."""
        with self.batch() as batch:
            return batch.update(ref, **changes)

    def close_bead(self, ref: str, reason: str | None = None, *, force: bool = False) -> Bead:
        """Close one bead with an optional reason (one commit)."""
        with self.batch() as batch:
            return batch.close(ref, reason, force=force)

    def reopen(self, ref: str) -> Bead:
        """Reopen a closed bead (one commit)."""
        with self.batch() as batch:
            return batch.reopen(ref)

    # -- consistency ------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's write lock (re-entrant within this Store)."""
        mode = files.modes(str(self.root))[1]
        if mode != self._lock_mode and not self._lock.is_locked:
            # filelock chmods the lock file to its mode at every acquire: follow the store's
            # modes when they change (`store.shared`), or the lock file would leave them.
            self._lock_mode = mode
            self._lock = filelock.FileLock(self._lock.lock_file, mode=mode)
        try:
            self._lock.acquire(timeout=LOCK_TIMEOUT, poll_interval=LOCK_POLL)
        except filelock.Timeout:
            raise Conflict(
                f"the store is locked by another writer (waited {LOCK_TIMEOUT:.0f}s): "
                f"{self._lock.lock_file}"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def sync(self, *, rebuild_index: bool = False) -> None:
        """Bring the index and the view up to HEAD (call with the lock held).

        A lost or garbled branch ref is a StorageError naming `gc doctor`: the index and the
        view are never reset to match it, and no write starts a new history."""
        head = require_head(self.root)
        index_head = None if rebuild_index else self.index.head()
        if index_head != head:
            known = index_head is not None and self.git.has_object(index_head)
            self._index_from(index_head if known else None, head)
            fault("caught-up-index")
        view_head = self.view.applied()
        if view_head != head:
            if view_head is not None and self.git.has_object(view_head):
                self._view_from(view_head, head)
            else:
                self._rebuild_view(head)

    def _rebuild_index(self) -> None:
        # The index found its file damaged mid-query: a new file, filled from git.
        with self.locked():
            self.index.drop_file()
            self.sync()

    def _ensure_fresh(self) -> None:
        head = branch_head(self.root)
        if head is None or self.index.head() != head:
            with self.locked():
                self.sync()

    def _resolve(self, ref: str, pending: dict[str, Bead] | None = None) -> str:
        text = check_id_prefix(ref)
        if pending and text in pending:
            return text
        matches = self.index.match_prefix(text)
        if not matches and "-" not in text:
            text = f"{self.prefix}-{text}"
            matches = self.index.match_prefix(text)
        if text in matches:
            return text
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise NotFound(f"no bead {ref}")
        shown = ", ".join(matches[:10])
        raise InvalidInput(f"id prefix {ref!r} is ambiguous: {shown}", candidates=matches[:10])

    def _index_from(self, old: bytes | None, new: bytes) -> None:
        """Index the files that changed from `old` to `new` (everything when `old` is None)."""
        from beads.codec import load_bead  # lazy, like every YAML use: reads never parse YAML

        upserts: list[tuple[Bead, str, str]] = []
        deleted: list[str] = []
        invalid: dict[str, str | None] = {}
        types: set[str] = set()  # of every bead file changed, as its path says
        config = None
        if old is None:
            changed = ((path, None, sha) for path, sha in self.git.files(new))
        else:
            changed = ((c.path, c.old_sha, c.new_sha) for c in self.git.changes(old, new))
        for path, old_sha, new_sha in changed:
            if path == CONFIG_PATH:
                if new_sha is not None:
                    config, invalid[path] = self._parse_config(self.git.read(new_sha))
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
                bead = load_bead(self.git.read(new_sha), what=path, max_body=1 << 62)
                if (bead.type, bead.id) != located:
                    raise InvalidInput(
                        f"{path} holds {bead.type} {bead.id}, not what its path says"
                    )
            except InvalidInput as exc:
                invalid[path] = exc.message
                continue
            invalid[path] = None
            upserts.append((bead, path, new_sha.decode()))
        self.index.apply(
            head=new,
            upserts=upserts,
            deleted_paths=deleted,
            invalid=invalid,
            config=config,
            reset=old is None,
            link=None if old is None else (old, types),
        )

    @staticmethod
    def _parse_config(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
        from beads.codec import load_data

        try:
            data = load_data(raw, what=CONFIG_PATH)
            if (
                isinstance(data, dict)
                and type(data.get("format")) is int
                and data["format"] > FORMAT
            ):
                check_config(data)  # raises: a newer store is refused, never half-read
            return check_config(data), None
        except InvalidInput as exc:
            if "newer" in exc.message:
                raise
            return None, exc.message

    def _view_from(self, old: bytes, new: bytes) -> None:
        for change in self.git.changes(old, new):
            if change.new_sha is None:
                self.view.remove(change.path)
            else:
                self.view.write(change.path, self.git.read(change.new_sha))
            fault("mid-view-catch-up")
        self.view.mark_applied(new)

    def _rebuild_view(self, head: bytes) -> None:
        wanted = dict(self.git.files(head))
        for path in self.view.files():
            if path not in wanted:
                self.view.remove(path)
        for path, sha in wanted.items():
            current = self.view.read(path)
            if current is None or git_blob_sha(current) != sha:
                self.view.write(path, self.git.read(sha))
        self.view.mark_applied(head)


_UNSET: Any = object()


class Batch:
    """Mutations that become one commit when the `Store.batch()` block ends."""

    def __init__(self, store: Store, message: str | None) -> None:
        self.store = store
        self.message = message
        # The commit every read of this batch saw; the ref must still be here at commit time.
        self.base = store.git.head()
        self.commit_id: bytes | None = None  # the commit made, once `Store.batch` ends
        self.changed: dict[str, Bead] = {}
        self._reserved: set[str] = set()
        self.config: dict[str, Any] | None = None
        self.lines: list[str] = []
        # Beads read (`get`, `prefetch`) as git holds them at `base` (the lock is held, so
        # they cannot change until this batch commits), and the trees read to prove them.
        self._read: dict[str, Bead] = {}
        written = store._written
        self._root_tree = written[1] if written is not None and written[0] == self.base else None
        self._leaves: dict[bytes, Tree] = {}  # the shard trees holding bead files

    def get(self, ref: str) -> Bead:
        """The bead as this batch would leave it (as git holds it, for one not changed yet)."""
        bead = self.changed.get(ref) or self._read.get(ref)  # whole ids, already checked
        if bead is not None:
            return bead
        try:
            bead_id = self.store._resolve(ref, self.changed)
        except NotFound:
            # A whole id the index lacks may still be in git.
            bead_id = check_id_prefix(ref)
            if not ID_RE.fullmatch(bead_id):
                raise
        bead = self.changed.get(bead_id) or self._from_git([bead_id]).get(bead_id)
        if bead is None:
            raise NotFound(f"no bead {ref}")
        return bead

    def prefetch(self, bead_ids: Iterable[str]) -> None:
        """Read these beads (whole ids) at once, for the `get`s that follow.

        The beads read are shared by those `get`s (Batch never changes a bead in place;
        callers must not either). A batch over thousands of beads saves two queries each.
        """
        self._from_git(bead_ids)

    def _from_git(self, bead_ids: Iterable[str]) -> dict[str, Bead]:
        """The beads with these whole ids as git holds them at `base`; absent ones left out.

        A write never starts from derived data: each index row is used only when its canonical
        file hashes to the blob on its path in `base`'s tree (a few tree reads, shared by the
        batch), else the bead is read from its blob and the row repaired.
        """
        from beads.codec import dump_bead

        ids = list(dict.fromkeys(bead_ids))
        wanted = [i for i in ids if i not in self._read]
        rows = self.store.index.get_many(wanted)
        wrong = []
        for bead_id in wanted:
            bead = rows.get(bead_id)
            path = bead_path(bead.type, bead_id) if bead is not None else None
            if path is not None and self._blob_at(path) == git_blob_sha(dump_bead(bead)):
                self._read[bead_id] = bead
            else:
                wrong.append(bead_id)
        if wrong:
            self._read_blobs(wrong, rows)
        return {i: self._read[i] for i in ids if i in self._read}

    def _read_blobs(self, bead_ids: list[str], rows: dict[str, Bead]) -> None:
        """Read these beads from git (their rows did not match it) and repair their rows."""
        from beads.codec import load_bead

        upserts: list[tuple[Bead, str, str]] = []
        invalid: dict[str, str | None] = {}
        for bead_id in bead_ids:
            row = rows.get(bead_id)
            found = self._find(bead_id, row.type if row is not None else None)
            if found is None:
                continue
            path, sha = found
            try:
                bead = load_bead(self.store.git.read(sha), what=path, max_body=1 << 62)
            except InvalidInput as exc:
                invalid[path] = exc.message  # not a bead: as the index records such files
                continue
            if (bead.type, bead.id) != parse_bead_path(path):
                invalid[path] = f"{path} holds {bead.type} {bead.id}, not what its path says"
                continue
            self._read[bead_id] = bead
            upserts.append((bead, path, sha.decode()))
        gone = [i for i in bead_ids if i in rows and i not in self._read]
        if upserts or gone or invalid:
            assert self.base is not None
            self.store.index.apply(
                head=self.base, upserts=upserts, deleted_ids=gone, invalid=invalid
            )

    def _find(self, bead_id: str, hint: str | None) -> tuple[str, bytes] | None:
        """`(path, blob id)` of the bead's file in `base`, looked for under every type (the
        `hint` type first)."""
        root = self._tree(self._root(), 0)
        types = [hint] if hint is not None else []
        if root is not None:
            for name, mode, _sha in root.iteritems():
                if stat.S_ISDIR(mode) and name.endswith(b"s"):
                    types.append(name[:-1].decode("utf-8", "replace"))
        for bead_type in dict.fromkeys(types):
            path = bead_path(bead_type, bead_id)
            sha = self._blob_at(path)
            if sha is not None:
                return path, sha
        return None

    def _blob_at(self, path: str) -> bytes | None:
        """The blob id of the file `path` in `base`'s tree, or None."""
        sha, mode = self._root(), stat.S_IFDIR
        for depth, name in enumerate(path.encode().split(b"/")):
            tree = self._tree(sha, depth) if stat.S_ISDIR(mode) else None
            if tree is None or name not in tree:
                return None
            mode, sha = tree[name]
        return None if stat.S_ISDIR(mode) else sha

    def _root(self) -> bytes:
        if self._root_tree is None:
            self._root_tree = self.store.git.tree_of(self.base)
            assert self._root_tree is not None  # a store always has its first commit
        return self._root_tree

    def _tree(self, sha: bytes, depth: int) -> Tree | None:
        """The tree `sha` at `depth` (0 = root) of a path, or None if it is not a tree; read
        once per batch, and the upper levels (root, type, first shard) once per Store."""
        from dulwich.objects import Tree  # lazy, as everywhere: reads never load dulwich

        cache = self.store._trees if depth < 3 else self._leaves
        tree = cache.get(sha)
        if tree is None:
            found = self.store.git.objects[sha]
            if not isinstance(found, Tree):
                return None
            tree = _remember(cache, sha, found)
        return tree

    def create(
        self,
        type: str,
        title: str,
        body: str = "",
        *,
        assignee: str | None = None,
        cc: list[str] | tuple[str, ...] = (),
        labels: list[str] | tuple[str, ...] = (),
        priority: int = 2,
        parent: str | None = None,
        thread: str | None = None,
        reply_to: str | None = None,
        meta: dict[str, Any] | None = None,
        sender: str | None = None,
        bead_id: str | None = None,
    ) -> Bead:
        """Add a new open bead; `sender` (the `from` field) defaults to the acting agent.

        `bead_id` is one reserved with `new_id()` (to point `thread` at the bead itself).
        """
        bead_id = bead_id or self.new_id()
        stamp = now_stamp()
        bead = Bead(
            id=bead_id,
            type=type,
            title=title,
            body=body,
            from_=sender or self.store.agent,
            assignee=assignee,
            cc=list(cc),
            labels=list(labels),
            priority=priority,
            parent=self.get(parent).id if parent is not None else None,
            thread=thread,
            reply_to=reply_to,
            meta=dict(meta or {}),
            created_at=stamp,
            updated_at=stamp,
        )
        self._put(bead, f'bead create {bead_id}: {type} "{_short(title)}"')
        return bead

    def insert(self, bead: Bead) -> Bead:
        """Add a whole record with its own id and times (imports, the example store)."""
        check_id(bead.id)
        # Git decides, not the index: a row the index lost must not let an import replace it.
        if bead.id in self.changed or self._find(bead.id, bead.type) is not None:
            raise InvalidInput(f"bead {bead.id} already exists")
        self._put(bead, f'bead import {bead.id}: {bead.type} "{_short(bead.title)}"')
        return bead

    def update(
        self,
        ref: str,
        *,
        add_labels: list[str] | tuple[str, ...] = (),
        remove_labels: list[str] | tuple[str, ...] = (),
        meta: dict[str, Any] | None = None,
        unset_meta: list[str] | tuple[str, ...] = (),
        **fields: Any,
    ) -> Bead:
        """Change fields (title, body, assignee, cc, labels, priority, thread, reply_to, parent),
        add or remove labels, set meta keys (`meta`) or remove them (`unset_meta`)."""
        unknown = set(fields) - set(UPDATABLE)
        if unknown:
            raise InvalidInput(f"cannot update field(s) {', '.join(sorted(unknown))}")
        bead = self.get(ref)
        changes = dict(fields)
        if changes.get("parent") is not None:
            changes["parent"] = self.get(changes["parent"]).id
            if changes["parent"] == bead.id:
                raise InvalidInput("a bead cannot be its own parent")
        for key in ("cc", "labels"):
            if key in changes:
                changes[key] = list(changes[key] or [])
        labels = list(changes.get("labels", bead.labels))
        labels += [label for label in add_labels if label not in labels]
        labels = [label for label in labels if label not in set(remove_labels)]
        changes["labels"] = labels
        new_meta = dict(bead.meta)
        new_meta.update(meta or {})
        for key in unset_meta:
            new_meta.pop(check_meta_key(key), None)
        changes["meta"] = new_meta
        changed = sorted(k for k, v in changes.items() if getattr(bead, k) != v)
        if not changed:
            return bead
        updated = bead.with_changes(**changes, updated_at=now_stamp())
        self._put(updated, f"bead update {bead.id}: {', '.join(changed)}")
        return updated

    def close(
        self,
        ref: str,
        reason: str | None = None,
        *,
        force: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> Bead:
        """Close a bead; a `guarded` bead needs `force` (its owner's command passes it).

        `meta` sets meta keys in the same change (what `update(meta=...)` then `close` would
        leave, validated once: a gate records its resolution as it closes)."""
        bead = self.get(ref)
        if bead.status == "closed":
            raise InvalidInput(f"{bead.id} is already closed")
        if bead.meta.get("guarded") is True and not force:
            raise InvalidInput(
                f"{bead.id} is guarded: close it with its owner's command, or pass --force"
            )
        stamp = now_stamp()
        closed = bead.with_changes(
            status="closed",
            closed_at=stamp,
            updated_at=stamp,
            close_reason=reason or None,
            meta={**bead.meta, **meta} if meta else bead.meta,
        )
        suffix = f": {_short(reason)}" if reason else ""
        self._put(closed, f"bead close {bead.id}{suffix}")
        return closed

    def reopen(self, ref: str) -> Bead:
        """Reopen a closed bead."""
        bead = self.get(ref)
        if bead.status == "open":
            raise InvalidInput(f"{bead.id} is not closed")
        opened = bead.with_changes(
            status="open", closed_at=None, close_reason=None, updated_at=now_stamp()
        )
        self._put(opened, f"bead reopen {bead.id}")
        return opened

    def set_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Replace `config.yaml` (validated) in this commit."""
        self.config = check_config(config)
        self.lines.append("config: update config.yaml")
        return self.config

    def commit(self) -> bytes | None:
        """Write the batch as one commit; returns its id (None when there was nothing to do)."""
        if not self.changed and self.config is None:
            return None
        from dulwich.objects import Tree

        from beads.codec import dump_bead, dump_data  # lazy: reads never load the YAML emitter
        from beads.gitrepo import PACK_OBJECTS_AT

        store = self.store
        files: dict[str, bytes | None] = {}
        placed: list[tuple[Bead, str]] = []
        for bead in self.changed.values():
            path = bead_path(bead.type, bead.id)
            files[path] = dump_bead(bead)
            placed.append((bead, path))
        if self.config is not None:
            files[CONFIG_PATH] = dump_data(self.config)
        parent = self.base
        commit, objects = store.git.build_commit(parent, files, self._message(), store.agent)
        fault("before-objects")
        store.git.store_objects(objects)
        fault("after-objects")
        reflog = "commit: " + commit.message.decode("utf-8", "replace")
        try:
            store.git.swap_head(parent, commit.id, reflog, store.agent)
        except GcError:
            store.git.discard_commit(commit.id)
            raise
        fault("after-ref")
        store._written = (commit.id, commit.tree)
        if len(objects) < PACK_OBJECTS_AT:  # a small commit's trees: the next batch reads them
            for obj in objects:
                if isinstance(obj, Tree):
                    _remember(store._trees, obj.id, obj)
        # The commit is in: the command has succeeded. What follows only brings derived data
        # up to it, and whatever fails here (a full disk, an index that cannot be written)
        # leaves the view or the index behind HEAD, where the next open catches them up.
        view_written = True
        try:
            for number, (path, content) in enumerate(files.items()):
                assert content is not None
                store.view.write(path, content)
                if number == 0:
                    fault("mid-view")
        except OSError:
            view_written = False
        fault("after-view")
        loose = 0 if len(objects) >= PACK_OBJECTS_AT else len(objects)
        upserts = [(bead, path, git_blob_sha(files[path] or b"").decode()) for bead, path in placed]
        try:
            loose += store.index.loose_objects()
            store.index.apply(
                head=commit.id,
                upserts=upserts,
                config=self.config,
                loose_objects=loose,
                link=None if parent is None else (parent, {bead.type for bead, _ in placed}),
            )
        except _DERIVED_FAULTS:
            loose = 0  # packing waits for a writer that can count
        fault("after-index")
        with contextlib.suppress(*_DERIVED_FAULTS):
            if view_written:
                store.view.mark_applied(commit.id)
            if loose >= PACK_LOOSE_AT:
                store.git.pack_loose_objects()
                store.index.apply(head=commit.id, loose_objects=0)
        return commit.id

    def new_id(self) -> str:
        """A fresh id, unused in the store and in this batch."""
        # 40 random bits: a collision is rare, but checked here, under the write lock.
        while True:
            bead_id = new_id(self.store.prefix)
            if bead_id not in self.changed and bead_id not in self._reserved:
                if self.store.index.get(bead_id) is None:
                    self._reserved.add(bead_id)
                    return bead_id

    def _put(self, bead: Bead, line: str) -> None:
        bead.validate(max_body=self.store.max_body)
        self.changed[bead.id] = bead
        self.lines.append(line)

    def _message(self) -> str:
        if self.message:
            return self.message
        if len(self.lines) == 1:
            return self.lines[0]
        shown = self.lines[:50]
        more = [f"... and {len(self.lines) - 50} more"] if len(self.lines) > 50 else []
        return "\n".join([f"batch: {len(self.lines)} changes", "", *shown, *more])


# Trees kept per Store: the upper levels of a store of any size (1 + types x 257) fit.
TREE_CACHE = 2048


def _remember(cache: dict[bytes, Tree], sha: bytes, tree: Tree) -> Tree:
    if len(cache) >= TREE_CACHE:
        cache.clear()  # old versions of trees: rarely read again
    cache[sha] = tree
    return tree


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _exclude(root: Path) -> None:
    try:
        exclude_from_project(root)
    except OSError:
        pass  # best effort: the store works without it


def remove_dead_builds(root: Path) -> list[Path]:
    """Remove repositories that a killed `gc init` left half built under `root` (their
    builder's process is gone); returns them. A live builder's is never touched."""
    removed = []
    for path in root.glob(f"{INIT_PREFIX}*"):
        pid = path.name[len(INIT_PREFIX) :]
        if pid.isdigit() and _alive(int(pid)):
            continue
        _remove_tree(path)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


def _remove_tree(path: Path) -> None:
    import shutil  # only `init` needs it, and it pulls in bz2 and lzma: lazy for start-up

    shutil.rmtree(path, ignore_errors=True)
