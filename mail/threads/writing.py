"""How a work thread is written: one commit through the mail layer's producer path
(`followed_batch`, under the store's write lock) that writes at least one message bead in the
thread, and, when the thread's status or lease changes, an `event` message whose payload says
what changed. A message with a recipient is that agent's mail as well (`BeadMail.compose`).

`ThreadWriter` opens those commits; `ThreadWrite` is one of them, holding the thread as git
holds it under the lock (what the write decides on). The operations themselves are in
`mail.threads.leases` (claim, renew, release) and `mail.threads.api` (messages, finishing).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from beads.index import events
from beads.records.record import Bead
from beads.store import Batch, Store
from inbox.commits import followed_batch, open_delivery
from inbox.follow import Change
from mail.threads.model import (
    MESSAGE,
    POOL,
    TERMINAL,
    InvalidTransition,
    Thread,
    ThreadMessage,
    summary_line,
)
from mail.threads.queries import thread_bead
from mail.threads.waiting import ThreadWaits

if TYPE_CHECKING:
    from inbox.delivery import Delivery
    from mail.beadmail import BeadMail

_SHORT = 60  # characters of a message's text in the commit message


class ThreadWriter(ThreadWaits):
    """The work threads of one store, with what writing them needs: the store's mail and
    delivery database, opened at first use and kept (a worker writes many times)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
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

    def _batch(self) -> Any:
        """An open batch and the changes delivery announces once it commits."""
        if self._delivery is None:
            self._delivery = open_delivery(self.store)
        return followed_batch(self.store, self._delivery)

    @contextmanager
    def _writing(self, ref: str) -> Iterator[ThreadWrite]:
        """One commit to the existing thread `ref`, read as git holds it under the lock."""
        with self._batch() as (batch, changes):
            thread = Thread.from_bead(thread_bead(batch.get, ref))
            yield ThreadWrite(self, batch, changes, thread)

    def _shown(self, bead: Bead) -> ThreadMessage:
        """A message just committed, with its event id (the index numbered it)."""
        return ThreadMessage.from_bead(
            bead, events.ids_of(self.store.index, [bead.id]).get(bead.id)
        )


class ThreadWrite:
    """One commit's writes to one thread: the open batch, the changes it announces, and
    `thread` as it was when the commit began."""

    def __init__(
        self, writer: ThreadWriter, batch: Batch, changes: list[Change], thread: Thread
    ) -> None:
        self.batch = batch
        self.changes = changes
        self.thread = thread
        self._writer = writer

    def message(
        self,
        sender: str,
        to: str | None,
        kind: str,
        summary: str,
        body: str = "",
        payload: dict[str, Any] | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> Bead:
        """A message in the thread: `to`'s mail as well, unless it has no other recipient."""
        meta: dict[str, Any] = {"kind": kind}
        if payload:
            meta["payload"] = payload
        if artifacts:
            meta["artifacts"] = list(artifacts)
        priority = self.thread.priority_level
        thread_id = self.thread.thread_id
        if to is not None and to != sender:
            bead = self._writer.mail.compose(
                self.batch,
                sender,
                to,
                summary,
                body,
                priority=priority,
                thread=thread_id,
                meta=meta,
            )
        else:  # thread history only: nobody's mail
            bead = self.batch.create(
                MESSAGE,
                summary,
                body,
                priority=priority,
                sender=sender,
                thread=thread_id,
                meta=meta,
            )
        self.changes.append(Change(bead))
        return bead

    def change(
        self,
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
        thread_id = self.thread.thread_id
        bead = self.batch.update(thread_id, **fields)
        if status in TERMINAL:
            bead = self.batch.close_bead(thread_id, status)
        self.changes.append(Change(bead))
        text = summary_line(summary, _event_text(change, agent))
        self.message(agent, None, "event", text, "", change, artifacts)
        return bead

    def describe(self, verb: str, agent: str, text: str) -> None:
        """The commit's message: `thread VERB ID: AGENT "TEXT"` (the text shortened)."""
        short = " ".join(text.split())
        short = short if len(short) <= _SHORT else short[: _SHORT - 3] + "..."
        self.batch.message = f'thread {verb} {self.thread.thread_id}: {agent} "{short}"'

    def refuse(self, operation: str) -> InvalidTransition:
        """The error for an `operation` the thread's status does not allow."""
        return InvalidTransition(
            f"cannot {operation} thread {self.thread.thread_id}: it is {self.thread.status}",
            status=self.thread.status,
        )


def _event_text(change: dict[str, Any], agent: str) -> str:
    if change["event"] == "claimed":
        return f"claimed by {agent} ({change['from']} -> claimed)"
    if change["event"] == "released":
        return f"released by {agent} ({change['from']} -> pending)"
    return f"{change['from']} -> {change['to']} by {agent}"
