"""Work threads as data: statuses and their transitions, priorities, leases, artifacts, and
the JSON shapes of seed 002 (`thread`, `message`), read from the beads that hold them.

A thread is a bead of type `thread`; its messages are `message` beads of the thread with
`meta.kind`. See `mail.threads.api` for the operations.
"""

from __future__ import annotations

import os
from typing import Any

from beads.errors import Conflict, InvalidInput
from beads.jsontext import parse_json
from beads.records.record import MAX_TITLE_CHARS, Bead, check_meta_key, shown

THREAD = "thread"
MESSAGE = "message"

STATUSES = ("pending", "claimed", "in_progress", "blocked", "done", "failed", "cancelled")
TERMINAL = ("done", "failed", "cancelled")
HELD = ("claimed", "in_progress", "blocked")  # the statuses a lease goes with
KINDS = ("task", "progress", "question", "answer", "result", "control", "event")
REPLY_KINDS = ("answer", "control", "result")  # what `wait-reply` waits for by default
# The seed's words for priorities, by level (0 most urgent, as in every bead).
PRIORITY_WORDS = ("critical", "high", "normal", "low", "lowest")
DEFAULT_LEASE_SECONDS = 900.0
ARTIFACT_KIND = "file"
POOL = "pool"  # the label of a thread made without an assignee: a candidate for every agent


class _Record:
    """Plain classes with equality and a repr, not dataclasses: building dataclasses costs
    every command that imports them a few milliseconds of code generation."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


class InvalidTransition(InvalidInput):
    """The thread's status does not allow this operation (exit 30)."""

    code = "invalid_transition"


class LeaseConflict(Conflict):
    """Another agent holds the thread's lease, or the caller holds none (exit 20)."""

    code = "lease_conflict"


def check_status(value: str, allowed: tuple[str, ...] = STATUSES, what: str = "status") -> str:
    if value not in allowed:
        raise InvalidInput(f"{what} must be one of {', '.join(allowed)}, not {shown(value)}")
    return value


def check_kind(kind: str) -> str:
    return check_status(kind, KINDS, "kind")


def check_seconds(value: float, minimum: float = 1.0) -> float:
    """A number of seconds (a lease, a wait) from a caller: at least `minimum`, at most 100
    years."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise InvalidInput(f"seconds must be a number >= {minimum:g}, not {value!r}")
    if value > 100 * 365 * 86400:
        raise InvalidInput("seconds must be at most 100 years")
    return float(value)


def parse_list(text: str | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...] | None:
    """A list checked against `allowed`, its values parted by `,` or `|` (`pending,blocked`;
    the seed writes `answer|control|result`); None for no option."""
    if text is None:
        return None
    values = tuple(dict.fromkeys(v.strip() for v in text.replace("|", ",").split(",")))
    if not values or "" in values:
        raise InvalidInput(
            f"{what} takes a list of {', '.join(allowed)} (parted by , or |), not {shown(text)}"
        )
    for value in values:
        check_status(value, allowed, what)
    return values


def priority_level(value: str | int) -> int:
    """A priority as its level: a word (low, normal, high, ...) or 0-4."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 4:
        return value
    text = str(value).strip().lower()
    if text in PRIORITY_WORDS:
        return PRIORITY_WORDS.index(text)
    if text in ("0", "1", "2", "3", "4"):
        return int(text)
    raise InvalidInput(
        f"priority must be low, normal, high (or critical, lowest) or 0-4, not {shown(value)}"
    )


