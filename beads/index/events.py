"""Reading event ids back through an open index: the cursor of "from now on", the ids of
given beads, and the beads numbered after a cursor (the log itself: `beads.index.eventlog`)."""

from __future__ import annotations

import json

from beads.index.eventlog import high_mark
from beads.records.record import Bead

TYPE_CHECKING = False  # on the hook path, which never imports typing
if TYPE_CHECKING:
    from collections.abc import Iterable

    from beads.index.index import Index


def last(index: Index) -> int:
    """The highest id handed out so far: a cursor that means "from now on"."""
    return high_mark(index.event_log())


def ids_of(index: Index, bead_ids: Iterable[str]) -> dict[str, int]:
    """The event ids of these beads, by bead id (beads not numbered are left out)."""
    wanted = json.dumps(list(dict.fromkeys(bead_ids)))
    rows = index.event_log().execute(
        "SELECT id, seq FROM ev.events WHERE id IN (SELECT value FROM json_each(?))", (wanted,)
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
        "SELECT e.seq, b.data FROM ev.events e JOIN main.beads b ON b.id = e.id WHERE e.seq > ?"
        if thread is None
        # A thread's beads by the thread index first: a thread holds few, the log many.
        else "SELECT e.seq, b.data FROM main.beads b JOIN ev.events e ON e.id = b.id "
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
        for row in index.event_log().execute(sql, params)
    ]
