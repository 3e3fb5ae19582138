"""The mail transport record and the two errors every provider raises."""

from __future__ import annotations

from typing import Any

from beads.errors import GcError, InvalidInput, NotFound


class MessageNotFound(NotFound):
    """No message with that id (exit 40)."""

    @classmethod
    def of(cls, message_id: str) -> MessageNotFound:
        """The error for `message_id`, worded as gc words it (`bead not found`), whatever
        the provider, so a script reading gc's line reads ours."""
        return cls(f"message {message_id}: bead not found")


class AlreadyArchived(InvalidInput):
    """The message is archived already (the CLI reports it and exits 0)."""


class ProviderError(GcError):
    """The mail backend failed (an exec script's error, timeout or garbage; exit 50)."""

    code = "storage_error"
    exit_code = 50


class TimedOut(ProviderError):
    """The backend ran out of time (an exec program killed at its time-out; exit 50)."""


class PartialChange(GcError):
    """A change of several messages failed part way (a provider that cannot change them in
    one step): says which were changed, which failed and which were not tried. Its code and
    exit code are those of the failure."""

    def __init__(
        self,
        op: str,
        failed: str,
        cause: GcError,
        done: list[str],
        already: list[str],
        ids: list[str],
    ) -> None:
        untried = ids[ids.index(failed) + 1 :]
        parts = [f"{op.replace('_', '-')} {failed} failed: {cause.message}"]
        if done:
            parts.append(f"done: {' '.join(done)}")
        if already:
            parts.append(f"already archived: {' '.join(already)}")
        if untried:
            parts.append(f"not tried: {' '.join(untried)}")
        super().__init__("; ".join(parts), done=done, already=already, failed=failed,
                         untried=untried)  # fmt: skip
        self.code, self.exit_code = cause.code, cause.exit_code


def reply_subject(original: str) -> str:
    """A reply's default subject: "Re: <original>" (never "Re: Re: ...")."""
    if not original or original.lower().startswith("re:"):
        return original
    return f"Re: {original}"


class OutOfRange:
    """A JSON number no field can hold (1e400, twenty digits): parsed as this, so that only
    the message holding it is refused, never the whole listing."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class Message:
    """One message as every provider returns it; JSON keys follow the exec protocol.

    A plain class with equality and a repr, not a dataclass: building a dataclass costs every
    send a few milliseconds of start-up (docs/benchmarks.md)."""

    __slots__ = (
        "id", "sender", "to", "subject", "body", "created_at", "read", "thread_id",
        "reply_to", "priority", "cc", "suppressed", "sent_by", "copies", "mailbox",
    )  # fmt: skip

    def __init__(
        self,
        id: str,
        sender: str,
        to: str,
        subject: str,
        body: str,
        created_at: str,
        read: bool = False,
        thread_id: str | None = None,
        reply_to: str | None = None,
        priority: int = 2,
        cc: list[str] | None = None,
        suppressed: bool = False,
        sent_by: str | None = None,
        copies: list[Message] | None = None,
        mailbox: str | None = None,
    ) -> None:
        self.id = id
        self.sender = sender
        self.to = to
        self.subject = subject
        self.body = body
        self.created_at = created_at
        self.read = read
        self.thread_id = thread_id
        self.reply_to = reply_to
        self.priority = priority
        self.cc: list[str] = [] if cc is None else cc
        # Not part of the protocol: set by beadmail when --dedup suppressed the send.
        self.suppressed = suppressed
        # Not part of the protocol: who really sent a message sent as `sender` (`--from`).
        self.sent_by = sent_by
        # Not part of the protocol: the cc copies a send made with this message (beadmail,
        # whose cc recipients get their own copy); `mail.api.send` lists them with the
        # message. Neither compared nor shown in the repr.
        self.copies: list[Message] = [] if copies is None else copies
        # Not part of the protocol: whose mailbox holds this copy (`to`, or a cc recipient).
        self.mailbox = mailbox

    def _compared(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__ if name != "copies")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self.__slots__ if name != "copies"
        )
        return f"Message({shown})"

    def copy(self) -> Message:
        """A copy of this message (its lists copied too, one level deep)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values["cc"], values["copies"] = list(self.cc), list(self.copies)
        return Message(**values)

    def shown_sender(self) -> str:
        """The sender as people see it: `mayor (sent by eve)` for a relayed message."""
        if self.sent_by and self.sent_by != self.sender:
            return f"{self.sender} (sent by {self.sent_by})"
        return self.sender

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "from": self.sender,
            "to": self.to,
            "subject": self.subject,
            "body": self.body,
            "created_at": self.created_at,
            "read": self.read,
            "thread_id": self.thread_id,
            "reply_to": self.reply_to,
            "priority": self.priority,
            "cc": list(self.cc),
            **({"sent_by": self.sent_by} if self.sent_by else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> Message:
        """Parse one message of the exec protocol; raises ProviderError when malformed."""
        if not isinstance(data, dict):
            raise ProviderError("expected a JSON object for a message")
        try:
            cc = data.get("cc") or []
            for key, value in data.items():
                if isinstance(value, OutOfRange):
                    raise ValueError(f"{key!r} is out of range: {value.text}")
            priority = data.get("priority")
            if priority is not None and type(priority) is not int:
                raise ValueError("'priority' must be an integer")
            read = data.get("read", False)
            if type(read) is not bool:
                raise ValueError("'read' must be true or false")
            message = cls(
                id=_text(data, "id"),
                sender=_text(data, "from"),
                to=_text(data, "to", ""),
                subject=_text(data, "subject", ""),
                body=_text(data, "body", ""),
                created_at=_text(data, "created_at", ""),
                read=read,
                thread_id=_text(data, "thread_id", "") or None,
                reply_to=_text(data, "reply_to", "") or None,
                # 0 critical .. 4 low: a program's wider scale is clamped, never refused.
                priority=2 if priority is None else min(max(priority, 0), 4),
                cc=[_text({"cc": x}, "cc") for x in (cc if isinstance(cc, list) else [cc])],
            )
        except (TypeError, ValueError) as exc:
            raise ProviderError(f"malformed message: {exc}") from None
        if not message.id:
            raise ProviderError("a message without an id")
        return message


def _text(data: dict[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if value is None:
        if default is None:
            raise ValueError(f"missing {key!r}")
        return default
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string")
    return value
