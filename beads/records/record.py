"""The `Bead` record: its fields, their canonical order and their validation.

Names used in beads follow documented patterns (see README "Names"):
- agent: ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``, optionally as ``rig/name`` (Gas City's
  addresses: one slash, each part such a name); ``all`` is reserved;
- type: ``[a-z][a-z0-9_-]{0,31}``;
- label: ``[A-Za-z0-9][A-Za-z0-9._:/=-]{0,127}``;
- meta key: ``[A-Za-z_][A-Za-z0-9_.-]{0,63}``.
"""

from __future__ import annotations

import math
import os
import re

from beads.errors import InvalidInput
from beads.records.ids import check_id
from beads.records.limits import DEFAULT_MAX_BODY_BYTES

TYPE_CHECKING = False  # the hooks never import typing; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
AGENT_RE = re.compile(rf"{NAME}(?:/{NAME})?")  # a name, or `rig/name`
TYPE_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
LABEL = r"[A-Za-z0-9][A-Za-z0-9._:/=-]{0,127}"  # compiled by `re` when a label is first met
META_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
# ASCII digits only (`\d` would also take other scripts' digits, which YAML does not).
TIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
RESERVED_AGENTS = frozenset({"all"})
STATUSES = ("open", "closed")
MAX_TITLE_CHARS = 500
MAX_LIST_ITEMS = 100  # labels, cc
# Meta is bounded like the body: at most this many values (keys, items, scalars), their text
# at most store.max_body_bytes, integers within 64 bits (what sqlite and JSON readers take).
MAX_META_VALUES = 10_000
MAX_INT = 2**63 - 1

# The YAML key of each field, in canonical file order. `from` is a Python keyword.
FIELD_ORDER = (
    "id",
    "type",
    "title",
    "body",
    "status",
    "from",
    "assignee",
    "cc",
    "labels",
    "priority",
    "thread",
    "reply_to",
    "parent",
    "created_at",
    "updated_at",
    "closed_at",
    "close_reason",
    "meta",
)


