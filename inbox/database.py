"""The delivery databases' plumbing: opening (creating, upgrading) a database file, its
transactions, and what sqlite's errors mean to a user.

Two files use it: `.runtime/delivery.sqlite3` (items, durable entries, the follow watermark:
the source of truth, schema below) and `.runtime/sessions.sqlite3` (inbox/sessions.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from beads import files
from beads.errors import Conflict, GcError, StorageError
from beads.index import dbfile
from beads.index.dbfile import DAMAGED, READ_ONLY, error_code, open_read_only, rollback, use_wal

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

# Version 1 (`PRAGMA user_version`): items record their pusher; the `follow` table holds the
# last commit of the store's branch that items were derived from (see inbox/follow.py).
# Version 2: durable entries carry a structured payload (JSON), seed 003's item data.
# Older databases are upgraded in place by MIGRATIONS.
SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS items(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL, key TEXT NOT NULL, type TEXT NOT NULL, source TEXT NOT NULL,
    content TEXT NOT NULL, priority INTEGER NOT NULL, created_at REAL NOT NULL,
    expires_at REAL, ref_bead TEXT, moot_when TEXT,
    state TEXT NOT NULL DEFAULT 'pending', session TEXT, settled_at REAL, pusher TEXT,
    UNIQUE(agent, key));
CREATE INDEX IF NOT EXISTS items_by_state ON items(agent, state, priority, created_at);
CREATE TABLE IF NOT EXISTS entries(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, kind TEXT NOT NULL,
    sender TEXT, content TEXT NOT NULL, created_at REAL NOT NULL,
    handed_out INTEGER NOT NULL DEFAULT 0, payload TEXT);
CREATE INDEX IF NOT EXISTS entries_by_agent ON entries(agent, seq);
CREATE TABLE IF NOT EXISTS follow(one INTEGER PRIMARY KEY CHECK (one = 1), head TEXT);
"""
# Upgrades: MIGRATIONS[n] brings a database of version n to n + 1.
MIGRATIONS = {
    0: """
ALTER TABLE items ADD COLUMN pusher TEXT;
CREATE TABLE IF NOT EXISTS follow(one INTEGER PRIMARY KEY CHECK (one = 1), head TEXT);
""",
    1: """
ALTER TABLE entries ADD COLUMN payload TEXT;
""",
}


_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class DatabaseDamaged(StorageError):
    """A delivery database file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB); `file_id` is the
    `(device, inode)` of the file found so."""

    def __init__(self, message: str, file_id: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.file_id = file_id


class DatabaseReplaced(StorageError):
    """The delivery database file was removed or replaced by another process while this
    connection had it open: what it reads is no longer the database; open it again."""


def database_error(
    exc: sqlite3.Error,
    name: str,
    file_id: tuple[int, int] | None = None,
    advice: str | None = None,
    path: Path | None = None,
) -> GcError:
    """What sqlite's `exc` on the database `name` (the file `file_id`) means to a user, said
    as the store's own errors say it: a full disk, a read-only store, a busy or a damaged
    file (followed by `advice`, what to do about it, when the caller has some), or, when
    another file than `file_id` now stands at `path`, `DatabaseReplaced`."""
    if path is not None and dbfile.file_id(path) != file_id:
        # Its file (and `-wal`, `-shm`) removed or replaced under it, sqlite says only
        # "disk I/O error": the caller opens the database again (a wait goes on).
        return DatabaseReplaced(f"{name} was removed or replaced while open ({exc})")
    code = error_code(exc)
    # A full disk shows as SQLITE_FULL, or, when the `-shm` file cannot grow, as this I/O
    # error (sqlite writes it through: ENOSPC, a quota).
    full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_IOERR_SHMSIZE
    if code == sqlite3.SQLITE_FULL or full:
        return StorageError(f"no space left on device ({name} could not be written)")
    if code in READ_ONLY:
        return StorageError(f"store is read-only: {name} cannot be written ({exc})")
    if code in _BUSY:
        return Conflict(f"{name} is busy: {exc}")
    if code in DAMAGED:
        said = f"{name} is damaged: {exc}"
        return DatabaseDamaged(f"{said}; {advice}" if advice else said, file_id)
    return StorageError(f"{name}: {exc}")


class Connection(sqlite3.Connection):
    """A delivery database's connection: once open, a statement's error says what it means
    to a user and names the file (`database_error`), for reads as for writes."""

    name: str | None = None  # set once open: until then, sqlite's errors as they are
    file_id: tuple[int, int] | None = None  # the file opened (a damaged one is named so)
    path: Path | None = None  # where it was opened: another file there means it was replaced
    advice: str | None = None  # what to do when the file is found damaged

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> Exception:
        if self.name is None:
            return exc
        return database_error(exc, self.name, self.file_id, self.advice, self.path)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, name: str) -> Iterator[sqlite3.Connection]:
    """One write transaction on `db` (the file `name`), holding its write lock from the start
    (`BEGIN IMMEDIATE`): two drains or two pushes racing on one agent serialise."""
    known = getattr(db, "file_id", None), getattr(db, "advice", None), getattr(db, "path", None)
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise database_error(exc, name, *known) from None
    try:
        yield db
        db.execute("COMMIT")
    except BaseException as exc:
        rollback(db)
        if isinstance(exc, sqlite3.Error):
            raise database_error(exc, name, *known) from None
        raise


