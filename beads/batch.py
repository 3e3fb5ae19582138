"""`Batch`: the mutations of one commit, and the one commit path every write goes through.

`Batch.commit`, run by `Store.batch` under the write lock once the index and view are up to
HEAD: build the commit from objects, store them, compare-and-swap the branch, then write the
view files and the index. A write never starts from derived data: each bead it reads is
proven against the blob git holds at the batch's base commit.
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.faults import fault
from beads.records.ids import ID_RE, bead_path, check_id, check_id_prefix, new_id, parse_bead_path
from beads.records.record import Bead, check_meta_key, shorten
from beads.records.times import now_stamp
from beads.settings.config import CONFIG_PATH, check_config
from beads.view.view import git_blob_sha

if TYPE_CHECKING:
    from typing import Protocol

    from beads.git import GitRepo
    from beads.index.index import Index
    from beads.view.view import View

    class Store(Protocol):
        """What a batch needs of its store (`beads.store.Store`, which makes the batch: so
        this module never imports it)."""

        agent: str
        git: GitRepo
        index: Index
        view: View
        _written: tuple[bytes, bytes] | None

        @property
        def prefix(self) -> str:
            """The store's id prefix."""

        @property
        def max_body(self) -> int:
            """The largest body a bead may have, in bytes."""

        def _resolve(self, ref: str, pending: dict[str, Bead] | None = None) -> str:
            """The full id `ref` (a full id or a unique prefix) names."""


# Past this many loose objects a writer has them packed (by the background repack).
PACK_LOOSE_AT = 1500
# What writing derived data (view files, the index) may raise once a commit is in.
_DERIVED_FAULTS = (OSError, sqlite3.Error, StorageError)
# The fields `update` may change (the rest are the bead's identity, times and status).
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
        from beads.records.codec import dump_bead

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
        from beads.records.codec import load_bead

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
        root = self.store.git.trees.get(self._root())
        types = [hint] if hint is not None else []
        if root is not None:
            for name, (mode, _sha) in root.entries.items():
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
        for name in path.encode().split(b"/"):
            tree = self.store.git.trees.get(sha) if stat.S_ISDIR(mode) else None
            entry = None if tree is None else tree.entries.get(name)
            if entry is None:
                return None
            mode, sha = entry
        return None if stat.S_ISDIR(mode) else sha

    def _root(self) -> bytes:
        if self._root_tree is None:
            self._root_tree = self.store.git.tree_of(self.base)
            assert self._root_tree is not None  # a store always has its first commit
        return self._root_tree

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
            sender=sender or self.store.agent,
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
        self._put(bead, f'bead create {bead_id}: {type} "{shorten(title)}"')
        return bead

    def insert(self, bead: Bead) -> Bead:
        """Add a whole record with its own id and times (imports, the example store)."""
        check_id(bead.id)
        # Git decides, not the index: a row the index lost must not let an import replace it.
        if bead.id in self.changed or self._find(bead.id, bead.type) is not None:
            raise InvalidInput(f"bead {bead.id} already exists")
        self._put(bead, f'bead import {bead.id}: {bead.type} "{shorten(bead.title)}"')
        return bead

    def mend(self, bead: Bead) -> Bead:
        """Write `bead` whole over its file when that file does not parse (one that arrived
        by a sync or a plain git push: `gc bead edit` of it). Its path is the bead's own, so
        the edit keeps the id and type the path names; a file that parses is changed by
        `update`, never here."""
        path = bead_path(bead.type, bead.id)
        if self._blob_at(path) is None:
            raise NotFound(f"no {bead.type} bead {bead.id}: the edit must keep its id and type")
        # The index is at this batch's base (refreshed under the lock): its record of the
        # files there that do not parse.
        if bead.id in self.changed or path not in self.store.index.invalid():
            raise InvalidInput(f"bead {bead.id} parses; gc bead update or edit changes it")
        self._put(bead, f'bead mend {bead.id}: {bead.type} "{shorten(bead.title)}"')
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

    def close_bead(
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
        suffix = f": {shorten(reason)}" if reason else ""
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
        from beads.git.writing import PACK_OBJECTS_AT
        from beads.records.codec import (  # lazy: reads never load the YAML emitter
            dump_bead,
            dump_data,
        )

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
        commit, objects = store.git.build_commit(
            parent, files, self._message(), store.agent, root_of_parent=self._root_tree
        )
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
                # Every file this commit wrote is valid: an earlier commit's invalid file at
                # one of these paths (a config.yaml pushed broken, set again) is gone.
                invalid=dict.fromkeys(files),
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
            if loose >= PACK_LOOSE_AT:  # packed in the background (`beads/git/maintenance.py`)
                store.git.maintain(loose=True)
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
