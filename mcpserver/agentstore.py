"""The store as one agent sees it through `gc mcp`: held open between calls, never locked
between them, reopened when `gc doctor` replaced what it holds open.

Every operation acts as the agent the server was started for (`beads.records.record.acting_agent`:
`--agent`, else `$GC_ALIAS`, `$GC_SESSION_ID`, `$GC_AGENT`, else `human`): no operation takes
an acting agent or a sender. Each returns what the CLI's `--json` prints for the same command
(without `ok` and `command`, which the server adds), built by the same functions.

Freshness. Reads go through the index, which catches up with the branch by itself, so a write
by another process (the CLI, a hook, a sync) is seen by the next call. What the index cannot
notice is its own file being replaced (`gc doctor --rebuild-index` renames a new one into
place when the old one cannot take the rebuilt index's copy) or the packs being rewritten
(`gc doctor --gc`): each call compares the index file's `(st_dev, st_ino)` and the pack
directory's `(st_ino, st_mtime_ns)` with those seen at open, and reopens the store when they
differ. The inode alone tells a replaced index file: the open connection keeps the old inode
alive, so the new file cannot be given its number.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from beads.errors import InvalidInput, NotFound
from beads.index.dbfile import file_id
from beads.location import find_store
from beads.records.record import Bead, acting_agent, expect_type
from beads.records.times import now_stamp
from beads.store import Store
from inbox.delivery import Delivery
from inbox.items import Item
from inbox.origin import note_of, notes_of
from mail import api
from mail.beadmail import BeadMail, bead_message
from mail.message import Message
from mail.provider import Provider
from mail.threads.api import Threads, origins_of, with_origin
from mail.threads.model import Thread, ThreadMessage, Wake, artifact
from mail.threads.tokens import keep_token, read_tokens
from mail.unread import MESSAGE

ITEM_TIMES = ("created_at", "expires_at", "settled_at")
PENDING_ITEMS = ("pending", "delivering")
ALL_ITEMS = ("pending", "delivering", "delivered", "expired", "moot")
OPEN_THREADS = ("pending", "claimed", "in_progress", "blocked")
DECISION = "decision"
HUMAN = "human"


class AgentStore:
    """One store and one agent: the operations of the `gc mcp` tools."""

    def __init__(self, beads_dir: str | None = None, agent: str | None = None) -> None:
        self.root = find_store(beads_dir)
        self.agent = acting_agent(agent)
        self.reopened = 0  # how many times a replaced index or pack made it reopen
        self._tokens: dict[tuple[str, str], str] = {}
        self._open()

    # -- the open store ----------------------------------------------------------------------

    def _identity(self) -> tuple[Any, ...]:
        """What tells a replaced index file or rewritten packs (see the module's docstring)."""
        try:
            packs = os.stat(self.root / ".git" / "objects" / "pack")
            pack_id: tuple[int, int] | None = (packs.st_ino, packs.st_mtime_ns)
        except OSError:
            pack_id = None
        return file_id(self.root / ".runtime" / "index.sqlite3"), pack_id

    def _open(self) -> None:
        while True:
            before = self._identity()
            self.store = Store(self.root, agent=self.agent)
            after = self._identity()
            if before == after:  # nothing was replaced while it opened
                break
            self.store.close()
        self._seen = after
        self.threads = Threads(self.store)
        self.threads.own_tokens.update(self._tokens)
        self._tokens = self.threads.own_tokens
        self._provider: Provider | None = None
        self._delivery: Delivery | None = None

    def close(self) -> None:
        """Close the store and what was opened over it."""
        if self._provider is not None:
            self._provider.close()
        if self._delivery is not None:
            self._delivery.close()
        self.threads.close()
        self.store.close()

    def fresh(self) -> None:
        """Reopen the store if its index file or packs were replaced since the last call."""
        if self._identity() != self._seen:
            self.close()
            self._open()
            self.reopened += 1

    @property
    def provider(self) -> Provider:
        """The mail provider, chosen as `gc mail` chooses it, opened on first use."""
        if self._provider is None:
            from mail.select import open_provider

            self._provider = open_provider(lambda: self.store, config=lambda: self.store.config)
        return self._provider

    @property
    def delivery(self) -> Delivery:
        """The store's delivery database, opened on first use."""
        if self._delivery is None:
            self._delivery = Delivery(self.store.root, config=lambda: self.store.config)
        return self._delivery

    # -- mail --------------------------------------------------------------------------------

    def mail_send(
        self,
        to: Sequence[str],
        subject: str,
        body: str,
        *,
        cc: Sequence[str] = (),
        priority: int = 2,
        dedup: str | None = None,
    ) -> dict[str, Any]:
        """`gc mail send --json`, with the send's warnings (unknown recipients) as data."""
        sent, warnings = api.send(self.provider, self.agent, to, subject, body, cc=cc,
                                  priority=priority, dedup=dedup)  # fmt: skip
        payload: dict[str, Any] = {
            "suppressed": any(m.suppressed for m in sent),
            "message": sent[0].to_json(),
            "messages": [m.to_json() for m in sent],
        }
        if warnings:
            payload["warnings"] = warnings
        return payload

    def mail_reply(self, message_id: str, body: str, subject: str = "") -> dict[str, Any]:
        """`gc mail reply --json`: answer a message of this agent's mailbox."""
        self._in_mailbox(message_id)
        sent, warnings = api.reply(self.provider, message_id, self.agent, subject, body)
        payload: dict[str, Any] = {"message": sent[0].to_json()}
        if warnings:
            payload["warnings"] = warnings
        return payload

    def mail_inbox(
        self, *, read_too: bool = False, archived: bool = False, limit: int | None = None
    ) -> dict[str, Any]:
        """`gc mail inbox --json` of this agent: unread (`read_too`: all; or `archived`)."""
        if read_too and archived:
            raise InvalidInput("give all or archived, not both")
        chosen = self.provider
        if archived:
            messages = chosen.archived(self.agent)
        elif read_too:
            messages = api.in_order(chosen.all(self.agent))
        else:
            messages = api.inbox(chosen, self.agent)
        return {"recipient": self.agent, "messages": chosen.listed(messages[:limit])}

    def mail_read(self, message_id: str) -> dict[str, Any]:
        """`gc mail read --json`: a message of this agent's mailbox, marked read."""
        self._in_mailbox(message_id)
        message = self.provider.read(message_id)
        return {
            "message": message.to_json(),
            "origin": self.provider.origin(message.id).strip() or None,
        }

    def mail_peek(self, message_id: str) -> dict[str, Any]:
        """`gc mail peek --json`: a message this agent sent or received, left as it is."""
        message = self.provider.get(message_id)
        if not self._party(message):
            raise self._not_yours(message_id)
        return {
            "message": message.to_json(),
            "origin": self.provider.origin(message.id).strip() or None,
        }

    def mail_archive(self, message_ids: Sequence[str]) -> dict[str, Any]:
        """`gc mail archive --json`: messages of this agent's mailbox, all or none."""
        if not message_ids:
            raise InvalidInput("give at least one message id")
        for message_id in message_ids:
            self._in_mailbox(message_id)
        result = api.change(self.provider, "archive", message_ids)
        return {"archived": result["done"], "already": result["already"]}

    def mail_thread(self, thread_or_message_id: str) -> dict[str, Any]:
        """`gc mail thread --json`: the messages of a thread (by its id or a message's) that
        this agent sent or received."""
        chosen = self.provider
        messages = chosen.thread(thread_or_message_id)
        if not messages:
            found = chosen.get(thread_or_message_id)  # not_found when it is neither
            messages = chosen.thread(found.thread_id or found.id)
        return {"messages": chosen.listed([m for m in messages if self._party(m)])}

    def mail_count(self) -> dict[str, Any]:
        """`gc mail count --json` of this agent's mailbox."""
        counts = self.provider.count(self.agent)
        return {"recipient": self.agent, "total": counts.total, "unread": counts.unread}

    def mail_search(self, query: str, *, limit: int = 20, archived: bool = True) -> dict[str, Any]:
        """Full-text search over this agent's mail, newest first (the index's word search, as
        the `gc web` search page's): the copies in its mailbox (`archived`: archived ones too)
        and the messages it sent (each send once). Each message as `gc mail` shows it, with
        whose `mailbox` holds that copy and whether it is `archived`; `more` when a larger
        `limit` would show more."""
        store = self._beadmail_store("search")
        status = None if archived else "open"
        common: dict[str, Any] = {"type": MESSAGE, "text": query, "descending": True}
        received = store.list(**common, assignee=self.agent, status=status, limit=limit + 1)
        sent = [b for b in store.list(**common, sender=self.agent, limit=limit + 1)
                if not b.meta.get("to") and b.assignee != self.agent]  # fmt: skip
        found = sorted({b.id: b for b in received + sent}.values(),
                       key=lambda b: (b.created_at, b.id), reverse=True)  # fmt: skip
        return {
            "query": query,
            "messages": [_message_json(b) for b in found[:limit]],
            "more": len(found) > limit,
        }

    def _beadmail_store(self, what: str) -> Store:
        if not isinstance(self.provider, BeadMail):
            raise InvalidInput(f"mail {what} needs the beadmail provider, not {self.provider.name}")
        return self.store

    def _party(self, message: Message) -> bool:
        return self.agent in (message.sender, message.mailbox or message.to)

    def _in_mailbox(self, message_id: str) -> Message:
        message = self.provider.get(message_id)
        if (message.mailbox or message.to) != self.agent:
            raise self._not_yours(message_id)
        return message

    def _not_yours(self, message_id: str) -> NotFound:
        return NotFound(f"message {message_id} is not in {self.agent}'s mail")

    # -- work threads ------------------------------------------------------------------------

    def thread_send(
        self,
        *,
        to: str | None = None,
        subject: str | None = None,
        thread_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
        kind: str = "task",
        summary: str | None = None,
        body: str = "",
        payload: dict[str, Any] | None = None,
        priority: str | int = "normal",
        artifacts: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """`gc thread send --json`: a new thread (status pending), or a message in one."""
        made, sent = self.threads.send(self.agent, to=to, subject=subject, thread=thread_id,
                                       run_id=run_id, task_id=task_id, kind=kind,
                                       summary=summary, body=body, payload=payload,
                                       priority=priority,
                                       artifacts=_artifacts(artifacts))  # fmt: skip
        return _thread_reply(made, sent)

    def thread_fetch(
        self, *, statuses: Sequence[str] = ("pending",), limit: int = 20, unread: bool = False
    ) -> dict[str, Any]:
        """`gc thread fetch --json`: this agent's candidate threads; claims nothing."""
        found = self.threads.fetch(self.agent, statuses=statuses, limit=limit, unread=unread)
        now = now_stamp()
        return {"threads": [t.to_json(now) for t in found]}

    def thread_show(self, thread_id: str) -> dict[str, Any]:
        """`gc thread show --json`: the thread and its messages in event order."""
        found, messages = self.threads.show(thread_id)
        origins = origins_of(self.threads, messages)
        return {
            "thread": found.to_json(now_stamp()),
            "messages": [with_origin(m, origins) for m in messages],
        }

    def thread_claim(self, thread_id: str, lease_seconds: float) -> dict[str, Any]:
        """`gc thread claim --json`: take the lease (lease_conflict while another holds it)."""
        lease = self.threads.claim(self.agent, thread_id, lease_seconds=lease_seconds)
        held = self.threads.get(thread_id)
        keep_token(self.store, self.agent, held.thread_id, lease.token)
        return {"thread": held.to_json(now_stamp()), "lease": lease.to_json()}

    def thread_renew(
        self, thread_id: str, lease_seconds: float, lease_token: str | None = None
    ) -> dict[str, Any]:
        """`gc thread renew --json`: extend the lease this agent holds."""
        threads = self._as_holder()
        lease = threads.renew(self.agent, thread_id, lease_seconds=lease_seconds,
                              lease_token=lease_token)  # fmt: skip
        return {"thread": threads.get(thread_id).to_json(now_stamp()), "lease": lease.to_json()}

    def thread_update(
        self, thread_id: str, *, status: str | None = None, lease_token: str | None = None,
        **message: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """`gc thread update --json`: progress on a held thread; `blocked` asks a question."""
        changed, sent = self._as_holder().update(
            self.agent, thread_id, status=status, lease_token=lease_token, **_content(message)
        )
        return _thread_reply(changed, sent)

    def thread_reply(
        self, thread_id: str, *, to: str | None = None, kind: str = "answer",
        lease_token: str | None = None, **message: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """`gc thread reply --json`: a message in the thread (to the other side by default)."""
        sent = self._as_holder().reply(
            self.agent, thread_id, to=to, kind=kind, lease_token=lease_token, **_content(message)
        )
        return {"message": sent.to_json()}

    def thread_finish(
        self, verb: str, thread_id: str, *, lease_token: str | None = None, **message: Any
    ) -> dict[str, Any]:
        """`gc thread done --json` or `gc thread fail --json` (`verb`) on a held thread."""
        finish = getattr(self._as_holder(), verb)
        finished, sent = finish(self.agent, thread_id, lease_token=lease_token,
                                **_content(message))  # fmt: skip
        keep_token(self.store, self.agent, finished.thread_id, None)
        return _thread_reply(finished, sent)

    def thread_release(
        self, thread_id: str, reason: str | None = None, lease_token: str | None = None
    ) -> dict[str, Any]:
        """`gc thread release --json`: give the lease back (the thread is pending again)."""
        released = self._as_holder().release(self.agent, thread_id, reason=reason,
                                             lease_token=lease_token)  # fmt: skip
        keep_token(self.store, self.agent, released.thread_id, None)
        return _thread_reply(released, None)

    def thread_cancel(
        self, thread_id: str, reason: str | None = None, lease_token: str | None = None
    ) -> dict[str, Any]:
        """`gc thread cancel --json`: cancel a thread that is not finished."""
        cancelled = self._as_holder().cancel(self.agent, thread_id, reason=reason,
                                             lease_token=lease_token)  # fmt: skip
        keep_token(self.store, self.agent, cancelled.thread_id, None)
        return _thread_reply(cancelled, None)

    def thread_wait_step(
        self,
        thread_id: str,
        *,
        after_event: int | None = None,
        after_message: str | None = None,
        kinds: Sequence[str] | None = None,
        lease_token: str | None = None,
    ) -> Wake:
        """One look for a reply in the thread after the cursor (never blocks): the server
        repeats it each time the branch moves, until a reply, the timeout or a cancel."""
        extra: dict[str, Any] = {} if kinds is None else {"kinds": kinds}
        return self.threads.wait_reply(thread_id, after_event=after_event,
                                       after_message=after_message, timeout=0,
                                       lease_token=lease_token, **extra)  # fmt: skip

    def thread_origin(self, message: ThreadMessage | None) -> str | None:
        """Where a thread's message was written when another machine (or plain git) wrote
        it, as `gc thread wait-reply --json` says it (`"origin"`); None for here."""
        if message is None:
            return None
        found = note_of(self.store.root, MESSAGE, message.message_id, git=self.store.git)
        return found.strip() or None

    def _as_holder(self) -> Threads:
        """The threads, knowing the tokens of this agent's claims made on this machine by
        other processes too (`mail.threads.tokens`), as the CLI's holder commands do."""
        for thread_id, token in read_tokens(self.store, self.agent).items():
            self.threads.remember(self.agent, thread_id, token)
        return self.threads

    # -- inbox items -------------------------------------------------------------------------

    def inbox_list(self, *, every: bool = False, delivered: bool = False,
                   limit: int | None = None) -> dict[str, Any]:  # fmt: skip
        """`gc inbox list --json` of this agent: undelivered items (or delivered, or all)."""
        if every and delivered:
            raise InvalidInput("give all or delivered, not both")
        states = ALL_ITEMS if every else ("delivered",) if delivered else PENDING_ITEMS
        who = self._items_agent()
        items = self.delivery.items(who, states)[:limit]
        return {"agent": who, "items": [_item_json(i) for i in items]}

    def inbox_peek(self, item_id: int) -> dict[str, Any]:
        """One of this agent's items, in any state, left as it is."""
        who = self._items_agent()
        for item in self.delivery.items(who, ALL_ITEMS):
            if item.id == item_id:
                return {"agent": who, "item": _item_json(item)}
        raise NotFound(f"no item {item_id} for {who}")

    def _items_agent(self) -> str:
        delivery = self.delivery
        who = delivery.agent_of(self.agent)
        delivery.refresh()  # items of commits no hook has derived yet
        delivery.settle_moot(who)
        return who

    # -- decisions ---------------------------------------------------------------------------

    def decision_list(self, *, answered: bool = False) -> dict[str, Any]:
        """`gc decision list --json`, of the decisions assigned to this agent (never those
        of `human`: a person answers them)."""
        if self.agent == HUMAN:
            return {"beads": []}
        status = None if answered else "open"
        found = self.store.list(type=DECISION, assignee=self.agent, status=status)
        ids = [d.id for d in found]
        origins = notes_of(self.store.root, DECISION, ids, git=self.store.git)
        return {"beads": [{**d.to_dict(), "origin": origins.get(d.id, "").strip() or None}
                          for d in found]}  # fmt: skip

    def decision_answer(self, decision_id: str, option: str, text: str | None) -> dict[str, Any]:
        """`gc decision respond --json`, for a decision assigned to this agent."""
        from gates.decisions import respond

        decision = expect_type(self.store.get(decision_id), DECISION)
        if decision.assignee == HUMAN or self.agent == HUMAN:
            raise InvalidInput(
                f"decision {decision.id} is for a person to answer (gc decision respond), "
                "not an agent"
            )
        if decision.assignee != self.agent:
            raise InvalidInput(
                f"decision {decision.id} is assigned to {decision.assignee}, not {self.agent}"
            )
        return {"bead": respond(self.store, decision.id, option, text).to_dict()}


def _message_json(bead: Bead) -> dict[str, Any]:
    """A message copy as `gc mail` shows it, with whose mailbox holds it and its state."""
    return {
        **bead_message(bead).to_json(),
        "mailbox": bead.assignee,
        "archived": bead.status == "closed",
    }


def _item_json(item: Item) -> dict[str, Any]:
    from inbox.cli import item_json

    return item_json(item)


def _thread_reply(thread: Thread, message: ThreadMessage | None) -> dict[str, Any]:
    """What the CLI's thread commands print: the thread, and the message written (if any)."""
    payload: dict[str, Any] = {"thread": thread.to_json(now_stamp())}
    if message is not None:
        payload["message"] = message.to_json()
    return payload


def _artifacts(given: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """References to files (`path`, optional `kind` and `metadata`), with their size and
    sha256 when they exist now, as `--artifact` makes them."""
    return [artifact(a["path"], a.get("kind"), a.get("metadata")) for a in given]


def _content(message: dict[str, Any]) -> dict[str, Any]:
    """A thread message's keyword arguments, its artifacts made into references."""
    out = dict(message)
    if "artifacts" in out:
        out["artifacts"] = _artifacts(out["artifacts"] or ())
    return out
