"""beadmail, the default provider: every message is a bead of type `message` in the store.

One bead per recipient (the `to` and each `cc` get their own copy in one commit, sharing the
thread), so read and archive state are per recipient. Read state is `meta.read`; `closed`
means archived (a delete is an archive with reason `deleted`), so history keeps everything.
The thread id is the id of the thread's first message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from beads.errors import NotFound
from beads.records.record import MAX_TITLE_CHARS, Bead, check_agent, expect_type, shorten
from beads.store import Store
from inbox.commits import followed_batch, open_delivery
from inbox.follow import Change
from mail.message import AlreadyArchived, Message, MessageNotFound, reply_subject
from mail.provider import ARCHIVED, DIRECTORY, PRIORITY, Counts, Provider
from mail.unread import MESSAGE, mailbox_filters, unread_filters

if TYPE_CHECKING:
    from beads.batch import Batch
    from inbox.delivery import Delivery


class BeadMail(Provider):
    """Mail over a bead store."""

    name = "beadmail"
    capabilities = frozenset({PRIORITY, ARCHIVED, DIRECTORY})

    def __init__(self, store: Store) -> None:
        self.store = store
        self._delivery: Delivery | None = None

    @property
    def max_body(self) -> int:  # type: ignore[override]
        return self.store.max_body

    def known_agents(self) -> list[str]:
        return self.store.known_agents()

    def settings(self) -> dict[str, Any]:
        return self.store.config

    def delivery(self) -> Delivery:
        """The store's delivery database, opened once per provider: a long-lived sender then
        keeps one connection (and its WAL) instead of paying an open, a sync and a checkpoint
        for every message."""
        if self._delivery is None:
            from inbox.delivery import Delivery

            self._delivery = Delivery(self.store.root, config=lambda: self.store.config)
        return self._delivery

    def close(self) -> None:
        """Close the delivery database, if this provider opened it."""
        if self._delivery is not None:
            self._delivery.close()
            self._delivery = None

    # -- sending ---------------------------------------------------------------------------

    def send(
        self,
        sender: str,
        to: str,
        subject: str,
        body: str,
        *,
        cc: Sequence[str] = (),
        priority: int = 2,
        dedup: str | None = None,
    ) -> Message:
        return self._deliver(sender, to, subject, body, cc=cc, priority=priority, dedup=dedup)

    def reply(self, message_id: str, sender: str, subject: str, body: str) -> Message:
        original = self.get(message_id)
        return self._deliver(
            sender,
            original.sender,
            subject or reply_subject(original.subject),
            body,
            priority=original.priority,
            thread=original.thread_id or original.id,
            reply_to=original.id,
        )

    def _deliver(
        self,
        sender: str,
        to: str,
        subject: str,
        body: str,
        *,
        cc: Sequence[str] = (),
        priority: int = 2,
        dedup: str | None = None,
        thread: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        check_agent(sender, what="sender")
        recipients = [check_agent(to, what="recipient")]
        recipients += [check_agent(c, what="cc") for c in dict.fromkeys(cc) if c != to]
        meta: dict[str, Any] = {"dedup": dedup} if dedup else {}
        with followed_batch(self.store, self._delivery_or_none()) as (batch, changes):
            if dedup:
                found = self.store.list(**mailbox_filters(to), meta={"dedup": dedup}, limit=1)
                if found:
                    existing = bead_message(found[0])
                    existing.suppressed = True
                    return existing
            ids = [batch.new_id() for _ in recipients]
            made = [
                self.compose(
                    batch,
                    sender,
                    recipient,
                    subject,
                    body,
                    cc=recipients[1:],
                    priority=priority,
                    bead_id=bead_id,
                    thread=thread or ids[0],
                    reply_to=reply_to,
                    meta=meta if recipient == to else {**meta, "to": to},
                )
                for bead_id, recipient in zip(ids, recipients, strict=True)
            ]
            verb = "reply" if reply_to else "send"
            also = f" (+{len(made) - 1} cc)" if len(made) > 1 else ""
            title = shorten(made[0].title)
            batch.message = f'mail {verb} {ids[0]}: {sender} -> {to}{also} "{title}"'
            if reply_to:
                batch.message += f" (re {reply_to})"
            changes += [Change(bead) for bead in made]
        first = bead_message(made[0])
        first.copies = [bead_message(bead) for bead in made[1:]]
        return first

    def compose(
        self,
        batch: Batch,
        sender: str,
        recipient: str,
        subject: str,
        body: str,
        *,
        cc: Sequence[str] = (),
        priority: int = 2,
        bead_id: str | None = None,
        thread: str | None = None,
        reply_to: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Bead:
        """Add one unread message for `recipient` to an open batch of `followed_batch` (which
        announces it once committed): the one way a message bead is made, for a send and for
        producers that commit mail with other changes (work threads)."""
        title, exact_subject = _title(subject, body)
        fields: dict[str, Any] = {"read": False}
        if exact_subject is not None:
            fields["subject"] = exact_subject
        if sender != self.store.agent:  # a relay or bridge: record who really sent it
            fields["sent_by"] = self.store.agent
        return batch.create(
            MESSAGE,
            title,
            body,
            assignee=recipient,
            cc=cc,
            priority=priority,
            sender=sender,
            bead_id=bead_id,
            thread=thread,
            reply_to=reply_to,
            meta={**fields, **(meta or {})},
        )

    def _delivery_or_none(self) -> Delivery | None:
        """The delivery database for a write, kept open; None never stops a send (see
        `inbox.commits.open_delivery`)."""
        if self._delivery is None:
            self._delivery = open_delivery(self.store)
        return self._delivery

    # -- reading ---------------------------------------------------------------------------

    def inbox(self, recipient: str) -> list[Message]:
        beads = self.store.list(**unread_filters(recipient), order="priority")
        return [bead_message(b) for b in beads]

    def all(self, recipient: str) -> list[Message]:
        return [bead_message(b) for b in self.store.list(**mailbox_filters(recipient))]

    def archived(self, recipient: str) -> list[Message]:
        beads = self.store.list(type=MESSAGE, assignee=recipient, status="closed")
        return [bead_message(b) for b in beads]

    def count(self, recipient: str) -> Counts:
        total = self.store.count(**mailbox_filters(recipient))
        return Counts(total, self.store.count(**unread_filters(recipient)))

    def get(self, message_id: str) -> Message:
        return bead_message(self._bead(message_id))

    def origin(self, message_id: str) -> str:
        from inbox.origin import note_of

        return note_of(self.store.root, MESSAGE, message_id, git=self.store.git)

    def origins(self, message_ids: Sequence[str]) -> dict[str, str]:
        from inbox.origin import notes_of

        return notes_of(self.store.root, MESSAGE, message_ids, git=self.store.git)

    def thread(self, thread_id: str) -> list[Message]:
        try:
            beads = self.store.list(type=MESSAGE, thread=thread_id)
        except NotFound:
            return []
        return [bead_message(b) for b in beads]

    # -- state -----------------------------------------------------------------------------

    def read(self, message_id: str) -> Message:
        bead = self._bead(message_id)
        if bead.meta.get("read") is not True:
            bead = self._change(bead, "read", meta={"read": True})
        return bead_message(bead)

    def mark_read(self, message_id: str) -> None:
        self.read(message_id)

    def mark_unread(self, message_id: str) -> None:
        bead = self._bead(message_id)
        if bead.meta.get("read") is not False:
            self._change(bead, "mark-unread", meta={"read": False})

    def archive(self, message_id: str) -> None:
        self._close(message_id, "archived")

    def delete(self, message_id: str) -> None:
        self._close(message_id, "deleted")

    def change(self, op: str, ids: list[str]) -> dict[str, list[str]]:
        """Every id resolved first, then all the changes in one commit (or none)."""
        beads = list({bead.id: bead for bead in map(self._bead, ids)}.values())
        done: list[str] = []
        already: list[str] = []
        verb = op.replace("_", "-")
        who = sorted({bead.assignee or "" for bead in beads})
        message = f"mail {verb} {' '.join(b.id for b in beads)}: {', '.join(who)}"
        with followed_batch(self.store, self._delivery_or_none(), message) as (batch, changes):
            for bead in beads:
                if op in ("archive", "delete"):
                    if bead.status == "closed":
                        already.append(bead.id)
                        continue
                    reason = "archived" if op == "archive" else "deleted"
                    changed = batch.close_bead(bead.id, reason, force=True)
                else:
                    read = op == "mark_read"
                    if bead.meta.get("read") is not read:
                        changed = batch.update(bead.id, meta={"read": read})
                    else:
                        changed = bead  # as asked already: nothing to commit
                done.append(bead.id)
                if changed is not bead:
                    changes.append(Change(changed, bead))
        return {"done": done, "already": already}

    def _close(self, message_id: str, reason: str) -> None:
        bead = self._bead(message_id)
        if bead.status == "closed":
            raise AlreadyArchived(f"Already archived {bead.id}", id=bead.id)
        verb = "archive" if reason == "archived" else "delete"
        message = f"mail {verb} {bead.id}: {bead.assignee}"
        with followed_batch(self.store, self._delivery_or_none(), message) as (batch, changes):
            changes.append(Change(batch.close_bead(bead.id, reason, force=True), bead))

    def _change(self, bead: Bead, verb: str, **changes: Any) -> Bead:
        # Read state changes make no items, but following them keeps the watermark at the
        # branch, so the next hook does not have to diff trees to find that out.
        message = f"mail {verb} {bead.id}: {bead.assignee}"
        with followed_batch(self.store, self._delivery_or_none(), message) as (batch, made):
            changed = batch.update(bead.id, **changes)
            made.append(Change(changed, bead))
        return changed

    def _bead(self, message_id: str) -> Bead:
        try:
            bead = self.store.get(message_id)
        except NotFound:
            raise MessageNotFound.of(message_id) from None
        return expect_type(bead, MESSAGE)


def bead_message(bead: Bead) -> Message:
    """The message a `message` bead holds."""
    return Message(
        id=bead.id,
        sender=bead.sender,
        to=bead.meta.get("to") or bead.assignee or "",
        subject=bead.meta.get("subject", bead.title),
        body=bead.body,
        created_at=bead.created_at,
        read=bead.meta.get("read") is True,
        thread_id=bead.thread,
        reply_to=bead.reply_to,
        priority=bead.priority,
        cc=list(bead.cc),
        sent_by=bead.meta.get("sent_by"),
        mailbox=bead.assignee,
    )


def _title(subject: str, body: str) -> tuple[str, str | None]:
    """The bead title for a subject, and the exact subject when the title cannot be it."""
    line = " ".join(subject.split())
    if line and line == subject and len(line) <= MAX_TITLE_CHARS:
        return subject, None
    if not line:
        line = " ".join(body.split()[:12]) or "(no subject)"
    return shorten(line, MAX_TITLE_CHARS), subject
