"""Drain policy: what a session is handed when it asks for its agent's items.

`drain` follows git first (inbox/follow.py), takes the session's queue (inbox/queuemerge.py), then
decides: expired and moot items are dropped, the rest sorted by priority then age and capped
at `delivery.max_items` and at what fits in `hooks.max_context_chars` (priority 0 is never
deferred, but shortened to fit); each item goes out once per agent, to
whichever of its sessions drains first, claimed until the caller's output is out.
"""

from __future__ import annotations

import time
from collections import namedtuple

from beads.errors import NotFound
from inbox.items import ITEM_COLUMNS, Item, forget_settled, is_moot
from inbox.queue import SessionQueue, check_session

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3
    from collections.abc import Callable
    from pathlib import Path

    from beads.index.reader import IndexReader
    from inbox.broadcast import Broadcasts
    from inbox.deliveryconfig import DeliveryConfig
    from inbox.items import ItemTable
    from inbox.names import AgentNames
    from inbox.queuemerge import Queues
    from inbox.render import Sections
    from inbox.sessions import Sessions

# A session that claimed items and died before its output was out gets them again at its next
# drain; another session of the agent only after this long (it may still be writing them).
CLAIM_SECONDS = 60.0


# A namedtuple, not a dataclass: importing `dataclasses` would slow every hook.
class Drained(
    namedtuple("Drained", "session agent items text deferred dropped problems", defaults=(0, 0, ()))
):
    """What a drain delivered (`items`, a list of Item), its rendering (`text`), how many
    items it deferred or dropped, and the problems it had to set aside (`problems`)."""

    __slots__ = ()


