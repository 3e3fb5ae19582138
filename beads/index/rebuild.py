"""Refilling the index from scratch (`Rebuild`): one transaction, streamed.

The caller (`beads.refresh.rebuild_index`) parses the bead files one by one; the rows go
to sqlite a chunk at a time, and each chunk's full-text rows (tokenizing: the largest part of
sqlite's work, in C without the GIL) are made by a thread of their own, on another core while
the next chunk is parsed. The secondary indexes are made once after the rows are in.
"""

from __future__ import annotations

import json
import queue
import threading

from beads.index import eventlog
from beads.index.dbfile import rollback
from beads.index.rows import SCHEMA, bead_row

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from beads.index.index import Index
    from beads.records.record import Bead

# The secondary indexes of the schema, `(name, statement)`: a rebuild drops and remakes them.
_INDEXES = [
    (statement.split("INDEX IF NOT EXISTS", 1)[1].split()[0], statement)
    for statement in SCHEMA.split(";")
    if "CREATE INDEX" in statement
]
REBUILD_CHUNK = 2000  # rows per executemany: bounded memory, few calls
REBUILD_CACHE_KIB = 32 * 1024  # sqlite's page cache while rebuilding (its default is 2 MiB)

# The full-text rows of the beads rows one chunk added (by rowid: after the last of the
# chunk before it, up to its own last).
_FTS_CHUNK = (
    "INSERT INTO beads_fts(rowid, title, body, labels, agents) "
    "SELECT * FROM beads_text WHERE rowid > ? AND rowid <= ?"
)
_LAST_ROWID = "SELECT coalesce(max(rowid), 0) FROM beads"


class Rebuild:
    """One rebuild of the index in progress: `with Rebuild(index, head) as r:` then `r.add(...)`
    each bead file (streamed: nothing of the whole store is held), and `r.invalid(...)`,
    `r.config(...)`; on a clean exit the index records `head`.

    Faster than `Index.apply(reset=True)` at any size: the secondary indexes are made once
    after the rows are in (one sort each instead of a b-tree insert per row), the page cache
    is larger for the duration, and the full-text rows are made by a thread of their own
    while the next files are parsed."""

    def __init__(self, index: Index, head: bytes) -> None:
        self.index = index
        self.head = head
        self.count = 0
        self._rows: list[tuple[Bead, str, str, Any]] = []
        self._named: set[str] = set()
        self._invalid: list[tuple[str, str]] = []
        self._config: dict[str, Any] | None = None
        # Rowid bounds of the chunks whose full-text rows are still to make; the lock keeps
        # the connection to one thread at a time (a statement of the writer's runs while
        # this thread parses, never while it inserts).
        self._chunks: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._failed: BaseException | None = None

    def __enter__(self) -> Rebuild:
        db = self.index.event_log()  # outside the transaction: the log is attached first
        db.execute(f"PRAGMA cache_size = -{REBUILD_CACHE_KIB}")
        db.execute("BEGIN IMMEDIATE")
        try:
            # The event log is kept: a bead keeps its id (`beads.index.events`).
            for table in ("beads", "labels", "invalid", "agents", "links", "beads_fts"):
                db.execute(f"DELETE FROM {table}")
            for name, _statement in _INDEXES:
                db.execute(f"DROP INDEX IF EXISTS {name}")
        except BaseException:
            self._abandon()
            raise
        self._writer = threading.Thread(target=self._index_text, name="gc-rebuild", daemon=True)
        self._writer.start()
        return self

    def add(self, bead: Bead, path: str, blob: str, read: Any = None) -> None:
        """Index one bead file (`blob` is its sha, as text); `read` is the mapping the bead
        was made from, if at hand (when it is already `bead.to_dict()`, its JSON is used)."""
        self._rows.append((bead, path, blob, read))
        if len(self._rows) >= REBUILD_CHUNK:
            self._flush()

    def invalid(self, path: str, error: str) -> None:
        """Record a file of `head` that could not be indexed."""
        self._invalid.append((path, error))

    def config(self, config: dict[str, Any]) -> None:
        self._config = config

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is not None:
            self._abandon()
            return
        db = self.index.db
        try:
            self._flush()
            self._stop_writer()
            if self._failed is not None:
                raise self._failed
            if db.execute("SELECT count(*) FROM beads").fetchone()[0] != self.count:
                # An id in two files: the later row replaced the earlier, whose words stay.
                db.execute("DELETE FROM beads_fts WHERE rowid NOT IN (SELECT rowid FROM beads)")
            for _name, statement in _INDEXES:
                db.execute(statement)
            # Beads the log does not hold (they arrived while no index took them in) are
            # numbered above every id handed out; the others keep theirs.
            eventlog.number_all(db)
            db.executemany("INSERT OR IGNORE INTO agents VALUES (?)", [(n,) for n in self._named])
            db.executemany("INSERT OR REPLACE INTO invalid VALUES (?, ?)", self._invalid)
            db.execute("DELETE FROM meta WHERE key = 'head'")
            if self._config is not None:
                self.index._set_meta("config", json.dumps(self._config))
            db.execute("COMMIT")
            # The head last, on its own: sqlite makes the index's part of the commit visible
            # before the log's, and a reader that saw the head then could pass, for good, a
            # bead whose id was not visible yet. Without a head, it waits for the lock.
            self.index._set_meta("head", self.head.decode())
            if self.index._new_file:
                self.index.rebuilt_new = self.head
        except BaseException:
            self._abandon()
            raise
        finally:
            db.execute("PRAGMA cache_size = -2000")

    def _flush(self) -> None:
        """Insert the rows gathered so far, and hand their full-text rows to the writer."""
        if self._failed is not None:
            raise self._failed
        rows, self._rows = self._rows, []
        if not rows:
            return
        db = self.index.db
        # In key order: the few distinct labels make long ascending runs, where sqlite's
        # b-tree inserts stay on the pages it has in its cache.
        labels = sorted((label, row[0].id) for row in rows for label in row[0].labels)
        values = [bead_row(*row) for row in rows]
        with self._lock:
            first = db.execute(_LAST_ROWID).fetchone()[0]
            db.executemany("INSERT OR REPLACE INTO beads VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           values)  # fmt: skip
            db.executemany("INSERT OR IGNORE INTO labels VALUES (?, ?)", labels)
            last = db.execute(_LAST_ROWID).fetchone()[0]
        self._chunks.put((first, last))
        named = self._named
        for bead, *_ in rows:
            named.add(bead.sender)
            named.update(bead.cc)
            if bead.assignee:
                named.add(bead.assignee)
        self.count += len(rows)

    def _index_text(self) -> None:
        """The writer thread: make each chunk's full-text rows, until None comes. After a
        failure it only drains the queue; the failure is raised in the caller's thread."""
        db = self.index.db
        while (bounds := self._chunks.get()) is not None:
            if self._failed is not None:
                continue
            try:
                with self._lock:
                    db.execute(_FTS_CHUNK, bounds)
            except BaseException as exc:  # raised again in the caller's thread
                self._failed = exc

    def _stop_writer(self) -> None:
        if self._writer is not None:
            self._chunks.put(None)
            self._writer.join()
            self._writer = None

    def _abandon(self) -> None:
        self._stop_writer()  # the connection is the caller's alone again
        db = self.index.db
        rollback(db)
        db.execute("PRAGMA cache_size = -2000")
