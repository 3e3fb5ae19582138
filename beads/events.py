"""Event ids: the index numbers every bead as it first takes it in, machine-local.

A number is a cursor a waiter can hold: it only grows (sqlite's AUTOINCREMENT never hands out
an id twice, even after rows are deleted), in the order this machine applied the commits, and
within one commit in (created_at, id) order. A rebuild numbers the beads in (created_at, id)
order above the highest id the old file handed out (`high_mark`, carried over by `carry`
when the old file was readable), so a waiter's cursor never meets a reused id. The ids mean
nothing on another machine: a bead's id is the cursor that does.

Works on the index's connection (`Index.db`), inside its transactions; the index calls
`number` from `apply`. Nothing here knows what the beads are for.
"""

from __future__ import annotations

import json
import sqlite3

from beads.record import Bead

TYPE_CHECKING = False  # on the hook path (imported by beads.index): typing costs ~7 ms
if TYPE_CHECKING:
    from collections.abc import Iterable

    from beads.index import Index

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE)"
)


def number(db: sqlite3.Connection, beads: Iterable[Bead], reset: bool) -> None:
    """Give each bead not numbered yet the next ids, in (created_at, id) order (called inside
    the index's transaction; with `reset`, every bead is numbered afresh above the old ids)."""
    if reset:
        db.execute("DELETE FROM events")  # AUTOINCREMENT keeps the high mark
    fresh = sorted((bead.created_at, bead.id) for bead in beads)
    db.executemany("INSERT OR IGNORE INTO events(id) VALUES (?)", [(i,) for _, i in fresh])


def high_mark(db: sqlite3.Connection) -> int:
    """The highest id this file ever handed out (0 for none, or a file without the table)."""
    try:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    except sqlite3.OperationalError:  # no AUTOINCREMENT table yet: nothing handed out
        return 0
    return int(row[0]) if row else 0


def carry(db: sqlite3.Connection, mark: int) -> None:
    """Make the next id handed out be above `mark` (the old file's high mark)."""
    if mark > high_mark(db):
        db.execute("DELETE FROM sqlite_sequence WHERE name = 'events'")
        db.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('events', ?)", (mark,))


def last(index: Index) -> int:
    """The highest id handed out so far: a cursor that means "from now on"."""
    return high_mark(index.db)


def ids_of(index: Index, bead_ids: Iterable[str]) -> dict[str, int]:
    """The event ids of these beads, by bead id (beads not numbered are left out)."""
    wanted = json.dumps(list(dict.fromkeys(bead_ids)))
    rows = index.db.execute(
        "SELECT id, seq FROM events WHERE id IN (SELECT value FROM json_each(?))", (wanted,)
    )
    return dict(rows.fetchall())


def after(
    index: Index,
    seq: int,
    *,
    thread: str | None = None,
    type: str | None = None,
    limit: int | None = None,
) -> list[tuple[int, Bead]]:
    """`(event id, bead)` of the beads numbered after `seq` (of one `thread`, one `type`),
    in event order."""
    sql = (
        "SELECT e.seq, b.data FROM events e JOIN beads b ON b.id = e.id WHERE e.seq > ?"
        if thread is None
        # A thread's beads by the thread index first: a thread holds few, the log many.
        else "SELECT e.seq, b.data FROM beads b JOIN events e ON e.id = b.id "
        "WHERE b.thread = ? AND e.seq > ?"
    )
    params: list[object] = [seq] if thread is None else [thread, seq]
    if type is not None:
        sql += " AND b.type = ?"
        params.append(type)
    sql += " ORDER BY e.seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [
        (row[0], Bead.from_dict(json.loads(row[1]), validate=False))
        for row in index.db.execute(sql, params)
    ]
