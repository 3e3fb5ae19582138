"""The index: `.runtime/index.sqlite3`, derived from git, serving lookups and lists in O(log n).

It records the commit it reflects (`head`); the store brings it forward from the tree diff
when the branch moved, and rebuilds it from git alone when it is missing, of another schema
or damaged. Each bead's row keeps the full record as JSON, so no read ever parses YAML; rows
are for reading only: a write starts from git (`Batch.get` proves a row against HEAD's blob).
Event ids are not the index's: they live in the event log beside it (`beads.index.events`), which
a rebuild keeps.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from beads.errors import InvalidInput, StorageError
from beads.faults import fault
from beads.index import eventlog
from beads.index.dbfile import (
    DAMAGED,
    READ_ONLY,
    error_code,
    file_id,
    open_read_only,
    out_of_space,
    rollback,
    use_wal,
)
from beads.index.query import select
from beads.index.rows import SCHEMA, bead_row
from beads.records.record import Bead

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from beads.index.query import Query

SCHEMA_VERSION = "9"  # 9: the event ids moved to the event log (`beads.index.events`)

# The text of these beads' rows into the full-text table, or out of it. REPLACE: a row
# deleted behind the index's back leaves its words under a rowid sqlite may hand out again.
_FTS_ADD = (
    "INSERT OR REPLACE INTO beads_fts(rowid, title, body, labels, agents) SELECT * FROM beads_text "
    "WHERE rowid IN (SELECT rowid FROM beads WHERE id IN (SELECT value FROM json_each(?)))"
)
_FTS_DROP = (
    "DELETE FROM beads_fts "
    "WHERE rowid IN (SELECT rowid FROM beads WHERE id IN (SELECT value FROM json_each(?)))"
)

LINKS_KEPT = 1000
# Pages a rebuilt index is copied into the live file by, a step at a time (4 KiB each; the
# steps are one transaction, and cost nothing measurable over a single one).
COPY_PAGES = 16


class IndexDamaged(StorageError):
    """The index file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB) and could not be rebuilt."""


class _BadRow(Exception):
    """A row whose JSON is not what it holds (a bead, the config): damaged like a bad page."""


def remove_files(path: Path, *, main: bool = True) -> None:
    """Delete the sqlite database `path` with its `-wal` and `-shm` files (with `main`
    False, those two only)."""
    for suffix in ("", "-wal", "-shm") if main else ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# Primary result codes (an extended code keeps its primary one in the low byte).
def _guarded(method: Any) -> Any:
    """Make `method` recover from a damaged file: the one place every index call passes.

    Any query may meet a damaged page, long after the file opened. Then the file is dropped,
    the owner's `recover` callback rebuilds it from git (the index knows no git), and the call
    runs once more; a second failure is an `IndexDamaged` error.
    """

    def call(self: Index, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.DatabaseError, _BadRow) as exc:
            self._recover(exc)
        return method(self, *args, **kwargs)

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


class Index:
    """The sqlite index of one store.

    `recover`, called when a query finds the file damaged, must rebuild it from git: it is
    given nothing and calls `drop_file()` then fills the empty index (the store does so
    under its write lock). Without one, a damaged file raises `IndexDamaged`.
    """

    def __init__(self, path: Path, recover: Callable[[], None] | None = None) -> None:
        self.path = path
        self.recover = recover
        self.read_only = False
        self._recovering = False
        self._file_id: tuple[int, int] | None = None
        self.rebuilt_new: bytes | None = None  # see `just_rebuilt`
        self._new_file = False
        self._log = False  # the event log is attached (`event_log`)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if error_code(exc) in READ_ONLY:
                self._open_read_only(exc)
            elif error_code(exc) in DAMAGED:
                # Derived data: a damaged file (say, after a power cut, since it is not
                # synced) is dropped and rebuilt from git by the store.
                self.drop_file()
            elif out_of_space(exc, path):
                raise StorageError(
                    f"no space left on device: cannot open the index {path}"
                ) from None
            else:  # never drop a busy file: another process may be using it
                raise StorageError(f"cannot open the index {path}: {exc}") from None

    def _open(self) -> None:
        try:  # (the store makes an empty file first, to set its modes)
            self._new_file = self.path.stat().st_size == 0
        except FileNotFoundError:
            self._new_file = True
        self.rebuilt_new = None
        self._log = False
        self.db = sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=False
        )
        try:
            self._file_id = file_id(self.path)  # the file this connection has (made) open
            # No fsync, on commits or checkpoints: the index is rebuilt from git when it is
            # lost, and every command that closes it last would otherwise pay a checkpoint's
            # fsync.
            self.db.execute("PRAGMA synchronous=OFF")
            if self._meta("schema") != SCHEMA_VERSION:
                use_wal(self.db)
                self._reset()
        except BaseException:
            self.db.close()  # a server that goes on must not keep the file open
            raise

    def just_rebuilt(self, head: bytes) -> bool:
        """Whether a rebuild in this process filled a new file from commit `head` (and no
        other caller was told so yet): `gc doctor --rebuild-index` then need not rebuild it
        again (a store whose index was lost rebuilt it when it opened)."""
        rebuilt, self.rebuilt_new = self.rebuilt_new, None
        return rebuilt == head

    def _open_read_only(self, cause: sqlite3.Error) -> None:
        """Open a file this process may not write (a read-only mount, another user's store)."""
        if not self.path.exists():
            raise StorageError(f"cannot open the index {self.path}: {cause}") from None
        self.close()

        self._log = False

        def current(db: sqlite3.Connection) -> bool:
            self.db = db
            return self._meta("schema") == SCHEMA_VERSION

        if open_read_only(self.path, current) is None:
            raise StorageError(
                f"cannot open the index {self.path} read-only: rebuild it where the store can "
                "be written (gc doctor --rebuild-index)"
            )
        self.read_only = True

    def drop_file(self) -> None:
        """Delete the index files and open a new, empty index (to be filled from git).

        For a damaged file, and for `gc doctor --rebuild-index`, which starts afresh.

        Files another process has already replaced (they are not the ones this connection
        opened) are kept: that process rebuilt them.
        """
        self.close()
        if self._file_id is None or file_id(self.path) == self._file_id:
            remove_files(self.path)
        self._open()

    def replace_with(self, aside: Path, fill: Callable[[Index], object]) -> None:
        """Fill a new index at `aside` (an empty file the caller made, beside this one: it
        shares the event log) with `fill`, then put its content in this file. When `fill`
        raises, `aside` is removed and this file is kept as it was: reads go on.

        For `gc doctor --rebuild-index`, which starts from a new file (the old one may be
        damaged anywhere) and may fail half-way (git cannot read an object).

        The new index is copied into this very file, every page, in one transaction
        (sqlite's backup): a process holding the index open reads the old one until it
        commits and the new one after, as after any write. Renamed into place, the new file
        would leave such a process on the old one, or (opening between the two steps of
        the swap) reading the old file through the new one's `-wal` and `-shm`. Only a
        file that cannot take the copy (its first page damaged, another page size, no space
        for its `-wal` to hold the copy) is replaced by the rename."""
        fresh = Index(aside)
        try:
            fill(fresh)
        except BaseException:
            fresh.close()
            remove_files(aside)
            raise
        fault("rebuild-filled")
        try:
            self._copy_from(fresh)
        except sqlite3.Error:  # this file cannot take it; the copy left it as it was
            self._move_in(fresh, aside)
            return
        except BaseException:
            fresh.close()
            remove_files(aside)
            raise
        fresh.close()
        remove_files(aside)
        self.rebuilt_new = None

    def _copy_from(self, fresh: Index) -> None:
        """Copy every page of `fresh` into this file, as one transaction (a kill or a failure
        part-way leaves this file as it was)."""

        def copied(_status: int, remaining: int, _total: int) -> None:
            if remaining:
                fault("rebuild-copying")

        fresh.db.backup(self.db, pages=COPY_PAGES, progress=copied)

    def _move_in(self, fresh: Index, aside: Path) -> None:
        """Put the file `aside` (`fresh`'s) in this one's place, by a rename."""
        try:
            # Everything into the file itself: its `-wal` is not moved with it.
            fresh.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except BaseException:
            fresh.close()
            remove_files(aside)
            raise
        fresh.close()
        self.close()
        remove_files(self.path, main=False)  # this file's: they must not meet the new one
        fault("rebuild-swapping")
        aside.replace(self.path)
        remove_files(aside, main=False)
        self._open()

    def _recover(self, cause: Exception) -> None:
        """Rebuild the file after `cause`, raised by a call; `cause` again when it is an
        sqlite error that does not mean damage (a locked file, a full disk)."""
        if isinstance(cause, sqlite3.DatabaseError) and error_code(cause) not in DAMAGED:
            raise cause
        if self._recovering or self.recover is None or self.read_only:
            raise IndexDamaged(
                f"the index {self.path} is damaged ({cause}); gc doctor --rebuild-index "
                "rebuilds it from git"
            ) from None
        self._recovering = True
        try:
            self.recover()
        finally:
            self._recovering = False

    def event_log(self) -> sqlite3.Connection:
        """The connection with the event log (`beads.index.events`) attached as `ev`: attached
        when first asked for (outside a transaction), so reads of beads never open it."""
        if not self._log:
            try:
                mark = int(self._meta(eventlog.MARK_KEY) or 0)
            except (sqlite3.Error, ValueError):
                mark = 0
            eventlog.attach(
                self.db, eventlog.log_path(self.path), read_only=self.read_only, mark=mark
            )
            self._log = True
        return self.db

    def close(self) -> None:
        if hasattr(self, "db"):  # not when the file could not even be opened
            self.db.close()

    # -- state ----------------------------------------------------------------------------

    @_guarded
    def head(self) -> bytes | None:
        """The commit the index reflects, or None when it must be rebuilt."""
        value = self._meta("head")
        return value.encode() if value else None

    @_guarded
    def config(self) -> dict[str, Any] | None:
        value = self._meta("config")
        try:
            return json.loads(value) if value else None
        except ValueError:
            raise _BadRow("the index's copy of config.yaml is not JSON") from None

    @_guarded
    def loose_objects(self) -> int:
        """Loose objects written since the last pack (an estimate kept by the writers)."""
        return int(self._meta("loose") or 0)

    # -- reads ----------------------------------------------------------------------------

    @_guarded
    def get(self, bead_id: str) -> Bead | None:
        row = self.db.execute("SELECT data FROM beads WHERE id = ?", (bead_id,)).fetchone()
        return _bead(row[0]) if row else None

    @_guarded
    def get_many(self, bead_ids: Iterable[str]) -> dict[str, Bead]:
        """The beads with these exact ids, by id, in one query; unknown ids are left out."""
        wanted = json.dumps(list(dict.fromkeys(bead_ids)))
        rows = self.db.execute(
            "SELECT id, data FROM beads WHERE id IN (SELECT value FROM json_each(?))", (wanted,)
        )
        return {row[0]: _bead(row[1]) for row in rows}

    @_guarded
    def location(self, bead_id: str) -> tuple[str, str] | None:
        """`(path, blob sha)` of the bead's file at the index's head."""
        row = self.db.execute("SELECT path, blob FROM beads WHERE id = ?", (bead_id,)).fetchone()
        return (row[0], row[1]) if row else None

    @_guarded
    def match_prefix(self, prefix: str, limit: int = 11) -> list[str]:
        """Ids starting with `prefix`, in order, at most `limit` of them."""
        rows = self.db.execute(
            "SELECT id FROM beads WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
            (prefix, prefix + "\uffff", limit),
        )
        return [r[0] for r in rows]

    @_guarded
    def query(self, q: Query) -> list[Bead]:
        """Beads matching every filter of `q`, in its order, at most `q.limit`."""
        sql, params = select("b.data", self._by_identity(q))
        return [_bead(row[0]) for row in self.db.execute(sql, params)]

    @_guarded
    def count_matching(self, q: Query) -> int:
        """How many beads match the filters of `q` (its order and limit are ignored)."""
        sql, params = select("count(*)", self._by_identity(q), ordered=False)
        return self.db.execute(sql, params).fetchone()[0]

    def _by_identity(self, q: Query) -> Query:
        """`q` with its assignee and sender widened to every spelling of the agent
        (`beads.records.agents`: `mayor` of rig `gastown` is `gastown/mayor`, old beads
        included)."""
        if q.assignee is None and q.sender is None:
            return q
        from beads.records.agents import spellings

        config = self.config() or {}
        changes: dict[str, Any] = {}
        for field in ("assignee", "sender"):
            name = getattr(q, field)
            if isinstance(name, str) and (names := spellings(name, config)) != (name,):
                changes[field] = names
        return q.replace(**changes) if changes else q

    @_guarded
    def agents(self) -> list[str]:
        """Every agent named in a bead (as from, assignee or cc), sorted."""
        return [row[0] for row in self.db.execute("SELECT name FROM agents ORDER BY name")]

    @_guarded
    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM beads").fetchone()[0]

    def rows(self, *, beads: bool = True) -> Iterator[tuple[Any, ...]]:
        """Every row as `(path, blob sha, bead)`, or `(path, blob sha)` without `beads`, one
        at a time (for `gc doctor`, which checks them all: a store's worth of beads is never
        held at once). A damaged file met on the way is recovered as `_guarded` does, and the
        rows come again from the rebuilt one."""
        sql = "SELECT path, blob, data FROM beads" if beads else "SELECT path, blob FROM beads"
        try:
            yield from self._rows(sql)
            return
        except (sqlite3.DatabaseError, _BadRow) as exc:
            self._recover(exc)
        yield from self._rows(sql)

    def _rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        for row in self.db.execute(sql):
            yield (row[0], row[1], _bead(row[2])) if len(row) == 3 else row

    @_guarded
    def recent_paths(self, cutoff: str) -> list[str]:
        """Paths of the open beads and of those last changed at or after `cutoff` (what a
        `recent` view holds)."""
        rows = self.db.execute(
            "SELECT path FROM beads WHERE status = 'open' UNION "
            "SELECT path FROM beads WHERE updated_at >= ?",
            (cutoff,),
        )
        return [row[0] for row in rows]

    @_guarded
    def aged_out(self, since: str | None, cutoff: str) -> list[str]:
        """Paths of the closed beads last changed before `cutoff` (and at or after `since`):
        those that left a `recent` view since its last pruning."""
        rows = self.db.execute(
            "SELECT path FROM beads WHERE updated_at < ? AND updated_at >= ? AND status = 'closed'",
            (cutoff, since or ""),
        )
        return [row[0] for row in rows]

    @_guarded
    def invalid(self) -> dict[str, str]:
        """Bead files of HEAD that could not be indexed, path -> why."""
        return dict(self.db.execute("SELECT path, error FROM invalid"))

    @_guarded
    def link_parent(self, commit: bytes) -> bytes | None:
        """The commit the index came to `commit` from, as it recorded (None: not recorded)."""
        row = self.db.execute("SELECT parent FROM links WHERE id = ?", (commit.decode(),))
        found = row.fetchone()
        return found[0].encode() if found else None

    @_guarded
    def types_changed(self, old: bytes, new: bytes) -> set[str] | None:
        """The bead types changed from commit `old` to `new`, by the links recorded from `new`
        back to `old`; None when that chain is not all recorded (then only git can tell)."""
        types: set[str] = set()
        seen: set[str] = set()
        at, stop = new.decode(), old.decode()
        while at != stop:
            if at in seen:  # a branch moved back and forth: links that lead nowhere
                return None
            seen.add(at)
            row = self.db.execute("SELECT parent, types FROM links WHERE id = ?", (at,)).fetchone()
            if row is None:
                return None
            at = row[0]
            types.update(row[1].split())
        return types

    # -- writes ---------------------------------------------------------------------------

    @_guarded
    def apply(
        self,
        *,
        head: bytes,
        upserts: Sequence[tuple[Bead, str, str]] = (),
        deleted_paths: Sequence[str] = (),
        deleted_ids: Sequence[str] = (),
        invalid: dict[str, str | None] | None = None,
        config: dict[str, Any] | None = None,
        loose_objects: int | None = None,
        reset: bool = False,
        link: tuple[bytes, Iterable[str]] | None = None,
    ) -> None:
        """Apply one commit's changes and record `head`, all in one transaction.

        `upserts` are `(bead, path, blob sha)`; `deleted_ids` drops rows whatever their path
        says (rows git does not hold); `invalid` maps a path to its error, or to None when the
        path no longer holds an invalid file. `link=(parent, types)` records that from commit
        `parent` to `head` the beads changed are of `types` and no other (`types_changed`).
        """
        db = self.event_log()
        # One statement per table for the whole commit (a batch may hold thousands of
        # beads); the last upsert of an id wins, as it did row by row.
        latest = {bead.id: (bead, path, blob) for bead, path, blob in upserts}.values()
        eventlog.number(db, [bead for bead, _, _ in latest])  # first: see `eventlog.number`
        db.execute("BEGIN IMMEDIATE")
        try:
            if reset:
                for table in ("beads", "labels", "invalid", "agents", "links", "beads_fts"):
                    db.execute(f"DELETE FROM {table}")
            replaced = [bead.id for bead, _, _ in latest]
            for path in deleted_paths:
                row = db.execute("SELECT id FROM beads WHERE path = ?", (path,)).fetchone()
                if row:
                    replaced.append(row[0])
                db.execute("DELETE FROM invalid WHERE path = ?", (path,))
            replaced += deleted_ids
            if replaced and not reset:
                db.execute(_FTS_DROP, (json.dumps(replaced),))
            for bead_id in replaced[len(latest) :]:
                db.execute("DELETE FROM beads WHERE id = ?", (bead_id,))
                db.execute("DELETE FROM labels WHERE id = ?", (bead_id,))
            db.executemany("DELETE FROM labels WHERE id = ?", [(b.id,) for b, _, _ in latest])
            db.executemany(
                "INSERT OR REPLACE INTO beads VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [bead_row(bead, path, blob) for bead, path, blob in latest],
            )
            db.executemany(
                "INSERT INTO labels VALUES (?, ?)",
                [(lb, bead.id) for bead, _, _ in latest for lb in bead.labels],
            )
            if latest:
                db.execute(_FTS_ADD, (json.dumps([bead.id for bead, _, _ in latest]),))
            if latest:
                eventlog.keep_mark(db)
            named: set[str] = set()
            for bead, _, _ in latest:
                named.update([bead.sender, *bead.cc])
                if bead.assignee:
                    named.add(bead.assignee)
            db.executemany("INSERT OR IGNORE INTO agents VALUES (?)", [(n,) for n in named])
            marks = (invalid or {}).items()
            db.executemany(
                "DELETE FROM invalid WHERE path = ?", [(p,) for p, e in marks if e is None]
            )
            db.executemany(
                "INSERT OR REPLACE INTO invalid VALUES (?, ?)",
                [(p, e) for p, e in marks if e is not None],
            )
            self._set_meta("head", head.decode())
            if link is not None:
                added = db.execute(
                    "INSERT OR REPLACE INTO links VALUES (?, ?, ?)",
                    (head.decode(), link[0].decode(), " ".join(sorted(set(link[1])))),
                ).lastrowid
                db.execute("DELETE FROM links WHERE rowid <= ?", ((added or 0) - LINKS_KEPT,))
            if config is not None:
                self._set_meta("config", json.dumps(config))
            if loose_objects is not None:
                self._set_meta("loose", str(loose_objects))
            db.execute("COMMIT")
        except BaseException:
            rollback(db)
            raise

    def _reset(self) -> None:
        # Derived data of another schema (or none): start empty; the store rebuilds it from git.
        db = self.db
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone():
            self.event_log()  # an index of an older schema: the log adopts its event ids
        db.execute("BEGIN IMMEDIATE")
        try:
            if self._meta("schema") != SCHEMA_VERSION:  # another process may have just done it
                db.execute("DROP VIEW IF EXISTS beads_text")
                for table in ("meta", "beads", "labels", "invalid", "agents", "links", "events",
                              "beads_fts"):  # fmt: skip
                    db.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                self._set_meta("schema", SCHEMA_VERSION)
            db.execute("COMMIT")
        except BaseException:
            rollback(db)
            raise

    def _meta(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # a new file: no tables yet
            raise  # busy, unreadable: never a reason to reset the file
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


def _bead(data: str) -> Bead:
    # Rows were validated when they were indexed; one that no longer decodes was damaged.
    try:
        return Bead.from_dict(json.loads(data), validate=False)
    except (ValueError, TypeError, InvalidInput) as exc:
        raise _BadRow(f"an index row is not a bead: {exc}") from None
