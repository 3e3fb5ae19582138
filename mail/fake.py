"""An in-memory provider: the reference the conformance suite is checked against."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from beads.records.times import now_stamp
from mail.message import AlreadyArchived, Message, MessageNotFound
from mail.provider import PRIORITY, Provider


class FakeProvider(Provider):
    """Mail kept in a dict; the simplest correct implementation of the contract."""

    name = "fake"
    capabilities = frozenset({PRIORITY})

    def __init__(self) -> None:
        self._messages: dict[str, Message] = {}
        self._archived: set[str] = set()
        self._owner: dict[str, str] = {}  # message id -> whose mailbox holds it
        self._ids = itertools.count(1)

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
        thread_id: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        first = None
        for recipient in [to, *[c for c in dict.fromkeys(cc) if c != to]]:
            message_id = f"fake-{next(self._ids)}"
            message = Message(
                id=message_id,
                sender=sender,
                to=to,
                subject=subject,
                body=body,
                created_at=now_stamp(),
                thread_id=thread_id or (first.id if first else message_id),
                reply_to=reply_to,
                priority=priority,
                cc=[c for c in cc if c != to],
            )
            self._messages[message_id] = message
            self._owner[message_id] = recipient
            first = first or message
        assert first is not None
        return first.copy()

    def _mine(self, recipient: str) -> list[Message]:
        return [
            m.copy()
            for i, m in self._messages.items()
            if self._owner[i] == recipient and i not in self._archived
        ]

    def inbox(self, recipient: str) -> list[Message]:
        unread = [m for m in self._mine(recipient) if not m.read]
        return sorted(unread, key=lambda m: (m.priority, m.created_at))

    def all(self, recipient: str) -> list[Message]:
        return self._mine(recipient)

    def get(self, message_id: str) -> Message:
        if message_id not in self._messages:
            raise MessageNotFound.of(message_id)
        return self._messages[message_id].copy()

    def read(self, message_id: str) -> Message:
        self.mark_read(message_id)
        return self.get(message_id)

    def mark_read(self, message_id: str) -> None:
        self._messages[self.get(message_id).id].read = True

    def mark_unread(self, message_id: str) -> None:
        self._messages[self.get(message_id).id].read = False

    def archive(self, message_id: str) -> None:
        self.get(message_id)
        if message_id in self._archived:
            raise AlreadyArchived(f"Already archived {message_id}")
        self._archived.add(message_id)

    def delete(self, message_id: str) -> None:
        self.archive(message_id)

    def reply(self, message_id: str, sender: str, subject: str, body: str) -> Message:
        original = self.get(message_id)
        return self.send(
            sender,
            original.sender,
            subject or f"Re: {original.subject}",
            body,
            thread_id=original.thread_id or original.id,
            reply_to=original.id,
        )

    def thread(self, thread_id: str) -> list[Message]:
        found = [m.copy() for m in self._messages.values() if m.thread_id == thread_id]
        return sorted(found, key=lambda m: m.created_at)