class Drainer:
    """The consumer side of delivery: `drain`, `delivered`, `settle_moot`, `wait`."""

    def __init__(
        self,
        runtime: Path,
        write: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        *,
        settings: DeliveryConfig,
        names: AgentNames,
        items: ItemTable,
        sessions: Sessions,
        queues: Queues,
        broadcasts: Broadcasts,
        refresh: Callable[[], int],
        reader: Callable[[], IndexReader],
        sections: Sections,
    ) -> None:
        """`runtime`: the store's `.runtime/`; `write()`: a write transaction on the delivery
        database; the collaborators whose parts a drain takes (`refresh()` derives what git
        has that the database has not; `reader()` is the store's index, for moot items;
        `sections(type)` how a producer shows its items)."""
        self.runtime = runtime
        self.write = write
        self.settings = settings
        self.names = names
        self.items = items
        self.sessions = sessions
        self.queues = queues
        self.broadcasts = broadcasts
        self.refresh = refresh
        self.reader = reader
        self.sections = sections

    def drain(
        self,
        session: str,
        agent: str | None = None,
        *,
        max_priority: int = 4,
        limit: int | None = None,
        deliver: bool = True,
    ) -> Drained:
        """Hand `session` its agent's pending items (see DESIGN.md, Delivery).

        First derives the items of commits the database has not seen yet (`inbox.follow`).
        Takes the session's queue, merges it with the agent's undelivered items, drops expired
        and moot ones, sorts by priority then age, hands out at most `limit` (priority 0 is
        never deferred), once per agent, and no more than fits in `hooks.max_context_chars`
        (`inbox.render.fit`: the rest stay pending). `max_priority` lets the Stop hook take
        only the urgent ones.

        With `deliver=False` the items are only claimed for the session: the caller marks
        them delivered (`delivered`) once its output is written, so a drain killed before
        that hands them out again at the session's next drain (at-least-once; other sessions
        of the agent get them after CLAIM_SECONDS).
        """
        check_session(session)
        known = self.sessions.session(session)
        if agent is None:
            if known is None:
                raise NotFound(f"no session {session!r}; give the agent or register the session")
            agent = known.agent
        agent = self.names.own(agent)
        self.refresh()
        if (
            SessionQueue(self.runtime, session).empty()
            and not self.broadcasts.take(agent)
            and not self.items.has_pending(agent)
        ):
            return Drained(session=session, agent=agent, items=[], text="")  # the common case
        settings = self.settings
        limit = limit if limit is not None else settings.setting("max_items")
        cap = settings.context_cap()
        from inbox.render import fit  # lazy: a hook with nothing pending renders nothing

        keep, keep_keys = settings.setting("keep_delivered"), settings.keep_keys()
        problems = self.queues.take(session, agent)
        settled = self.settle_moot(agent)
        now = time.time()
        state = "delivered" if deliver else "delivering"
        with self.write() as db:
            pending = self.items.sound(
                db.execute(
                    f"SELECT {ITEM_COLUMNS} FROM items WHERE agent = ? AND (state = 'pending' "
                    "OR (state = 'delivering' AND (session = ? OR settled_at < ?))) "
                    "ORDER BY priority, created_at, id",
                    (agent, session, now - CLAIM_SECONDS),
                )
            )
            dropped: list[tuple[str, int]] = []
            live: list[Item] = []
            for item in pending:
                if item.expired(now):
                    dropped.append(("expired", item.id or 0))
                elif item.priority <= max_priority:
                    live.append(item)
            urgent = [item for item in live if item.priority == 0]
            rest = [item for item in live if item.priority != 0]
            chosen, text = fit(urgent + rest[: max(0, limit - len(urgent))], cap, self.sections)
            db.executemany(
                "UPDATE items SET state = ?, settled_at = ? WHERE id = ?",
                [(why, now, item_id) for why, item_id in dropped],
            )
            db.executemany(
                "UPDATE items SET state = ?, session = ?, settled_at = ? WHERE id = ?",
                [(state, session, now, item.id) for item in chosen],
            )
            forget_settled(db, now - keep, now - keep_keys, agent)
        for item in chosen:
            item.state, item.session, item.settled_at = state, session, now
        return Drained(
            session=session,
            agent=agent,
            items=chosen,
            text=text,
            deferred=len(live) - len(chosen),
            dropped=len(dropped) + settled,
            problems=problems + self.items.take_problems(),
        )

    def delivered(self, drained: Drained) -> None:
        """Mark the items of a `drain(deliver=False)` delivered: its output is out."""
        if not drained.items:
            return
        now = time.time()
        with self.write() as db:
            db.executemany(
                "UPDATE items SET state = 'delivered', settled_at = ? "
                "WHERE id = ? AND state = 'delivering' AND session = ?",
                [(now, item.id, drained.session) for item in drained.items],
            )
        for item in drained.items:
            item.state, item.settled_at = "delivered", now

    def settle_moot(self, agent: str) -> int:
        """Settle `agent`'s undelivered items whose referenced bead now matches a moot
        condition (mail read or archived since); returns how many. Every reader of pending
        items calls it first (drain, `wait`, `gc inbox list`), so a moot item is never shown
        as pending nor wakes anyone."""
        agent = self.names.own(agent)
        moot = [
            item.key
            for item in self.items.items(agent, ("pending", "delivering"))
            if item.ref_bead and item.moot_when and self._is_moot(item)
        ]
        return self.items.settle(agent, moot) if moot else 0

    def _is_moot(self, item: Item) -> bool:
        bead = self.reader().get(item.ref_bead or "")
        return bead is not None and is_moot(bead.to_dict(), item.moot_when or [])

    def wait(self, agent: str, timeout: float, poll: float = 0.05) -> bool:
        """Block until `agent` has a pending item (True) or `timeout` seconds pass (False).
        Raise `DatabaseReplaced` when the database file is removed or replaced meanwhile: a
        push then goes to the new file, which this connection never sees."""
        from beads.index.dbfile import file_id
        from beads.waiting import wait_until
        from inbox.database import DatabaseReplaced

        agent = self.names.own(agent)
        has_pending = self.items.has_pending
        path = self.runtime / "delivery.sqlite3"
        known = getattr(self.items.db, "file_id", None)

        def pending() -> bool | None:
            if known is not None and file_id(path) != known:
                raise DatabaseReplaced(f"{path.name} was removed or replaced while waiting")
            self.refresh()  # mail committed meanwhile (a crashed send, a push) wakes it too
            self.broadcasts.take(agent)
            if not has_pending(agent):
                return None
            aside = len(self.items.problems)
            if self.settle_moot(agent) or len(self.items.problems) > aside:
                # What counted may be moot now, or a row set aside (`ItemTable.sound`).
                return True if has_pending(agent) else None
            return True

        return wait_until(pending, timeout, poll) is not None