class Bead:
    """One record of the store. `sender` is the YAML/JSON key `from`.

    A plain class rather than a dataclass: hooks build beads on every prompt, and importing
    `dataclasses` (which loads `inspect`) would slow every one of them.
    """

    __slots__ = tuple("sender" if key == "from" else key for key in FIELD_ORDER)

    def __init__(
        self,
        id: str,
        type: str,
        title: str,
        sender: str,
        created_at: str,
        updated_at: str,
        body: str = "",
        status: str = "open",
        assignee: str | None = None,
        cc: list[str] | None = None,
        labels: list[str] | None = None,
        priority: int = 2,
        thread: str | None = None,
        reply_to: str | None = None,
        parent: str | None = None,
        closed_at: str | None = None,
        close_reason: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.type = type
        self.title = title
        self.sender = sender
        self.created_at = created_at
        self.updated_at = updated_at
        self.body = body
        self.status = status
        self.assignee = assignee
        self.cc: list[str] = [] if cc is None else cc
        self.labels: list[str] = [] if labels is None else labels
        self.priority = priority
        self.thread = thread
        self.reply_to = reply_to
        self.parent = parent
        self.closed_at = closed_at
        self.close_reason = close_reason
        self.meta: dict[str, Any] = {} if meta is None else meta

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Bead({fields})"

    def to_dict(self) -> dict[str, Any]:
        """The bead as a plain mapping in canonical field order (keys as in YAML/JSON)."""
        out: dict[str, Any] = {}
        for key in FIELD_ORDER:
            value = getattr(self, "sender" if key == "from" else key)
            if isinstance(value, list):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: Any, *, validate: bool = True, max_body: int | None = None) -> Bead:
        """Build a bead from a mapping (parsed YAML or JSON); validates unless told not to."""
        if not isinstance(data, dict):
            raise InvalidInput("a bead must be a mapping of fields")
        unknown = set(data) - set(FIELD_ORDER)
        if unknown:
            raise InvalidInput(f"unknown bead field(s): {', '.join(sorted(map(str, unknown)))}")
        missing = [
            k
            for k in ("id", "type", "title", "from", "created_at", "updated_at")
            if data.get(k) is None
        ]
        if missing:
            raise InvalidInput(f"bead is missing field(s): {', '.join(missing)}")
        kwargs = {("sender" if k == "from" else k): v for k, v in data.items()}
        for key in ("cc", "labels"):
            if kwargs.get(key) is None:
                kwargs[key] = []
        if kwargs.get("meta") is None:
            kwargs["meta"] = {}
        if kwargs.get("body") is None:
            kwargs["body"] = ""
        bead = cls(**kwargs)
        if validate:
            bead.validate(max_body=max_body)
        return bead

    def with_changes(self, **changes: Any) -> Bead:
        """A copy with some fields replaced (not validated: call `validate`)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"Bead has no field(s) {', '.join(sorted(unknown))}")
        return Bead(**{**fields, **changes})

    def validate(self, *, max_body: int | None = None) -> None:
        """Raise InvalidInput naming the first field that breaks the record's rules."""
        check_id(self.id)
        check_type(self.type)
        check_text("title", self.title)
        if not self.title.strip():
            raise InvalidInput("title must not be empty")
        if "\n" in self.title or "\r" in self.title:
            raise InvalidInput("title must be a single line")
        if len(self.title) > MAX_TITLE_CHARS:
            raise InvalidInput(f"title is longer than {MAX_TITLE_CHARS} characters")
        check_text("body", self.body)
        limit = DEFAULT_MAX_BODY_BYTES if max_body is None else max_body
        size = len(self.body.encode("utf-8"))
        if size > limit:
            raise InvalidInput(f"body is {size} bytes; the limit is {limit} (store.max_body_bytes)")
        if self.status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {self.status!r}")
        check_agent(self.sender, what="from")
        if self.assignee is not None:
            check_agent(self.assignee, what="assignee")
        _check_list("cc", self.cc, lambda v: check_agent(v, what="cc"))
        _check_list("labels", self.labels, check_label)
        if type(self.priority) is not int or not 0 <= self.priority <= 4:
            raise InvalidInput(f"priority must be an integer 0-4, not {shown(self.priority)}")
        for name in ("thread", "reply_to", "parent"):
            value = getattr(self, name)
            if value is not None:
                check_id(value, what=name)
        for name in ("created_at", "updated_at", "closed_at"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and TIME_RE.fullmatch(value)):
                raise InvalidInput(f"{name} must be a UTC time like 2026-01-31T12:00:00.000000Z")
        if self.status == "closed" and self.closed_at is None:
            raise InvalidInput("a closed bead needs closed_at")
        if self.status == "open" and (self.closed_at is not None or self.close_reason is not None):
            raise InvalidInput("an open bead has no closed_at or close_reason")
        if self.close_reason is not None:
            check_text("close_reason", self.close_reason)
        if not isinstance(self.meta, dict):
            raise InvalidInput("meta must be a mapping")
        budget = [MAX_META_VALUES, limit]  # values, then text bytes, left to spend
        for key, value in self.meta.items():
            check_meta_key(key)
            _check_meta_value(key, value, budget)


def check_agent(name: Any, *, what: str = "agent") -> str:
    """Return `name` if it is a valid agent name, else raise InvalidInput."""
    if name == "":
        raise InvalidInput(f"the {what} name is empty")
    if not isinstance(name, str) or not AGENT_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid {what} name {shown(name)}: use letters, digits, '.', '_' or '-' "
            "(at most 64), or rig/name"
        )
    if name in RESERVED_AGENTS:
        raise InvalidInput(f"{what} name {name!r} is reserved")
    return name


def expect_type(bead: Bead, wanted: str) -> Bead:
    """`bead` if it is of type `wanted`, else InvalidInput "gc-x is a task, not a gate": the
    one rule for an id of the wrong kind given to a command (mail, gates, decisions)."""
    if bead.type != wanted:
        raise InvalidInput(f"{bead.id} is a {bead.type}, not a {wanted}")
    return bead


def check_type(name: Any) -> str:
    """Return `name` if it is a valid bead type, else raise InvalidInput."""
    if not isinstance(name, str) or not TYPE_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid type {shown(name)}: "
            "lowercase letters, digits, '_' or '-', starting with a letter"
        )
    return name