def parse_object(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given as text (`--payload-json`); {} for none."""
    if text is None:
        return {}
    value = parse_json(text, what)  # a key given twice is refused
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object, not {type(value).__name__}")
    _check_keys(value, what)
    return value


def _check_keys(value: Any, what: str) -> None:
    # Stored as a YAML mapping in the bead's meta, whose keys follow the meta key rule.
    if isinstance(value, dict):
        for key, item in value.items():
            try:
                check_meta_key(key)
            except InvalidInput:
                raise InvalidInput(
                    f"{what}: key {shown(key)} must be a name of letters, digits, _ . -"
                ) from None
            _check_keys(item, what)
    elif isinstance(value, list):
        for item in value:
            _check_keys(item, what)


def summary_line(text: str | None, fallback: str) -> str:
    """A message's summary (its bead title): one line of at most MAX_TITLE_CHARS."""
    if text is None or not text.strip():
        return fallback
    if "\n" in text or "\r" in text or len(text) > MAX_TITLE_CHARS:
        raise InvalidInput(f"summary must be one line of at most {MAX_TITLE_CHARS} characters")
    return text


def artifact(path: str, kind: str | None = None, metadata: dict[str, Any] | None = None) -> dict:
    """A reference to a file (not a copy): its size and sha256 when it exists now."""
    if not path:
        raise InvalidInput("--artifact needs a path")
    import hashlib

    size = digest = None
    try:
        if os.path.isfile(path):
            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(chunk)
            size, digest = os.path.getsize(path), sha.hexdigest()
    except OSError:
        pass  # unreadable now: still a reference, without size and digest
    return {
        "path": path,
        "kind": kind or ARTIFACT_KIND,
        "metadata": metadata or {},
        "size": size,
        "sha256": digest,
    }


def artifacts(
    paths: tuple[str, ...] | list[str],
    kinds: tuple[str, ...] | list[str] = (),
    metadata: tuple[str, ...] | list[str] = (),
) -> list[dict]:
    """Artifacts from repeated `--artifact`, `--artifact-kind`, `--artifact-metadata-json`:
    the n-th kind and metadata go with the n-th path; one given once goes with every path."""

    def spread(values: tuple[str, ...] | list[str], what: str) -> list[str | None]:
        if not values:
            return [None] * len(paths)
        if len(values) == 1:
            return list(values) * len(paths)
        if len(values) != len(paths):
            raise InvalidInput(f"give {what} once, or once per --artifact ({len(paths)})")
        return list(values)

    if (kinds or metadata) and not paths:
        raise InvalidInput("--artifact-kind and --artifact-metadata-json need an --artifact")
    out = []
    for path, kind, meta in zip(
        paths,
        spread(kinds, "--artifact-kind"),
        spread(metadata, "--artifact-metadata-json"),
        strict=True,
    ):
        out.append(artifact(path, kind, parse_object(meta, "--artifact-metadata-json")))
    return out


class Lease(_Record):
    """An exclusive claim on a thread until `expires_at` (RFC 3339)."""

    __slots__ = ("agent", "token", "claimed_at", "expires_at")

    def __init__(self, agent: str, token: str, claimed_at: str, expires_at: str) -> None:
        self.agent = agent
        self.token = token
        self.claimed_at = claimed_at
        self.expires_at = expires_at

    def live(self, now: str) -> bool:
        return self.expires_at > now

    def to_json(self) -> dict[str, str]:
        return {
            "agent": self.agent,
            "token": self.token,
            "claimed_at": self.claimed_at,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_meta(cls, value: Any) -> Lease | None:
        if not isinstance(value, dict) or not isinstance(value.get("agent"), str):
            return None
        return cls(
            agent=value["agent"],
            token=str(value.get("token") or ""),
            claimed_at=str(value.get("claimed_at") or ""),
            expires_at=str(value.get("expires_at") or ""),
        )


class Thread(_Record):
    """A work thread as seed 002 shows it (`pool`: made without an assignee, a candidate for
    every agent)."""

    __slots__ = (
        "thread_id",
        "run_id",
        "task_id",
        "subject",
        "created_by",
        "assigned_to",
        "status",
        "priority_level",
        "created_at",
        "updated_at",
        "lease",
        "pool",
    )

    def __init__(
        self,
        thread_id: str,
        run_id: str | None,
        task_id: str | None,
        subject: str,
        created_by: str,
        assigned_to: str | None,
        status: str,
        priority_level: int,
        created_at: str,
        updated_at: str,
        lease: Lease | None = None,
        pool: bool = False,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.task_id = task_id
        self.subject = subject
        self.created_by = created_by
        self.assigned_to = assigned_to
        self.status = status
        self.priority_level = priority_level
        self.created_at = created_at
        self.updated_at = updated_at
        self.lease = lease
        self.pool = pool

    def claimable(self, now: str) -> bool:
        """True when a claim would succeed now: not finished, no live lease."""
        return self.status not in TERMINAL and (self.lease is None or not self.lease.live(now))

    def to_json(self, now: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "subject": self.subject,
            "created_by": self.created_by,
            "assigned_to": self.assigned_to,
            "status": self.status,
            "priority": PRIORITY_WORDS[self.priority_level],
            "priority_level": self.priority_level,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "lease": self.lease.to_json() if self.lease else None,
        }
        if now is not None:
            out["claimable"] = self.claimable(now)
        return out

    @classmethod
    def from_bead(cls, bead: Bead) -> Thread:
        meta = bead.meta
        return cls(
            thread_id=bead.id,
            run_id=meta.get("run_id"),
            task_id=meta.get("task_id"),
            subject=meta.get("subject", bead.title),
            created_by=bead.sender,
            assigned_to=bead.assignee,
            status=meta.get("status") if meta.get("status") in STATUSES else "pending",
            priority_level=bead.priority,
            created_at=bead.created_at,
            updated_at=bead.updated_at,
            lease=Lease.from_meta(meta.get("lease")),
            pool=POOL in bead.labels,
        )


class ThreadMessage(_Record):
    """One message of a work thread as seed 002 shows it."""

    __slots__ = (
        "message_id",
        "thread_id",
        "event_id",
        "from_agent",
        "to_agent",
        "kind",
        "summary",
        "body",
        "payload",
        "artifacts",
        "created_at",
    )

    def __init__(
        self,
        message_id: str,
        thread_id: str,
        event_id: int | None,
        from_agent: str,
        to_agent: str | None,
        kind: str,
        summary: str,
        body: str,
        payload: dict[str, Any] | None = None,
        artifacts: list[dict[str, Any]] | None = None,
        created_at: str = "",
    ) -> None:
        self.message_id = message_id
        self.thread_id = thread_id
        self.event_id = event_id
        self.from_agent = from_agent
        self.to_agent = to_agent
        self.kind = kind
        self.summary = summary
        self.body = body
        self.payload = payload or {}
        self.artifacts = artifacts or []
        self.created_at = created_at

    def to_json(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "thread_id": self.thread_id,
            "event_id": self.event_id,
            "from_agent": self.from_agent,
            "to_agent": self.to_agent,
            "kind": self.kind,
            "summary": self.summary,
            "body": self.body,
            "payload_json": self.payload,
            "artifacts": self.artifacts,
            "created_at": self.created_at,
        }

    @classmethod
    def from_bead(cls, bead: Bead, event_id: int | None) -> ThreadMessage:
        meta = bead.meta
        return cls(
            message_id=bead.id,
            thread_id=bead.thread or "",
            event_id=event_id,
            from_agent=bead.sender,
            to_agent=meta.get("to") or bead.assignee,
            # Mail without a kind in a thread is a `gc mail reply` to one of its messages.
            kind=meta.get("kind") or "answer",
            summary=meta.get("subject", bead.title),
            body=bead.body,
            payload=meta.get("payload") or {},
            artifacts=list(meta.get("artifacts") or []),
            created_at=bead.created_at,
        )


class Wake(_Record):
    """What `watch` and `wait-reply` return: whether they woke, the cursor to wait from next
    (`next_event_id`), and what woke them."""

    __slots__ = ("woke", "next_event_id", "message", "messages", "threads")

    def __init__(
        self,
        woke: bool,
        next_event_id: int,
        message: ThreadMessage | None = None,
        messages: list[ThreadMessage] | None = None,
        threads: list[Thread] | None = None,
    ) -> None:
        self.woke = woke
        self.next_event_id = next_event_id
        self.message = message
        self.messages = messages or []
        self.threads = threads or []
