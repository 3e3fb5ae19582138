"""Event ids: every bead gets one as this machine first takes it in, and keeps it for good.

An id is a cursor a waiter can hold (`gc thread wait-reply --after-event N`), so two rules:
an id is never handed out twice, and a bead's id never changes. Both must hold whatever
happens to the index, which is derived data: deleted, rebuilt (`gc doctor --rebuild-index`),
damaged and remade, or replaced by an older copy of itself.

So the numbering does not live in the index. It lives in the event log,
`.runtime/events.sqlite3`, one table `events(seq AUTOINCREMENT, bead id UNIQUE)` that nothing
rebuilds: sqlite's AUTOINCREMENT never hands out a number twice, even after rows are deleted,
and a bead once in the table keeps its row. The index attaches the log to its own connection
(schema `ev`, when first needed: reads of beads never open it) and numbers, in the same
transaction as it applies a commit, the beads of that commit not numbered yet, in
(created_at, id) order; a rebuild numbers, in the same order, only the beads the log does not
hold (those that arrived while no index took them in). A waiter's `--after-event N` therefore
neither misses a bead that arrived after N was handed out (numbered above every id before it)
nor meets one it was already past (its id did not move).

Why not derive the ids from git: the order that matters is the order this machine took the
commits in, which git does not record (a sync may fast-forward to a remote commit whose first
parents never held this machine's commits), and walking the history at every rebuild would
cost a store's whole history instead of one sorted insert.

The log is as durable as the index (no fsync: a power cut may damage either). A log found
damaged or missing is started afresh above the highest id the index recorded handing out
(`meta.events_mark`, kept in step by `number`), and numbers every bead the index holds: ids
stay unique, but a cursor held from before the loss may meet those beads once. The ids mean
nothing on another machine: a bead's id is the cursor that does (`--after-message`).

Nothing here knows what the beads are for. Reading the ids back (`last`, `ids_of`, `after`)
is `beads.index.events`, over an open index.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from beads.index.dbfile import DAMAGED, error_code, rollback, use_wal

TYPE_CHECKING = (
    False  # on the hook path (imported by beads.index.index), which never imports typing
)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from beads.records.record import Bead

FILE = "events.sqlite3"  # beside the index, under `.runtime/`
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS ev.events("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE)"
)
MARK_KEY = "events_mark"  # the index's copy of the log's high mark, for a lost log
_MARK = "SELECT seq FROM ev.sqlite_sequence WHERE name = 'events'"


def log_path(index_path: Path) -> Path:
    """The event log of the index at `index_path`."""
    return index_path.with_name(FILE)


def attach(db: sqlite3.Connection, path: Path, *, read_only: bool, mark: int) -> None:
    """Attach the event log at `path` to `db` as `ev` (outside any transaction), making it
    when missing, and starting it afresh above `mark` when it is damaged. A read-only index
    gets the log read-only, or an empty one in memory when there is none."""
    if read_only:
        from urllib.parse import quote  # lazy: only this rare path needs it

        if path.exists():
            db.execute("ATTACH DATABASE ? AS ev", (f"file:{quote(str(path))}?mode=ro",))
            try:
                db.execute("SELECT count(*) FROM ev.sqlite_master").fetchone()
                return
            except sqlite3.DatabaseError:
                db.execute("DETACH DATABASE ev")
        db.execute("ATTACH DATABASE ':memory:' AS ev")
        db.execute(SCHEMA)
        return
    from beads import files  # lazy: the hook path never writes the log

    root = str(path.parent.parent)
    files.prepare_db(root, str(path))
    _attach(db, path)
    try:
        _prepare(db, mark)
    except sqlite3.DatabaseError as exc:
        db.execute("DETACH DATABASE ev")
        if error_code(exc) not in DAMAGED:
            raise
        # Damaged (a power cut): started afresh above the mark the index kept.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        files.prepare_db(root, str(path))
        _attach(db, path)
        _prepare(db, mark)


def _attach(db: sqlite3.Connection, path: Path) -> None:
    """Attach the log at `path` for writing, synced as the index is: never (sqlite syncs an
    attached file by its own default, whatever the main file's setting)."""
    db.execute("ATTACH DATABASE ? AS ev", (str(path),))
    db.execute("PRAGMA ev.synchronous=OFF")


def _prepare(db: sqlite3.Connection, mark: int) -> None:
    """Make the log's table when it is missing (a new store, an upgrade, a lost log): with
    the ids an index of the older schema kept, above `mark`, and every bead of the index
    numbered. Its first read also finds a damaged file."""
    if db.execute("SELECT 1 FROM ev.sqlite_master WHERE name = 'events'").fetchone():
        return
    use_wal(db, "ev")
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(SCHEMA)
        _adopt(db)
        _carry(db, mark)
        if _has_table(db, "main", "beads"):
            number_all(db)
        db.execute("COMMIT")
    except BaseException:
        rollback(db)
        raise


def _adopt(db: sqlite3.Connection) -> None:
    """Copy the ids an index of an older schema kept in its own `events` table into a log
    that holds none yet: an upgrade keeps them."""
    if (
        not _has_table(db, "main", "events")
        or db.execute("SELECT 1 FROM ev.events LIMIT 1").fetchone()
    ):
        return
    db.execute("INSERT OR IGNORE INTO ev.events(seq, id) SELECT seq, id FROM main.events")
    row = db.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'events'").fetchone()
    _carry(db, int(row[0]) if row else 0)


def _has_table(db: sqlite3.Connection, schema: str, name: str) -> bool:
    found = db.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE name = ?", (name,))
    return found.fetchone() is not None


def number(db: sqlite3.Connection, beads: Iterable[Bead]) -> None:
    """Give each bead not numbered yet the next ids, in (created_at, id) order, in a
    transaction of the log's own that the index's follows (`Index.apply`; the log attached).

    SQLite commits attached files one after the other: were the ids in the index's
    transaction, a reader could see the commit applied before its ids, and a waiter that
    looked then would pass the bead for good. A crash between the two transactions leaves
    ids for a commit the index applies again: the beads keep them."""
    fresh = sorted((bead.created_at, bead.id) for bead in beads)
    if not fresh:
        return
    db.execute("BEGIN")  # deferred: the insert takes the log's write lock alone
    try:
        db.executemany("INSERT OR IGNORE INTO ev.events(id) VALUES (?)", [(i,) for _, i in fresh])
        db.execute("COMMIT")
    except BaseException:
        rollback(db)
        raise


def number_all(db: sqlite3.Connection) -> None:
    """Number every bead of the index the log does not hold yet, in (created_at, id) order
    (a rebuild; the sort is sqlite's, not a list of every bead)."""
    db.execute(
        "INSERT OR IGNORE INTO ev.events(id) SELECT id FROM main.beads "
        "WHERE id NOT IN (SELECT id FROM ev.events) ORDER BY created_at, id"
    )
    keep_mark(db)


def keep_mark(db: sqlite3.Connection) -> None:
    """Record the log's high mark in the index (`meta.events_mark`), for a lost log."""
    db.execute(f"INSERT OR REPLACE INTO main.meta VALUES ('{MARK_KEY}', coalesce(({_MARK}), 0))")


def high_mark(db: sqlite3.Connection) -> int:
    """The highest id the attached log ever handed out (0 for none)."""
    row = db.execute(_MARK).fetchone()
    return int(row[0]) if row else 0


def _carry(db: sqlite3.Connection, mark: int) -> None:
    """Make the next id the log hands out be above `mark`."""
    if mark > high_mark(db):
        db.execute("DELETE FROM ev.sqlite_sequence WHERE name = 'events'")
        db.execute("INSERT INTO ev.sqlite_sequence(name, seq) VALUES ('events', ?)", (mark,))
