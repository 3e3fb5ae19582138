"""The `Provider` interface every mail backend implements (beadmail, exec, the test fake)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from beads.errors import GcError, InvalidInput
from beads.records.record import shown
from mail.message import AlreadyArchived, Message, PartialChange

DEFAULT_MAX_BODY = 1024 * 1024
# What a provider may declare it supports (`Provider.capabilities`):
PRIORITY = "priority"  # `send` records the priority (the exec protocol cannot)
ARCHIVED = "archived"  # `archived` lists the mail a recipient archived or deleted
DIRECTORY = "directory"  # `known_agents` knows the agents (recipient checks, `--all`)


class Counts(NamedTuple):
    """`count`: messages in the mailbox (not archived), and how many are unread. A named
    tuple, not a dataclass: building one costs every send start-up time."""

    total: int
    unread: int


class Provider(ABC):
    """A mail backend. Ids are the provider's own; unknown ids raise MessageNotFound."""

    name = "provider"
    capabilities: frozenset[str] = frozenset()
    max_body = DEFAULT_MAX_BODY  # the longest body `send` accepts, in bytes

    @abstractmethod
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
        """Send a message; returns the recipient's copy."""

    @abstractmethod
    def inbox(self, recipient: str) -> list[Message]:
        """Unread, unarchived messages of `recipient`, most urgent then oldest first."""

    def check(self, recipient: str) -> list[Message]:
        """Like `inbox`, and guaranteed never to change anything (hooks use it)."""
        return self.inbox(recipient)

    @abstractmethod
    def all(self, recipient: str) -> list[Message]:
        """Every unarchived message of `recipient`, read or not, oldest first."""

    @abstractmethod
    def get(self, message_id: str) -> Message:
        """One message, without changing its state."""

    @abstractmethod
    def read(self, message_id: str) -> Message:
        """One message, marked read."""

    @abstractmethod
    def mark_read(self, message_id: str) -> None: ...

    @abstractmethod
    def mark_unread(self, message_id: str) -> None: ...

    @abstractmethod
    def archive(self, message_id: str) -> None:
        """Take the message out of the mailbox; AlreadyArchived if it is out already."""

    @abstractmethod
    def delete(self, message_id: str) -> None:
        """Like archive (nothing is destroyed), recorded as a deletion."""

    @abstractmethod
    def reply(self, message_id: str, sender: str, subject: str, body: str) -> Message:
        """Answer the message's sender in its thread (`reply_to` set)."""

    @abstractmethod
    def thread(self, thread_id: str) -> list[Message]:
        """The messages of a thread, oldest first; an unknown thread is empty."""

    def archived(self, recipient: str) -> list[Message]:
        """Messages `recipient` archived or deleted (`ARCHIVED` providers only)."""
        raise InvalidInput(f"listing archived mail needs the beadmail provider, not {self.name}")

    def known_agents(self) -> list[str]:
        """The agents this provider knows, sorted (`DIRECTORY` providers; others know none)."""
        return []

    def settings(self) -> dict[str, Any]:
        """The store's config.yaml as this provider reads it (`{}` when it has none)."""
        return {}

    def strict_recipients(self) -> bool:
        """True when sending to an agent it does not know is an error, not a warning
        (`mail.strict_recipients`, with any provider)."""
        value = (self.settings().get("mail") or {}).get("strict_recipients", False)
        if type(value) is not bool:  # `yes` in YAML 1.2 is text: never silently off
            raise InvalidInput(f"mail.strict_recipients must be true or false, not {shown(value)}")
        return value

    def configured_agents(self) -> list[str]:
        """The agents config.yaml lists (`agents`), with any provider, sorted."""
        return sorted(self.settings().get("agents") or {})

    def rigs(self) -> dict[str, list[str]]:
        """The rigs of config.yaml and their agents, with any provider."""
        rigs = self.settings().get("rigs") or {}
        return {name: list(members or []) for name, members in rigs.items()}

    def change(self, op: str, ids: list[str]) -> dict[str, list[str]]:
        """`op` (archive, delete, mark_read, mark_unread) on each of `ids` (`mail.api.change`).

        One call per id: with several ids, each is first checked with `get`, so an unknown
        one changes nothing; a call that still fails after others succeeded raises
        PartialChange, which says what was done."""
        if len(ids) > 1:
            for message_id in ids:
                self.get(message_id)
        done: list[str] = []
        already: list[str] = []
        for message_id in ids:
            try:
                getattr(self, op)(message_id)
            except AlreadyArchived:
                if op not in ("archive", "delete"):
                    raise
                already.append(message_id)
            except GcError as exc:
                if not done and not already:
                    raise
                raise PartialChange(op, message_id, exc, done, already, ids) from None
            else:
                done.append(message_id)
        return {"done": done, "already": already}

    def count(self, recipient: str) -> Counts:
        messages = self.all(recipient)
        return Counts(len(messages), sum(1 for m in messages if not m.read))

    def origin(self, message_id: str) -> str:
        """Where the message was written when another machine (or plain git) wrote it, as a
        note to put before it (`"(from human on build-01) "`, inbox/origin.py); "" when it
        was written here, or the provider cannot tell (only beadmail's beads have commits)."""
        return ""

    def origins(self, message_ids: Sequence[str]) -> dict[str, str]:
        """`origin` of each of the messages that came from elsewhere, by id, found together
        (a listing's rows): {} when the provider cannot tell."""
        return {}

    def listed(
        self, messages: Sequence[Message], origins: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """The messages as a listing's --json gives them, each with its `"origin"`
        (`origins`: `"(from human on build-01)"` for one written elsewhere, else null);
        `origins`: what `origins` gave for them, when the caller has it already."""
        found = self.origins([m.id for m in messages]) if origins is None else origins
        return [{**m.to_json(), "origin": found.get(m.id, "").strip() or None} for m in messages]

    def close(self) -> None:  # noqa: B027 - most providers hold nothing
        """Release what the provider holds."""
