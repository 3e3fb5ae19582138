"""Waiting on work threads: `wait_reply` (a reply in one thread) and `watch` (news in an
agent's threads, or a lease that expires), from an event cursor.

Waiting checks the branch ref between short sleeps (`beads.waiting`) and, once it moved,
reads the index's event ids (`beads.index.events`): nothing is polled through git objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from beads.errors import InvalidInput, NotFound
from beads.index import events
from beads.records.record import check_agent
from beads.records.times import now_stamp
from beads.waiting import BranchWatch, wait_until
from mail.threads.model import (
    HELD,
    MESSAGE,
    POOL,
    REPLY_KINDS,
    THREAD,
    LeaseConflict,
    Thread,
    ThreadMessage,
    Wake,
    check_kind,
    check_seconds,
    check_status,
)
from mail.threads.queries import ThreadQueries
from mail.threads.rules import holder_before


class ThreadWaits(ThreadQueries):
    """The reads of the work threads of one store, and waiting for what changes them."""

    def last_event(self) -> int:
        """The highest event id handed out: a cursor meaning "from now on"."""
        self._fresh()
        return events.last(self.store.index)

    def wait_reply(
        self,
        thread: str,
        *,
        after_event: int | None = None,
        after_message: str | None = None,
        kinds: Iterable[str] = REPLY_KINDS,
        timeout: float = 60.0,
        lease_token: str | None = None,
    ) -> Wake:
        """Block until the thread has a message of one of `kinds` after the cursor (an event
        id, or a message id, which means the same on every machine; default: now), or
        `timeout` seconds pass (`woke` False). With `lease_token` (a holder waiting for an
        answer), the wait ends in LeaseConflict once the thread no longer carries that lease
        (claimed by another, released, finished or cancelled), rather than waiting on.

        A `result` wakes the wait only when its sender held the thread's lease as it was
        written (`mail.threads.rules.holder_before`): anyone else's is passed over, as
        though it were not a result."""
        wanted = tuple(check_kind(k) for k in kinds)
        bead = self._thread_bead(thread)
        thread_id = bead.id
        cursor = self._cursor(after_event, after_message, thread_id)
        branch = BranchWatch(self.store.root)
        state = {"cursor": cursor}
        if lease_token is not None:
            _still_held(Thread.from_bead(bead), lease_token)

        def check() -> Wake | None:
            if not branch.moved():
                return None
            self._fresh()
            for seq, bead in events.after(
                self.store.index, state["cursor"], thread=thread_id, type=MESSAGE
            ):
                state["cursor"] = seq
                message = ThreadMessage.from_bead(bead, seq)
                if message.kind in wanted and self._counts(message):
                    return Wake(True, seq, message=message, messages=[message])
            if lease_token is not None:
                _still_held(Thread.from_bead(self._thread_bead(thread_id)), lease_token)
            return None

        found = wait_until(check, check_seconds(timeout, minimum=0.0))
        return found or Wake(False, state["cursor"])

    def watch(
        self,
        *,
        agent: str | None = None,
        statuses: Iterable[str] | None = None,
        after_event: int | None = None,
        timeout: float = 60.0,
    ) -> Wake:
        """Block until a thread of `agent` (created by, assigned to it, or open to all; any
        thread without `agent`) in one of `statuses` gets a message after the cursor, or a
        lease of one expires (claimable again), or `timeout` seconds pass."""
        if agent is not None:
            check_agent(agent)
        wanted = None if statuses is None else {check_status(s) for s in statuses}
        cursor = self._cursor(after_event, None)
        branch = BranchWatch(self.store.root)
        state: dict[str, Any] = {"cursor": cursor, "leases": []}
        started = now_stamp()

        def mine(thread: Thread) -> bool:
            if agent is not None and not (
                thread.pool or agent in (thread.created_by, thread.assigned_to)
            ):
                return False
            return wanted is None or thread.status in wanted

        def check() -> Wake | None:
            now = now_stamp()
            if branch.moved():
                self._fresh()
                news = events.after(self.store.index, state["cursor"], type=MESSAGE)
                if news:
                    state["cursor"] = news[-1][0]
                ids = {bead.thread for _, bead in news if bead.thread}
                threads = {
                    b.id: Thread.from_bead(b)
                    for b in self.store.get_many(ids).values()
                    if b.type == THREAD
                }
                hits = [
                    ThreadMessage.from_bead(bead, seq)
                    for seq, bead in news
                    if bead.thread in threads and mine(threads[bead.thread])
                ]
                if hits:
                    shown = {m.thread_id: threads[m.thread_id] for m in hits}
                    return Wake(
                        True,
                        state["cursor"],
                        message=hits[0],
                        messages=hits,
                        threads=list(shown.values()),
                    )
                state["leases"] = self._leases(agent)
            expired = [
                t
                for t in state["leases"]
                if t.lease is not None and started < t.lease.expires_at <= now
            ]
            if expired:
                return Wake(True, state["cursor"], threads=expired)
            return None

        found = wait_until(check, check_seconds(timeout, minimum=0.0))
        return found or Wake(False, state["cursor"])

    def _counts(self, message: ThreadMessage) -> bool:
        """Whether `message` may wake a waiter: any kind but `result`, and a result sent by
        the agent holding the lease when it came (read from the thread's events)."""
        if message.kind != "result" or message.event_id is None:
            return True
        _thread, history = self.show(message.thread_id)
        return holder_before(history, message.event_id) == message.from_agent

    def _fresh(self) -> None:
        """Bring the index to the branch (event ids are read from it directly)."""
        self.store.get_many(())

    def _leases(self, agent: str | None) -> list[Thread]:
        """Open threads (of `agent`: assigned to it, created by it, or open to all) holding a
        lease: what may expire while one watches."""
        if agent is None:
            beads = self.store.list(type=THREAD, status="open")
        else:
            beads = self.store.list(type=THREAD, status="open", assignee=agent, order="priority")
            beads += self.store.list(type=THREAD, status="open", sender=agent)
            beads += [b for b in self.store.list(label=POOL, order="priority") if b.type == THREAD]
        threads = {b.id: Thread.from_bead(b) for b in beads}
        return [t for t in threads.values() if t.lease is not None and t.status in HELD]

    def _cursor(
        self, after_event: int | None, after_message: str | None, thread_id: str | None = None
    ) -> int:
        """The event id a wait starts after; `after_message` must be a message of the thread
        `thread_id` (a thread's own id, or another thread's message, is no cursor of it)."""
        if after_event is not None and after_message is not None:
            raise InvalidInput("give --after-event or --after-message, not both")
        if after_message is not None:
            message_id = self.store.resolve(after_message)
            bead = self.store.get(message_id)
            if bead.type != MESSAGE or bead.thread != thread_id:
                raise InvalidInput(
                    f"--after-message {after_message} is not a message of thread {thread_id}"
                )
            found = events.ids_of(self.store.index, [message_id])
            if message_id not in found:
                raise NotFound(f"no event for message {after_message}")
            return found[message_id]
        if after_event is not None:
            if isinstance(after_event, bool) or not isinstance(after_event, int) or after_event < 0:
                raise InvalidInput(
                    f"--after-event must be a whole number >= 0, not {after_event!r}"
                )
            return after_event
        return self.last_event()


def _still_held(thread: Thread, token: str) -> None:
    """LeaseConflict unless `thread` still carries the lease of `token` (an expired one
    nobody took over counts)."""
    lease = thread.lease
    if lease is not None and lease.token == token and thread.status in HELD:
        return
    if lease is None:
        why = f"it is {thread.status}, with no lease"
    else:
        why = f"it is claimed by {lease.agent} until {lease.expires_at} under another lease"
    raise LeaseConflict(
        f"thread {thread.thread_id} is no longer held under this lease: {why}",
        holder=lease.agent if lease else None,
        status=thread.status,
    )
