"""Reading work threads: one thread, its messages, an agent's candidates, a filtered list.

Reads change nothing and take no lock; they go through the store's index (`Store.list`,
`Store.get`) and read event ids from it (`beads.index.events`). `ThreadQueries` is the base of
`Threads` (mail.threads.api), which adds waiting and writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from beads.errors import NotFound
from beads.index import events
from beads.records.record import Bead, check_agent, expect_type
from beads.records.times import now_stamp
from beads.store import Store
from mail.threads.model import (
    HELD,
    MESSAGE,
    POOL,
    TERMINAL,
    THREAD,
    Thread,
    ThreadMessage,
    check_status,
)


class ThreadQueries:
    """The reads of the work threads of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, thread: str) -> Thread:
        """The thread with this id (or unambiguous prefix); NotFound if none."""
        return Thread.from_bead(self._thread_bead(thread))

    def show(self, thread: str) -> tuple[Thread, list[ThreadMessage]]:
        """The thread and its messages in event order."""
        bead = self._thread_bead(thread)
        beads = self.store.list(type=MESSAGE, thread=bead.id)
        numbers = events.ids_of(self.store.index, [b.id for b in beads])
        messages = [ThreadMessage.from_bead(b, numbers.get(b.id)) for b in beads]
        messages.sort(key=_event_order)
        return Thread.from_bead(bead), messages

    def fetch(
        self,
        agent: str,
        *,
        statuses: Iterable[str] = ("pending",),
        limit: int | None = 20,
        unread: bool = False,
    ) -> list[Thread]:
        """Candidate threads for `agent`, changing nothing: its own and those open to every
        agent, in the given statuses (a thread whose lease expired counts as pending: it is
        claimable), most urgent and oldest first. `unread`: only threads with unread mail
        for `agent`."""
        check_agent(agent)
        wanted = tuple(check_status(s) for s in statuses)
        now = now_stamp()
        found: dict[str, Thread] = {}
        # Two indexed reads: the agent's threads (finished ones are closed beads, left out
        # unless asked for) and those open to every agent (the `pool` label, which a thread
        # loses when it finishes). What is read is the candidates, not the store. In
        # priority order: ordered by creation, sqlite walks every open thread instead.
        bead_status = None if set(wanted) & set(TERMINAL) else "open"
        candidates = self.store.list(
            type=THREAD, assignee=agent, status=bead_status, order="priority"
        )
        pool = self.store.list(label=POOL, order="priority")
        candidates += [b for b in pool if b.type == THREAD]
        for bead in candidates:
            thread = Thread.from_bead(bead)
            stale = thread.status in HELD and thread.claimable(now)
            if thread.status in wanted or ("pending" in wanted and stale):
                found[thread.thread_id] = thread
        threads = list(found.values())
        if unread:
            from mail.unread import unread_filters

            mailed = {b.thread for b in self.store.list(**unread_filters(agent))}
            threads = [t for t in threads if t.thread_id in mailed]
        threads.sort(key=lambda t: (t.priority_level, t.created_at, t.thread_id))
        return threads if limit is None else threads[:limit]

    def list(
        self,
        *,
        statuses: Iterable[str] | None = None,
        created_by: str | None = None,
        assigned_to: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[Thread]:
        """Threads by filters (None = any), newest first; `agent` matches either side."""
        wanted = None if statuses is None else {check_status(s) for s in statuses}
        if agent is not None:
            check_agent(agent)
        bead_status = None  # terminal threads are closed beads: let the index narrow
        if wanted is not None and wanted <= set(TERMINAL):
            bead_status = "closed"
        elif wanted is not None and not wanted & set(TERMINAL):
            bead_status = "open"
        beads = self.store.list(
            type=THREAD,
            status=bead_status,
            sender=created_by,
            assignee=assigned_to,
            descending=True,
        )
        threads = []
        for bead in beads:
            thread = Thread.from_bead(bead)
            if wanted is not None and thread.status not in wanted:
                continue
            if agent is not None and agent not in (thread.created_by, thread.assigned_to):
                continue
            threads.append(thread)
            if limit is not None and len(threads) >= limit:
                break
        return threads

    def _thread_bead(self, ref: str) -> Bead:
        return thread_bead(self.store.get, ref)


def thread_bead(get: Callable[[str], Bead], ref: str) -> Bead:
    """The thread bead `ref` names, read by `get` (the store's, or a batch's under the lock)."""
    try:
        bead = get(ref)
    except NotFound:
        raise NotFound(f"no thread {ref}") from None
    return expect_type(bead, THREAD)


def _event_order(message: ThreadMessage) -> tuple[Any, ...]:
    return (message.event_id is None, message.event_id or 0, message.created_at, message.message_id)
