"""Work threads over a bead store: `Threads(store)`, the operations of seed 002.

Every change is one commit through the mail layer's producer path (`mail.threads.writing`),
and writes at least one message bead in the thread: the user's message (task, progress,
question, answer, result, control) and, when the thread's status or lease changes, an `event`
message whose payload says what changed. A message with a recipient is that agent's mail as
well: it shows in `gc mail inbox` and is announced like any mail.

`Threads` is built in layers, one job a module: reads (`mail.threads.queries`), waiting
(`mail.threads.waiting`), the commit path (`mail.threads.writing`), leases
(`mail.threads.leases`: claim, renew, release), and here the messages and the ends of a
thread (send, update, reply, done, fail, cancel).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beads.errors import InvalidInput
from beads.records.record import check_agent
from mail.threads import rules
from mail.threads.leases import ThreadLeases, held_by
from mail.threads.model import (
    HELD,
    MESSAGE,
    POOL,
    TERMINAL,
    THREAD,
    Thread,
    ThreadMessage,
    check_kind,
    check_status,
    priority_level,
    summary_line,
)
from mail.threads.writing import ThreadWrite


class Threads(ThreadLeases):
    """Work threads of one store: create, claim, report, wait, finish (seed 002)."""

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
        lease_token: str | None = None,
    ) -> tuple[Thread, ThreadMessage]:
        """Start a thread (status pending) with its first message, or, with `thread`, add a
        message to one. A thread made without `to` is open to every agent (`fetch`).

        Who may post which kind is `mail.threads.rules`: a new thread opens with a task,
        question, answer or control message; in an existing one, `progress` and `result`
        are the lease holder's (`lease_token`, else its own claim's), `task` its creator's,
        and `event` nobody's."""
        check_agent(sender, what="sender")
        if to is not None:
            check_agent(to, what="recipient")
        check_kind(kind)
        rules.role(kind)
        level = priority_level(priority)
        if thread is not None:
            if subject is not None or run_id is not None or task_id is not None:
                raise InvalidInput("--subject, --run and --task are for a new thread, not --thread")
            with self._writing(thread) as w:
                self._may_post(w.thread, sender, kind, lease_token)
                text = summary_line(summary, w.thread.subject)
                made = w.message(sender, to, kind, text, body, payload, artifacts)
                w.describe("send", sender, made.title)
            return w.thread, self._shown(made)
        if subject is None or not subject.strip():
            raise InvalidInput("a new thread needs --subject (or --thread to add to one)")
        rules.check_opening(kind)
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
            w = ThreadWrite(self, batch, changes, Thread.from_bead(bead))
            text = summary_line(summary, title)
            made = w.message(sender, to, kind, text, body, payload, artifacts)
            w.describe("new", sender, title)
        return w.thread, self._shown(made)

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
        lease_token: str | None = None,
    ) -> tuple[Thread, ThreadMessage]:
        """Report on a held thread: a `progress` message, or with `status` blocked a
        `question` (to the thread's creator), which must say what is missing (a summary,
        a body or a payload `question`); a status change also writes its event.
        `lease_token` (else this object's own claim's) must be the live lease's."""
        check_agent(agent)
        if status is not None:
            check_status(status, ("in_progress", "blocked"), "--status")
        with self._writing(thread) as w:
            current = w.thread
            allowed = {
                None: HELD,
                "in_progress": ("claimed", "in_progress", "blocked"),
                "blocked": ("in_progress", "blocked"),
            }[status]
            if current.status not in allowed:
                raise w.refuse(f"update --status {status}" if status else "update")
            held_by(current, agent, self._token(agent, current.thread_id, lease_token))
            if status == "blocked":
                rules.check_blocked(summary, body, payload)
            kind = "question" if status == "blocked" else "progress"
            to = _other(current, agent) if kind == "question" else None
            text = summary_line(summary, f"{kind}: {current.subject}")
            made = w.message(agent, to, kind, text, body, payload, artifacts)
            bead = None
            if status is not None and status != current.status:
                change = {"event": "status", "from": current.status, "to": status}
                bead = w.change(agent, change, status=status)
            w.describe("update", agent, text)
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
        lease_token: str | None = None,
    ) -> ThreadMessage:
        """A message in the thread, to `to` (default: the other side: the assignee when the
        creator writes, else the creator). Changes no status. Anyone answers, asks or
        steers (`answer`, `question`, `control`); `progress` and `result` are the lease
        holder's, `task` the creator's, `event` nobody's (`mail.threads.rules`). The
        holder's reply is checked as its other writes are (`lease_token`, else its own
        claim's); anyone else's is not, unless it gives a token."""
        check_agent(sender, what="sender")
        if to is not None:
            check_agent(to, what="recipient")
        check_kind(kind)
        rules.role(kind)
        with self._writing(thread) as w:
            self._may_post(w.thread, sender, kind, lease_token)
            to = to if to is not None else _other(w.thread, sender)
            text = summary_line(summary, f"{kind}: {w.thread.subject}")
            made = w.message(sender, to, kind, text, body, payload, artifacts)
            w.describe("reply", sender, text)
        return self._shown(made)

    def done(self, agent: str, thread: str, **result: Any) -> tuple[Thread, ThreadMessage]:
        """Finish a held thread: a `result` message (to the creator), status done. The
        result is said (`summary` or `body`), else InvalidInput."""
        return self._finish(agent, thread, "done", **result)

    def fail(self, agent: str, thread: str, **result: Any) -> tuple[Thread, ThreadMessage]:
        """End a held thread as failed: a `result` message (to the creator), status failed.
        Why is said (`summary` or `body`), else InvalidInput."""
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
        lease_token: str | None = None,
    ) -> tuple[Thread, ThreadMessage]:
        check_agent(agent)
        verb = "done" if status == "done" else "fail"
        with self._writing(thread) as w:
            current = w.thread
            if current.status not in HELD:
                raise w.refuse("finish (done)" if verb == "done" else "fail")
            held_by(current, agent, self._token(agent, current.thread_id, lease_token))
            rules.check_result(verb, summary, body)
            text = summary_line(summary, f"{status}: {current.subject}")
            to = _other(current, agent)
            made = w.message(agent, to, "result", text, body, payload, artifacts)
            change = {"event": "status", "from": current.status, "to": status}
            bead = w.change(agent, change, status=status, unset=("lease",))
            w.describe(verb, agent, text)
        self.own_tokens.pop((agent, current.thread_id), None)
        return Thread.from_bead(bead), self._shown(made)

    def cancel(
        self,
        agent: str,
        thread: str,
        *,
        reason: str | None = None,
        artifacts: Sequence[dict[str, Any]] = (),
        lease_token: str | None = None,
    ) -> Thread:
        """Cancel a thread that is not finished (anyone may: a leader's override; the
        holder's cancel is checked as its other writes are)."""
        check_agent(agent)
        with self._writing(thread) as w:
            current = w.thread
            if current.status in TERMINAL:
                raise w.refuse("cancel")
            self._as_holder(current, agent, lease_token)
            change: dict[str, Any] = {"event": "status", "from": current.status, "to": "cancelled"}
            if current.lease is not None:
                change["lease"] = current.lease.to_json()
            bead = w.change(
                agent,
                change,
                status="cancelled",
                unset=("lease",),
                summary=reason,
                artifacts=artifacts,
            )
            w.describe("cancel", agent, reason or "")
        self.own_tokens.pop((agent, current.thread_id), None)
        return Thread.from_bead(bead)

    def _may_post(self, thread: Thread, sender: str, kind: str, lease_token: str | None) -> None:
        """Refuse a message of `kind` that `sender` may not post in `thread`: a report
        (progress, result) from anyone but the live lease's holder (LeaseConflict), a task
        from anyone but the creator (InvalidInput)."""
        who = rules.role(kind)
        if who == "holder":
            held_by(thread, sender, self._token(sender, thread.thread_id, lease_token))
            return
        if who == "creator":
            rules.check_creator(thread, sender, kind)
        self._as_holder(thread, sender, lease_token)

    def _as_holder(self, thread: Thread, agent: str, lease_token: str | None) -> None:
        """For writes anyone may make (reply, cancel): a given token must be the live
        lease's; without one, the lease's agent acting is checked against its own claim."""
        token = self._token(agent, thread.thread_id, lease_token)
        if token is None:
            return
        if lease_token is not None or (thread.lease is not None and thread.lease.agent == agent):
            held_by(thread, agent, token)


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 200:
        raise InvalidInput(f"{what} must be one line of at most 200 characters")
    return value


def _other(thread: Thread, agent: str) -> str | None:
    """Who a message from `agent` goes to by default: the other side of the thread."""
    if agent != thread.created_by:
        return thread.created_by
    return thread.assigned_to if thread.assigned_to != agent else None


def origins_of(api: Threads, messages: Sequence[ThreadMessage | None]) -> dict[str, str]:
    """The note of each of `messages` written on another machine (or pushed with plain
    git), by message id (`inbox.origin.notes_of`: one lookup for them all)."""
    from inbox.origin import notes_of

    ids = [m.message_id for m in messages if m is not None]
    return notes_of(api.store.root, MESSAGE, ids, git=api.store.git) if ids else {}


def with_origin(message: ThreadMessage, origins: dict[str, str]) -> dict[str, Any]:
    """A message as --json gives it, with its `"origin"` (null for one written here)."""
    return {**message.to_json(), "origin": origins.get(message.message_id, "").strip() or None}
