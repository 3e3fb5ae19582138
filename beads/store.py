"""The bead store: open, read through the index, write through the one commit path.

Every mutation, single or batched, goes through `Batch.commit`: under the write lock, bring
the index and view up to HEAD, build the commit from objects, store them, compare-and-swap the
branch, then write the view files and the index. Git is the source of truth: a crash at any
point leaves the branch either before or after the commit, and the next open brings the view
and the index forward from the tree diff.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beads import files
from beads.batch import Batch
from beads.branch import branch_head, require_head
from beads.errors import Conflict, InvalidInput, NotFound, StorageError
from beads.faults import fault
from beads.git.objects import DamagedObject
from beads.index.index import Index
from beads.index.query import Query
from beads.location import find_store
from beads.records.ids import ID_RE, check_id_prefix
from beads.records.record import Bead, acting_agent
from beads.settings.config import (
    CONFIG_PATH,
    FORMAT,
    check_config,
    default_config,
    parse_config,
    view_policy,
)
from beads.sync.auto import after_write
from beads.view.view import View
from beads.writelock import WriteLock

if TYPE_CHECKING:
    from beads.git import GitRepo, LogEntry

LOCK_TIMEOUT = 30.0
# A long poll (filelock's default is a twentieth of a second) would stall bursts of writers;
# a short poll keeps them moving.
LOCK_POLL = 0.002


class Store:
    """An open store. Use `Store.open()` to find one, `Store.init()` to make one."""

    def __init__(self, root: Path, *, agent: str | None = None) -> None:
        self.root = root
        self.runtime = root / ".runtime"
        # Nothing under .runtime is opened through a link (sqlite opens by name).
        lock_path = str(self.runtime / "locks" / "write.lock")
        files.create(str(root), lock_path)
        files.prepare_db(str(root), str(self.runtime / "index.sqlite3"))
        self.agent = acting_agent(agent)
        self._git: GitRepo | None = None
        # Trees its batches read or wrote, by id (so never stale), shared by the batches that
        # prove index rows against git: the upper levels, which most writes read again. The
        # last commit made here and its root tree spare reading the commit back.
        self._written: tuple[bytes, bytes] | None = None
        self.index = Index(self.runtime / "index.sqlite3", recover=self._rebuild_index)
        self.view = View(root, self.runtime)
        self._lock_path = lock_path
        self._lock = WriteLock(str(root), lock_path)
        self._committed: tuple[bytes | None, dict[str, Any]] | None = None
        self._config: tuple[bytes | None, Any, dict[str, Any]] | None = None
        head = branch_head(root)
        self.view.configure(*view_policy(self.config))
        # A lost branch, or one naming no commit, is refused by the first read or write
        # (`sync`), not here, so that `gc doctor` can open the store to restore it.
        if head is not None and (self.index.head() != head or self.view.applied() != head):
            try:
                with self.locked():
                    self.refresh()
            except StorageError as exc:
                # A lost branch or a damaged object: opened all the same, for `gc doctor`.
                if self.git.commit_of(head) is not None and not isinstance(exc, DamagedObject):
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
        from beads.initstore import create_store  # lazy: opening a store never makes one

        root, created = create_store(path, prefix=prefix, agent=agent, config=config)
        if created:  # the settings it was made with are this machine's own: the first run
            from beads.settings.trust import first_run

            first_run(root, check_config(config if config is not None else default_config()))
        return cls(root, agent=agent), created

    def close(self) -> None:
        self.index.close()
        if self._git is not None:
            self._git.close()

    @property
    def git(self) -> GitRepo:
        """The git repository, opened on first use: reads that a fresh index serves never
        load dulwich (the branch head comes from the ref file)."""
        if self._git is None:
            from beads.git import GitRepo
            from beads.settings.localconfig import committer

            stale = self.config["store"]["stale_lock_seconds"]
            self._git = GitRepo(self.root / ".git", stale_lock_seconds=stale, committer=committer)
        return self._git

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def config(self) -> dict[str, Any]:
        """The settings in force on this machine: `config.yaml` at the index's commit, with
        the guarded settings this machine has not approved kept at their approved values
        (`beads.settings.trust.in_force`; re-read when the commit or the approvals move)."""
        from beads.settings import approvals
        from beads.settings.trust import in_force

        head = self.index.head()
        stamp = approvals.stamp(self.root)
        if self._config is None or self._config[:2] != (head, stamp):
            settings = in_force(self.root, self.committed_config)
            self._config = (head, approvals.stamp(self.root), settings)
        return self._config[2]

    @property
    def committed_config(self) -> dict[str, Any]:
        """The settings of `config.yaml` at the index's commit, as committed (whoever can push
        to a remote wrote them: read them through `config`)."""
        head = self.index.head()
        if self._committed is None or self._committed[0] != head:
            self._committed = (head, check_config(self.index.config() or {"format": FORMAT}))
        return self._committed[1]

    @property
    def prefix(self) -> str:
        return self.config["store"]["prefix"]

    @property
    def max_body(self) -> int:
        return self.config["store"]["max_body_bytes"]

    # -- reading ----------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The full id for an id or an unambiguous prefix of one."""
        self._refresh_if_moved()
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
        self._refresh_if_moved()
        return self.index.get_many(bead_ids)

    def list(self, **filters: Any) -> list[Bead]:
        """Beads matching every given filter (None = any), from the index, in order.

        Takes the fields of a `beads.index.query.Query` (type, status, assignee, sender, label,
        thread, parent, since, until, meta, order, descending, limit), which checks them:
        `store.list(assignee="dog", meta={"read": False}, order="priority")`.
        """
        return self.index.query(self._resolved(Query(**filters)))

    def count(self, **filters: Any) -> int:
        """How many beads match; takes the filters of `list` (order and limit do nothing)."""
        return self.index.count_matching(self._resolved(Query(**filters)))

    def known_agents(self) -> list[str]:
        """Agents listed in config.yaml or named in any bead, sorted."""
        self._refresh_if_moved()
        return sorted(set(self.config.get("agents") or {}) | set(self.index.agents()))

    def _resolved(self, query: Query) -> Query:
        """`query` against a fresh index, its thread and parent id prefixes made whole ids
        (a whole id filters as given: a thread may be gone or elsewhere)."""
        self._refresh_if_moved()
        refs = {}
        for field in ("thread", "parent"):
            ref = getattr(query, field)
            if ref is not None and not ID_RE.fullmatch(ref):
                refs[field] = self._resolve(ref)
        return query.replace(**refs) if refs else query

    def log(
        self,
        ref: str | None = None,
        limit: int | None = None,
        grep: str | None = None,
        start: bytes | None = None,
    ) -> list[LogEntry]:
        """Commits, newest first; with `ref`, only those that changed that bead; with `grep`,
        only those whose message starts with it (`mail ` for the mail history); from commit
        `start` instead of the branch's head (a page after the first)."""
        path = None
        if ref is not None:
            self._refresh_if_moved()
            location = self.index.location(self._resolve(ref))
            assert location is not None
            path = location[0]
        require_head(self.root)  # a lost branch is an error, never an empty history
        return self.git.log(path, limit, grep, start)

    # -- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self, message: str | None = None) -> Iterator[Batch]:
        """Group mutations into one commit: `with store.batch() as b: b.create(...)`.

        The write lock is held for the whole block; nothing is written if it raises.
        """
        with self.locked():
            self.refresh()
            before = self.committed_config
            batch = Batch(self, message)
            yield batch
            batch.commit_id = batch.commit()
        if batch.commit_id is not None:
            if batch.config is not None:  # config.yaml written here: a person's change is
                from beads.settings.trust import approve_written  # approved, an agent's waits

                approve_written(self.root, before, batch.config)
            after_write(self.root)  # `sync.auto`: push in the background

    def set_setting(self, key: str, value: Any) -> dict[str, Any]:
        """Set one dotted key of `config.yaml` (`agents.mayor.nudge`) in one commit, checked
        as `beads.settings.config.with_setting` says; `beads.settings.config.UNSET` removes the
        key."""
        from beads.settings.config import UNSET, with_setting

        with self.batch(f"config: {'unset' if value is UNSET else 'set'} {key}") as batch:
            # From what git holds, never from the index's copy (derived data).
            raw = self.git.read_path(batch.base, CONFIG_PATH) if batch.base else None
            held = parse_config(raw)[0] if raw is not None else None
            changed = batch.set_config(with_setting(
                held if held is not None else self.committed_config, key, value))  # fmt: skip
        from beads.settings.trust import approve_setting

        approve_setting(self.root, key, changed)  # a person's change; an agent's waits
        return changed

    def unparsable(self, bead_id: str) -> tuple[str, bytes] | None:
        """The path and bytes of HEAD's file for bead `bead_id` (a whole id) when it does not
        parse (it arrived by a sync or a plain git push; `gc doctor` reports it); else None."""
        from beads.records.ids import parse_bead_path

        self._refresh_if_moved()
        head = require_head(self.root)
        for path in self.index.invalid():
            located = parse_bead_path(path)
            if located is not None and located[1] == bead_id:
                data = self.git.read_path(head, path)
                if data is not None:
                    return path, data
        return None

    def mend(self, bead: Bead) -> Bead:
        """Write `bead` whole over its file that does not parse (one commit). See
        `Batch.mend`."""
        with self.batch() as batch:
            return batch.mend(bead)

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
            return batch.close_bead(ref, reason, force=force)

    def reopen(self, ref: str) -> Bead:
        """Reopen a closed bead (one commit)."""
        with self.batch() as batch:
            return batch.reopen(ref)

    # -- consistency ------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's write lock (re-entrant within this Store)."""
        # The lock file is opened with the store's mode at every first acquire, so it follows
        # `store.shared` when that changes.
        lock = self._lock
        if not lock.acquire(timeout=LOCK_TIMEOUT, poll=LOCK_POLL):
            raise Conflict(
                f"the store is locked by another writer (waited {LOCK_TIMEOUT:.0f}s): "
                f"{self._lock_path}"
            )
        try:
            # What the write checks (directories, modes) is trusted to its end, not after:
            # a store held open for hours looks again at its next write (beads/files.py).
            with files.checking():
                yield
        finally:
            lock.release()

    def refresh(self, *, rebuild_index: bool = False) -> None:
        """Bring the index and the view up to HEAD (call with the lock held).

        A lost or garbled branch ref is a StorageError naming `gc doctor`: the index and the
        view are never reset to match it, and no write starts a new history."""
        head = require_head(self.root)
        index_head = None if rebuild_index else self.index.head()
        if index_head != head:
            from beads.refresh import refresh_index  # only when git moved past the index

            known = index_head is not None and self.git.has_object(index_head)
            refresh_index(self.git, self.index, index_head if known else None, head)
            fault("refreshed-index")
        self.view.configure(*view_policy(self.config))  # a changed store.view: rebuilt below
        view_head = self.view.applied()
        if view_head != head:
            from beads.refresh import rebuild_view, refresh_view  # likewise, for the view

            if view_head is not None and self.git.has_object(view_head):
                refresh_view(self.git, self.view, view_head, head)
            else:
                rebuild_view(self.git, self.view, head)

    def rebuild_index(self) -> None:
        """Rebuild the index from HEAD's files into a new file, copied into the index's own
        once it is whole (`Index.replace_with`; call with the lock held): a rebuild git cannot
        finish (a damaged object) leaves the index as it was, so reads go on."""
        from beads.index.index import remove_files
        from beads.refresh import rebuild_index

        head = require_head(self.root)
        aside = self.runtime / "index.sqlite3.new"
        remove_files(aside)  # a killed rebuild's
        files.prepare_db(str(self.root), str(aside))
        self.index.replace_with(aside, lambda fresh: rebuild_index(self.git, fresh, head))

    def sync(self, *, rebuild_index: bool = False) -> None:
        """Deprecated name of `refresh` (kept for one release): "sync" is the exchange with
        a remote (`beads.sync`)."""
        import warnings  # lazy: only the old name needs it

        warnings.warn(
            "Store.sync is deprecated: use Store.refresh", DeprecationWarning, stacklevel=2
        )
        self.refresh(rebuild_index=rebuild_index)

    def _rebuild_index(self) -> None:
        # The index found its file damaged mid-query: a new file, filled from git.
        with self.locked():
            self.index.drop_file()
            self.refresh()

    def _refresh_if_moved(self) -> None:
        head = branch_head(self.root)
        if head is None or self.index.head() != head:
            with self.locked():
                self.refresh()

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
