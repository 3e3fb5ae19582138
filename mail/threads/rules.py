"""Who may post which kind of message in a work thread, and what some messages must carry.

The roles of seed 002:

- the holder of the thread's live lease reports: `progress` and `result` (and its blocked
  `question`, through `update --status blocked`);
- anyone answers, asks or steers: `answer`, `question`, `control`;
- the thread's creator gives the work: `task` (it opens a thread);
- `event` messages are gc's own, written when a status or a lease changes: nobody posts one.

The content rules: a blocked update says what is missing, and `done` and `fail` carry a
summary of the result or of the failure. These functions decide only; `mail.threads.api`
checks the lease itself (`held_by`, with the token) when a kind is the holder's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from beads.errors import InvalidInput
from mail.threads.model import TERMINAL, Thread, ThreadMessage

HOLDER_KINDS = ("progress", "result")  # the lease holder's reports
OPEN_KINDS = ("question", "answer", "control")  # anyone's
CREATOR_KINDS = ("task",)  # the thread's creator's
SYSTEM_KINDS = ("event",)  # gc's own
OPENING_KINDS = CREATOR_KINDS + OPEN_KINDS  # what a new thread may start with


def role(kind: str) -> str:
    """Who may post a message of `kind`: "holder", "creator" or "anyone"; an `event` is
    refused (InvalidInput): gc writes those itself."""
    if kind in SYSTEM_KINDS:
        raise InvalidInput(
            "event messages are written by gc when a status or lease changes; "
            f"post one of {', '.join(OPEN_KINDS + HOLDER_KINDS + CREATOR_KINDS)}"
        )
    if kind in HOLDER_KINDS:
        return "holder"
    if kind in CREATOR_KINDS:
        return "creator"
    return "anyone"


def check_opening(kind: str) -> None:
    """A new thread starts with a task, a question, an answer or a control message: nobody
    holds its lease yet, so it cannot start with a report (progress, result)."""
    role(kind)
    if kind not in OPENING_KINDS:
        raise InvalidInput(
            f"a new thread cannot start with a {kind} message (only the holder of its lease "
            f"reports {' and '.join(HOLDER_KINDS)}); start it with one of "
            f"{', '.join(OPENING_KINDS)}"
        )


def check_creator(thread: Thread, sender: str, kind: str) -> None:
    """A `task` message in an existing thread comes from the agent who created it."""
    if sender != thread.created_by:
        raise InvalidInput(
            f"only {thread.created_by}, who created thread {thread.thread_id}, posts {kind} "
            f"messages in it; reply with one of {', '.join(OPEN_KINDS)}"
        )


def check_blocked(summary: str | None, body: str, payload: dict[str, Any] | None) -> None:
    """A blocked update says what is missing: a --summary, a --body, or a "question" in
    its payload."""
    question = (payload or {}).get("question")
    if _said(summary) or _said(body) or (isinstance(question, str) and _said(question)):
        return
    raise InvalidInput(
        "a blocked update must say what is missing: give --summary (or --body, or a "
        '"question" in --payload-json)'
    )


def check_result(verb: str, summary: str | None, body: str) -> None:
    """`done` carries a summary of its result, `fail` one of the failure (--summary or
    --body)."""
    if _said(summary) or _said(body):
        return
    what = "its result" if verb == "done" else "why it failed"
    raise InvalidInput(f"{verb} must say {what}: give --summary (and --body or --body-file)")


def holder_before(messages: Iterable[ThreadMessage], event_id: int) -> str | None:
    """The agent holding the thread's lease just before the message numbered `event_id`,
    read from the thread's `event` messages numbered before it: a claim gives the lease, a
    release takes it back, another agent's end of the thread (a leader's cancel) takes it.

    The holder's own end of the thread is not counted: `done` and `fail` write their result
    and the status event in one commit, whose beads may be numbered in either order."""
    holder: str | None = None
    for message in sorted(
        (m for m in messages if m.event_id is not None and m.event_id < event_id),
        key=lambda m: m.event_id or 0,
    ):
        if message.kind != "event":
            continue
        change = message.payload
        if change.get("event") == "claimed":
            lease = change.get("lease")
            agent = lease.get("agent") if isinstance(lease, dict) else None
            holder = agent if isinstance(agent, str) else message.from_agent
        elif change.get("event") == "released":
            holder = None
        elif change.get("to") in TERMINAL and message.from_agent != holder:
            holder = None
    return holder


def _said(text: str | None) -> bool:
    return text is not None and bool(text.strip())