def check_label(label: Any) -> str:
    """Return `label` if it is a valid label, else raise InvalidInput."""
    if not isinstance(label, str) or not re.fullmatch(LABEL, label):
        raise InvalidInput(f"invalid label {shown(label)}: no spaces, at most 128 characters")
    return label


def check_meta_key(key: Any) -> str:
    """Return `key` if it is a valid meta key, else raise InvalidInput."""
    if not isinstance(key, str) or not META_KEY_RE.fullmatch(key):
        raise InvalidInput(f"invalid meta key {shown(key)}")
    return key


def shown(value: Any, limit: int = 60) -> str:
    """`value` as an error line quotes it: its repr, cut at `limit` characters (a 100 KB
    argument is named, not echoed)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for str()
        return "(a number too long to show)"
    return text if len(text) <= limit else text[:limit] + "..."


def shorten(text: str, width: int = 60) -> str:
    """`text` on one line (whitespace runs made one space), cut to `width` characters with
    "..." (commit messages, mail titles)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def check_text(name: str, value: Any) -> str:
    """Return `value` if it is text that is valid UTF-8 without NUL, else raise InvalidInput.

    Undecodable bytes of a command line reach Python as lone surrogates: they fail here.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text")
    if "\x00" in value:
        raise InvalidInput(f"{name} contains a NUL byte (binary data is not accepted)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} is not valid UTF-8 text") from None
    return value


def _check_list(name: str, value: Any, check: Any) -> None:
    if not isinstance(value, list):
        raise InvalidInput(f"{name} must be a list")
    if len(value) > MAX_LIST_ITEMS:
        raise InvalidInput(f"{name} has {len(value)} entries; at most {MAX_LIST_ITEMS}")
    for item in value:
        check(item)
    if len(set(value)) != len(value):
        raise InvalidInput(f"{name} has duplicates")


def _check_meta_value(key: str, value: Any, budget: list[int], depth: int = 0) -> None:
    # `budget`: [values, text bytes] left for the whole meta mapping; spent as it is walked.
    budget[0] -= 1
    if budget[0] < 0:
        raise InvalidInput(f"meta holds more than {MAX_META_VALUES} values")
    if depth > 8:
        raise InvalidInput(f"meta {key!r} is nested too deeply")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise InvalidInput(f"meta {key!r} is an integer outside 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"meta {key!r} must be a finite number")
        return
    if isinstance(value, str):
        check_text(f"meta {key!r}", value)
        budget[1] -= len(value.encode("utf-8"))
        if budget[1] < 0:
            raise InvalidInput("meta holds more text than store.max_body_bytes")
        return
    if isinstance(value, list):
        for item in value:
            _check_meta_value(key, item, budget, depth + 1)
        return
    if isinstance(value, dict):
        for sub_key, item in value.items():
            check_meta_key(sub_key)
            _check_meta_value(key, item, budget, depth + 1)
        return
    raise InvalidInput(
        f"meta {key!r} must be text, a number, true/false, null, a list or a mapping"
    )


# Who is acting when no agent is given, in Gas City's order; values are trimmed.
IDENTITY_ENV = ("GC_ALIAS", "GC_SESSION_ID", "GC_AGENT")


def identity_order() -> str:
    """`acting_agent`'s order in words, for help texts and skills: "$GC_ALIAS, $GC_SESSION_ID,
    $GC_AGENT, human" (made from the one list it reads, so the text cannot drift from it)."""
    return ", ".join([*(f"${name}" for name in IDENTITY_ENV), "human"])


def acting_agent(explicit: str | None = None) -> str:
    """Who is acting: `explicit` (an empty one is refused), else the first of $GC_ALIAS,
    $GC_SESSION_ID, $GC_AGENT that is set (trimmed), else `human`. The one rule: every
    command and the hook resolve the agent here."""
    if explicit is not None:
        return check_agent(explicit, what="agent")
    for name in IDENTITY_ENV:
        candidate = os.environ.get(name, "").strip()
        if candidate:
            return check_agent(candidate, what=f"${name}")
    return "human"