def connect(
    path: Path,
    synchronous: str,
    schema: str,
    last_table: str,  # a table of every version: absent, the database is new
    *,
    version: int = 0,
    migrations: dict[int, str] | None = None,
    setup: Callable[[sqlite3.Connection], None] | None = None,
    advice: str | None = None,
) -> sqlite3.Connection:
    """Open (and on first use create, or upgrade) one of the delivery databases.

    A database of an older `user_version` is brought up by `migrations`; `setup` runs once,
    in the same transaction, when the database is made or upgraded. A newer one is refused.
    One this process may not write (a read-only store) is opened read-only: reads answer,
    writes fail with `store is read-only`. A damaged file raises `DatabaseDamaged`, its
    message followed by `advice` (what to do about it), whenever it is found so.
    """
    # sqlite opens by name: never through a link, created with the store's mode.
    files.prepare_db(str(path.parent.parent), str(path))
    file_id = dbfile.file_id(path)
    db = None
    try:
        db = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False, factory=Connection
        )
        db.file_id, db.path, db.advice = file_id, path, advice
        db.execute(f"PRAGMA synchronous={synchronous}")
        if _schema_state(db, last_table, path, version) == (version, True):
            db.name = path.name
            return db  # the common case: two cheap reads
        use_wal(db)
        with transaction(db, path.name):
            found, made = _schema_state(
                db, last_table, path, version
            )  # another process may be here
            if not made:
                statements = schema.split(";")
            else:
                steps = range(found, version)
                statements = [s for n in steps for s in (migrations or {})[n].split(";")]
            if not made or found < version:
                for statement in statements:
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version={version}")
                if setup is not None:
                    setup(db)
        db.name = path.name
        return db
    except GcError:
        if db is not None:
            db.close()
        raise
    except sqlite3.Error as exc:
        if db is not None:
            db.close()
        error = database_error(exc, path.name, file_id, advice, path)
        if error_code(exc) in READ_ONLY:
            return _connect_read_only(path, last_table, version, error, advice)
        raise error from None


def _connect_read_only(
    path: Path, last_table: str, version: int, cause: GcError, advice: str | None
) -> sqlite3.Connection:
    """Open a database this process may not write (a read-only mount, another user's store);
    a newer gc's database is refused here too."""

    def current(db: sqlite3.Connection) -> bool:
        return _schema_state(db, last_table, path, version) == (version, True)

    db = open_read_only(path, current, factory=Connection)
    if db is None:
        raise cause
    db.name, db.advice = path.name, advice  # type: ignore[attr-defined]
    return db


def _schema_state(db: sqlite3.Connection, table: str, path: Path, known: int) -> tuple[int, bool]:
    """`(user_version, whether `table` exists)`; a version above `known` (a database made by
    a newer gc) is refused rather than half-read."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > known:
        raise StorageError(
            f"{path.name} has schema version {version}, newer than this gc knows ({known}): "
            "upgrade gc-beads"
        )
    made = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,))
    return version, made.fetchone() is not None
