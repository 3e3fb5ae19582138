"""`Delivery`: the delivery databases of one store, and the one object callers use.

`.runtime/delivery.sqlite3` holds items, durable entries and the follow watermark: the source
of truth for delivery, separate from the derived bead index (an index rebuild never touches
it). `.runtime/sessions.sqlite3` holds sessions and nudges. Every change is one sqlite
transaction, taking the database's write lock up front.

`Delivery` is a facade over modules named for their job:

- inbox/items.py: the item, its checks, push (with nudges), listing, settling, reaping;
- inbox/sessions.py: sessions as the hooks report them;
- inbox/config.py: `delivery.*` settings and recipients (agents, rigs, `all`);
- inbox/broadcast.py: items for `all` or a rig, standing for agents that start later;
- inbox/merge.py: session queues taken into the database;
- inbox/drain.py: the drain policy (what a session is handed), `wait`;
- inbox/follow.py: items derived from the store's commits; inbox/producers.py: who derives;
- inbox/database.py: opening, upgrading and transactions; what sqlite's errors mean.

Items of mail, decisions and gates are derived from git by their producers, which register
with `inbox.producers`; a Python program using `Delivery` directly calls
`gates.register_producers()` once first, or its drains derive nothing from git
(and leave that to the next process that knows the producers: see inbox/producers.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from beads import files
from beads.errors import StorageError
from beads.location import find_store
from beads.reader import IndexReader, branch_head
from inbox.broadcast import BroadcastMixin
from inbox.config import ConfigMixin
from inbox.database import MIGRATIONS, SCHEMA, SCHEMA_VERSION, connect, transaction
from inbox.drain import Drained, DrainMixin
from inbox.items import ItemsMixin
from inbox.merge import MergeMixin
from inbox.sessions import Session, SessionsMixin

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3
    from typing import Any

__all__ = ["Delivery", "Drained", "Session"]


class Delivery(ItemsMixin, BroadcastMixin, SessionsMixin, ConfigMixin, MergeMixin, DrainMixin):
    """The delivery databases of one store (`root` is the `.beads/` directory)."""

    def __init__(self, root: Path, *, config: Callable[[], dict[str, Any]] | None = None) -> None:
        """`config`: where the caller already has the store's configuration (`Store.config`
        is cached per commit), read anew at each use so a long-lived Delivery sees changes."""
        self.root = root
        self.runtime = root / ".runtime"
        files.make_dirs(str(root), str(self.runtime))
        self._config_source = config
        self._config: dict[str, Any] | None = None
        self._reader: IndexReader | None = None
        self._sessions_db: sqlite3.Connection | None = None
        self.db = connect(
            self.runtime / "delivery.sqlite3",
            "NORMAL",
            SCHEMA,
            "entries",
            version=SCHEMA_VERSION,
            migrations=MIGRATIONS,
            setup=self._start_following,
        )

    def _start_following(self, db: sqlite3.Connection) -> None:
        # A new or upgraded database follows the branch from its current commit: what is
        # already in the store was announced by the code that wrote it (or never will be).
        head = branch_head(self.root)
        db.execute(
            "INSERT OR REPLACE INTO follow VALUES (1, ?)", (head.decode() if head else None,)
        )

    @classmethod
    def open(cls, beads_dir: str | Path | None = None) -> Delivery:
        """The delivery database of the store found as `Store.open` finds it."""
        return cls(find_store(beads_dir))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self.db.close()
        if self._sessions_db is not None:
            self._sessions_db.close()

    @property
    def reader(self) -> IndexReader:
        """The store's index, opened once per Delivery (caught up with git when behind)."""
        if self._reader is None:
            self._reader = IndexReader(self.root)
        return self._reader

    def fresh_reader(self) -> IndexReader:
        """`reader`, opened again (so caught up) when the branch moved since it was opened."""
        if self._reader is not None and not self._reader.fresh():
            self._reader.close()
            self._reader = None
        return self.reader

    def __enter__(self) -> Delivery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction on the items database, holding its write lock from the start."""
        return transaction(self.db, "delivery.sqlite3")

    def note_fault(self, line: str) -> None:
        """Append a fault that must not fail the caller (a nudge, following git) to
        `.runtime/delivery.log`, with the time."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            fd = files.open_file(str(self.root), str(self.runtime / "delivery.log"))
            try:
                os.write(fd, f"{stamp} {line}\n".encode())
            finally:
                os.close(fd)
        except (OSError, StorageError):
            pass

    def reconcile(self, agent: str) -> None:
        """Run every producer's reconciler for `agent` (`inbox.producers`: they record the
        items they know of, idempotent by key); a failing one is logged, the others run."""
        from inbox import producers

        for reconciler in producers.reconcilers():
            try:
                reconciler(self, agent)
            except Exception as exc:  # noqa: BLE001 - logged; the next heartbeat tries again
                self.note_fault(f"reconcile failed: {type(exc).__name__}: {exc}")

    def heartbeat(self, agent: str, *, force: bool = False) -> bool:
        """Reconcile every producer for `agent` and reap (`reap`), at most once per
        `delivery.reconcile_interval` for the agent (any hook may call it: one `stat` when it
        is not due), or now with `force` (SessionStart); True if it ran. The interval counts
        from the agent's last heartbeat, or from its first hook when it has none yet (a
        session begins with SessionStart, which reconciles)."""
        mark = self.runtime / "heartbeat" / agent.replace("/", "%2F")
        now = time.time()
        try:
            age: float | None = now - mark.stat().st_mtime
        except FileNotFoundError:
            age = None
        due = force or (age is not None and age >= self.setting("reconcile_interval"))
        if not due and age is not None:
            return False
        # Marked before the work: a second hook meanwhile does not run it again.
        files.create(str(self.root), str(mark))
        os.utime(mark, (now, now))
        if not due:
            return False
        self.reconcile(agent)
        self.reap()
        return True

    def follow(self) -> int:
        """Derive the items of commits this database has not seen (`inbox.follow`); returns
        how many were new. Does nothing until the producers are declared (`inbox.producers`).
        A fault there is logged and never keeps a drain from delivering what it already has."""
        from inbox.follow import follow

        try:
            return follow(self)
        except Exception as exc:  # noqa: BLE001 - logged; the next drain tries again
            self.note_fault(f"following git failed: {type(exc).__name__}: {exc}")
            return 0
