"""Work threads over a bead store: `Threads(store)`, the operations of seed 002.

Every change is one commit through the mail layer's producer path (`followed_batch`, under the
store's write lock), and writes at least one message bead in the thread: the user's message
(task, progress, question, answer, result, control) and, when the thread's status or lease
changes, an `event` message whose payload says what changed. A renewal only moves the lease's
`expires_at`. A message with a recipient is that agent's mail as well (`BeadMail.compose`):
it shows in `gc mail inbox` and is announced like any mail.

Claims are decided under the write lock from the thread as git holds it (`Batch.get`), so
two processes never both get a lease. Waiting (`watch`, `wait_reply`) checks the branch ref
between short sleeps (`beads.waiting`) and reads the index's event ids (`beads.events`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from beads import events
from beads.errors import InvalidInput, NotFound
from beads.record import Bead, check_agent, expect_type
from beads.store import Batch, Store
from beads.times import now_stamp, stamp_at
from beads.waiting import BranchWatch, wait_until
from inbox.follow import Change, followed_batch, open_delivery
from mail.threads.model import (
    DEFAULT_LEASE_SECONDS,
    HELD,
    KINDS,
    MESSAGE,
    POOL,
    REPLY_KINDS,
    TERMINAL,
    THREAD,
    InvalidTransition,
    Lease,
    LeaseConflict,
    Thread,
    ThreadMessage,
    Wake,
    check_status,
    priority_level,
    summary_line,
)

if TYPE_CHECKING:
    from inbox.delivery import Delivery
    from mail.beadmail import BeadMail

_SHORT = 60


class Threads:
    """Work threads of one store: create, claim, report, wait, finish (seed 002)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._mail: BeadMail | None = None
        self._delivery: Delivery | None = None

    @property
    def mail(self) -> BeadMail:
        """The store's mail: a thread message with a recipient is that agent's mail too.
        Loaded at first use: a claim or a status change sends no mail."""
        if self._mail is None:
            from mail.beadmail import BeadMail

            self._mail = BeadMail(self.store)
        return self._mail

    def close(self) -> None:
        """Close the delivery database this API opened (the store stays open)."""
        if self._delivery is not None:
            self._delivery.close()
            self._delivery = None
        if self._mail is not None:
            self._mail.close()

    # -- writing ----------------------------------------------------------------------------

    def send(
        self,
        sender: str,
        *,
        to: str | None = None,
        subject: str | None = None,
        thread: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
        kind: str = "task",
        summary: str | None = None,
        body: str = "",
        payload: dict[str, Any] | None = None,
        priority: str | int = "normal",
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> tuple[Thread, ThreadMessage]:
        """Start a thread (status pending) with its first message, or, with `thread`, add a
        message to one. A thread made without `to` is open to every agent (`fetch`)."""
        check_agent(sender, what="sender")
        if to is not None:
            check_agent(to, what="recipient")
        _check_kind(kind)
        level = priority_level(priority)
        if thread is not None:
            if subject is not None or run_id is not None or task_id is not None:
                raise InvalidInput("--subject, --run and --task are for a new thread, not --thread")
            with self._batch() as (batch, changes):
                current = self._thread(batch, thread)
                made = self._message(
                    batch,
                    changes,
                    current,
                    sender,
                    to,
                    kind,
                    summary_line(summary, current.subject),
                    body,
                    payload,
                    artifacts,
                )
                batch.message = _line("send", current, sender, made.title)
            return current, self._shown(made)
        if subject is None or not subject.strip():
            raise InvalidInput("a new thread needs --subject (or --thread to add to one)")
        title = summary_line(subject, "")
        meta: dict[str, Any] = {"status": "pending"}
        for key, value in (("run_id", run_id), ("task_id", task_id)):
            if value is not None:
                meta[key] = _check_name(value, key)
        labels = [POOL] if to is None else []
        with self._batch() as (batch, changes):
            bead = batch.create(
                THREAD,
                title,
                "",
                assignee=to,
                priority=level,
                sender=sender,
                meta=meta,
                labels=labels,
            )
            current = Thread.from_bead(bead)
            made = self._message(
                batch,
                changes,
                current,
                sender,
                to,
                kind,
                summary_line(summary, title),
                body,
                payload,
                artifacts,
            )
            batch.message = _line("new", current, sender, title)
        return current, self._shown(made)

    def claim(
        self, agent: str, thread: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS
    ) -> Lease:
        """Take the thread's lease: atomic under the write lock, refused (LeaseConflict) while
        another lease is live; an expired one may be taken over."""
        check_agent(agent)
        seconds = _check_seconds(lease_seconds)
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            if current.status in TERMINAL:
                raise _invalid(current, "claim")
            now = now_stamp()
            held = current.lease
            if held is not None and held.live(now):
                raise LeaseConflict(
                    f"thread {current.thread_id} is claimed by {held.agent} until "
                    f"{held.expires_at}",
                    holder=held.agent,
                    expires_at=held.expires_at,
                )
            if current.status == "pending":
                change = {"event": "claimed", "from": "pending", "to": "claimed"}
            elif current.status in HELD:  # a lease that was let expire (or was lost)
                change = {"event": "claimed", "from": current.status, "to": "claimed"}
                if held is not None:
                    change["expired_lease"] = held.to_json()
            else:
                raise _invalid(current, "claim")
            lease = Lease(agent, os.urandom(8).hex(), now, stamp_at(time.time() + seconds))
            change["lease"] = lease.to_json()
            self._change(
                batch,
                changes,
                current,
                agent,
                change,
                status="claimed",
                assignee=agent,
                meta={"lease": lease.to_json()},
            )
            batch.message = _line("claim", current, agent, f"lease until {lease.expires_at}")
        self._confirm(current.thread_id, lease)
        return lease

    def _confirm(self, thread_id: str, lease: Lease) -> None:
        """With a remote, a claim stands once the remote accepted it: a sync whose merge gave
        the thread to another machine's claim (one the remote accepted first) is a LeaseConflict."""
        from beads.autosync import has_remote

        if not has_remote(self.store.root / ".git"):
            return  # one machine: the commit under the write lock is the claim
        from beads.sync import sync

        sync(self.store)
        held = Thread.from_bead(self._thread_bead(thread_id)).lease
        if held is None or held.token != lease.token:
            raise LeaseConflict(
                f"thread {thread_id} was claimed first on another machine"
                + (f" by {held.agent} until {held.expires_at}" if held else ""),
                holder=held.agent if held else None,
                expires_at=held.expires_at if held else None,
            )

    def renew(
        self, agent: str, thread: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS
    ) -> Lease:
        """Move the holder's lease's `expires_at` (no message: a renewal is not an event)."""
        check_agent(agent)
        seconds = _check_seconds(lease_seconds)
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            if current.status not in HELD:
                raise _invalid(current, "renew")
            held = self._holder(current, agent)
            lease = Lease(agent, held.token, held.claimed_at, stamp_at(time.time() + seconds))
            bead = batch.update(current.thread_id, meta={"lease": lease.to_json()})
            changes.append(Change(bead))
            batch.message = _line("renew", current, agent, f"lease until {lease.expires_at}")
        return lease

    def release(self, agent: str, thread: str, *, reason: str | None = None) -> Thread:
        """Give the lease back: the thread is pending (claimable) again."""
        check_agent(agent)
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            if current.status not in HELD:
                raise _invalid(current, "release")
            self._holder(current, agent)
            change = {"event": "released", "from": current.status, "to": "pending"}
            bead = self._change(
                batch,
                changes,
                current,
                agent,
                change,
                status="pending",
                unset=("lease",),
                summary=reason,
            )
            batch.message = _line("release", current, agent, reason or "")
        return Thread.from_bead(bead)

    def update(
        self,
        agent: str,
        thread: str,
        *,
        status: str | None = None,
        summary: str | None = None,
        body: str = "",
        payload: dict[str, Any] | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> tuple[Thread, ThreadMessage]:
        """Report on a held thread: a `progress` message, or with `status` blocked a
        `question` (to the thread's creator); a status change also writes its event."""
        check_agent(agent)
        if status is not None:
            check_status(status, ("in_progress", "blocked"), "--status")
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            allowed = {
                None: HELD,
                "in_progress": ("claimed", "in_progress", "blocked"),
                "blocked": ("in_progress", "blocked"),
            }[status]
            if current.status not in allowed:
                raise _invalid(current, f"update --status {status}" if status else "update")
            self._holder(current, agent)
            kind = "question" if status == "blocked" else "progress"
            to = _other(current, agent) if kind == "question" else None
            text = summary_line(summary, f"{kind}: {current.subject}")
            made = self._message(
                batch, changes, current, agent, to, kind, text, body, payload, artifacts
            )
            bead = None
            if status is not None and status != current.status:
                change = {"event": "status", "from": current.status, "to": status}
                bead = self._change(batch, changes, current, agent, change, status=status)
            batch.message = _line("update", current, agent, text)
        return (Thread.from_bead(bead) if bead else current), self._shown(made)

    def reply(
        self,
        sender: str,
        thread: str,
        *,
        to: str | None = None,
        kind: str = "answer",
        summary: str | None = None,
        body: str = "",
        payload: dict[str, Any] | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> ThreadMessage:
        """A message in the thread, to `to` (default: the other side: the assignee when the
        creator writes, else the creator). Changes no status."""
        check_agent(sender, what="sender")
        if to is not None:
            check_agent(to, what="recipient")
        _check_kind(kind)
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            to = to if to is not None else _other(current, sender)
            text = summary_line(summary, f"{kind}: {current.subject}")
            made = self._message(
                batch, changes, current, sender, to, kind, text, body, payload, artifacts
            )
            batch.message = _line("reply", current, sender, text)
        return self._shown(made)

    def done(self, agent: str, thread: str, **result: Any) -> tuple[Thread, ThreadMessage]:
        """Finish a held thread: a `result` message (to the creator), status done."""
        return self._finish(agent, thread, "done", **result)

    def fail(self, agent: str, thread: str, **result: Any) -> tuple[Thread, ThreadMessage]:
        """End a held thread as failed: a `result` message (to the creator), status failed."""
        return self._finish(agent, thread, "failed", **result)

    def _finish(
        self,
        agent: str,
        thread: str,
        status: str,
        *,
        summary: str | None = None,
        body: str = "",
        payload: dict[str, Any] | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> tuple[Thread, ThreadMessage]:
        check_agent(agent)
        verb = "done" if status == "done" else "fail"
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            if current.status not in HELD:
                raise _invalid(current, "finish (done)" if verb == "done" else "fail")
            self._holder(current, agent)
            text = summary_line(summary, f"{status}: {current.subject}")
            to = _other(current, agent)
            made = self._message(
                batch, changes, current, agent, to, "result", text, body, payload, artifacts
            )
            change = {"event": "status", "from": current.status, "to": status}
            bead = self._change(
                batch, changes, current, agent, change, status=status, unset=("lease",)
            )
            batch.message = _line(verb, current, agent, text)
        return Thread.from_bead(bead), self._shown(made)

    def cancel(
        self,
        agent: str,
        thread: str,
        *,
        reason: str | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> Thread:
        """Cancel a thread that is not finished (anyone may: a leader's override)."""
        check_agent(agent)
        with self._batch() as (batch, changes):
            current = self._thread(batch, thread)
            if current.status in TERMINAL:
                raise _invalid(current, "cancel")
            change: dict[str, Any] = {"event": "status", "from": current.status, "to": "cancelled"}
            if current.lease is not None:
                change["lease"] = current.lease.to_json()
            bead = self._change(
                batch,
                changes,
                current,
                agent,
                change,
                status="cancelled",
                unset=("lease",),
                summary=reason,
                artifacts=artifacts,
            )
            batch.message = _line("cancel", current, agent, reason or "")
        return Thread.from_bead(bead)

    # -- reading ----------------------------------------------------------------------------

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
            from mail.beadmail import unread_filters

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

    # -- waiting ----------------------------------------------------------------------------

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
    ) -> Wake:
        """Block until the thread has a message of one of `kinds` after the cursor (an event
        id, or a message id, which means the same on every machine; default: now), or
        `timeout` seconds pass (`woke` False)."""
        wanted = tuple(_check_kind(k) for k in kinds)
        thread_id = self._thread_bead(thread).id
        cursor = self._cursor(after_event, after_message)
        branch = BranchWatch(self.store.root)
        state = {"cursor": cursor}

        def check() -> Wake | None:
            if not branch.moved():
                return None
            self._fresh()
            for seq, bead in events.after(
                self.store.index, state["cursor"], thread=thread_id, type=MESSAGE
            ):
                state["cursor"] = seq
                message = ThreadMessage.from_bead(bead, seq)
                if message.kind in wanted:
                    return Wake(True, seq, message=message, messages=[message])
            return None

        found = wait_until(check, _check_seconds(timeout, minimum=0.0))
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

        found = wait_until(check, _check_seconds(timeout, minimum=0.0))
        return found or Wake(False, state["cursor"])

    # -- helpers ----------------------------------------------------------------------------

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

    def _cursor(self, after_event: int | None, after_message: str | None) -> int:
        if after_event is not None and after_message is not None:
            raise InvalidInput("give --after-event or --after-message, not both")
        if after_message is not None:
            message_id = self.store.resolve(after_message)
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

    def _batch(self) -> Any:
        if self._delivery is None:  # opened once, kept: a worker writes many times
            self._delivery = open_delivery(self.store)
        return followed_batch(self.store, self._delivery)

    def _thread_bead(self, ref: str) -> Bead:
        try:
            bead = self.store.get(ref)
        except NotFound:
            raise NotFound(f"no thread {ref}") from None
        return expect_type(bead, THREAD)

    def _thread(self, batch: Batch, ref: str) -> Thread:
        """The thread as git holds it now (under the write lock): what a write decides on."""
        try:
            bead = batch.get(ref)
        except NotFound:
            raise NotFound(f"no thread {ref}") from None
        return Thread.from_bead(expect_type(bead, THREAD))

    @staticmethod
    def _holder(thread: Thread, agent: str) -> Lease:
        """The lease `agent` holds on `thread` (an expired one nobody took over counts)."""
        lease = thread.lease
        if lease is None:
            raise LeaseConflict(
                f"thread {thread.thread_id} is not claimed: claim it first", holder=None
            )
        if lease.agent != agent:
            raise LeaseConflict(
                f"thread {thread.thread_id} is claimed by {lease.agent}, not {agent}",
                holder=lease.agent,
                expires_at=lease.expires_at,
            )
        return lease

    def _message(
        self,
        batch: Batch,
        changes: list[Change],
        thread: Thread,
        sender: str,
        to: str | None,
        kind: str,
        summary: str,
        body: str,
        payload: dict[str, Any] | None,
        artifacts: Sequence[dict[str, Any]],
    ) -> Bead:
        meta: dict[str, Any] = {"kind": kind}
        if payload:
            meta["payload"] = payload
        if artifacts:
            meta["artifacts"] = list(artifacts)
        priority = thread.priority_level
        if to is not None and to != sender:
            bead = self.mail.compose(
                batch,
                sender,
                to,
                summary,
                body,
                priority=priority,
                thread=thread.thread_id,
                meta=meta,
            )
        else:  # thread history only: nobody's mail
            bead = batch.create(
                MESSAGE,
                summary,
                body,
                priority=priority,
                sender=sender,
                thread=thread.thread_id,
                meta=meta,
            )
        changes.append(Change(bead))
        return bead

    def _change(
        self,
        batch: Batch,
        changes: list[Change],
        thread: Thread,
        agent: str,
        change: dict[str, Any],
        *,
        status: str,
        assignee: str | None = None,
        meta: dict[str, Any] | None = None,
        unset: tuple[str, ...] = (),
        summary: str | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> Bead:
        """Change the thread's status (and lease) and write its `event` message."""
        fields: dict[str, Any] = {"meta": {**(meta or {}), "status": status}, "unset_meta": unset}
        if assignee is not None:
            fields["assignee"] = assignee
        if status in TERMINAL:  # no longer a candidate: `fetch` reads only open pool threads
            fields["remove_labels"] = (POOL,)
        bead = batch.update(thread.thread_id, **fields)
        if status in TERMINAL:
            bead = batch.close_bead(thread.thread_id, status)
        changes.append(Change(bead))
        text = summary_line(summary, _event_text(change, agent))
        self._message(batch, changes, thread, agent, None, "event", text, "", change, artifacts)
        return bead

    def _shown(self, bead: Bead) -> ThreadMessage:
        """A message just committed, with its event id (the index numbered it)."""
        return ThreadMessage.from_bead(
            bead, events.ids_of(self.store.index, [bead.id]).get(bead.id)
        )


def _check_kind(kind: str) -> str:
    return check_status(kind, KINDS, "kind")


def _check_seconds(value: float, minimum: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise InvalidInput(f"seconds must be a number >= {minimum:g}, not {value!r}")
    if value > 100 * 365 * 86400:
        raise InvalidInput("seconds must be at most 100 years")
    return float(value)


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 200:
        raise InvalidInput(f"{what} must be one line of at most 200 characters")
    return value


def _invalid(thread: Thread, operation: str) -> InvalidTransition:
    return InvalidTransition(
        f"cannot {operation} thread {thread.thread_id}: it is {thread.status}",
        status=thread.status,
    )


def _other(thread: Thread, agent: str) -> str | None:
    """Who a message from `agent` goes to by default: the other side of the thread."""
    if agent != thread.created_by:
        return thread.created_by
    return thread.assigned_to if thread.assigned_to != agent else None


def _event_text(change: dict[str, Any], agent: str) -> str:
    if change["event"] == "claimed":
        return f"claimed by {agent} ({change['from']} -> claimed)"
    if change["event"] == "released":
        return f"released by {agent} ({change['from']} -> pending)"
    return f"{change['from']} -> {change['to']} by {agent}"


def _event_order(message: ThreadMessage) -> tuple[Any, ...]:
    return (message.event_id is None, message.event_id or 0, message.created_at, message.message_id)


def _line(verb: str, thread: Thread, agent: str, text: str) -> str:
    short = " ".join(text.split())
    short = short if len(short) <= _SHORT else short[: _SHORT - 3] + "..."
    return f'thread {verb} {thread.thread_id}: {agent} "{short}"'
