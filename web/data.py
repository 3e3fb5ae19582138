"""What each page of `gc web` shows, as JSON: the page's twin, in the shapes the CLI prints.

Every list is one page read from the index (`Store.list` with a limit and an offset, one more
than shown to tell whether another page follows): no page parses the YAML tree, and a page
reads what it shows (and, for a mailbox, counts it through the index). Mail comes as
`gc mail inbox --json` shows it (`Message.to_json`), with each copy's mailbox and archived
state; work threads as
`gc thread show --json`; gates, decisions and search hits as beads (`gc bead show --json`);
sessions as `gc session list --json`; history as `gc log --json` plus each commit's diff
(`web.history`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beads.cli.common import stamped
from beads.errors import InvalidInput
from beads.records.record import Bead, check_agent
from beads.records.times import now_stamp
from beads.store import Store
from inbox.delivery import Delivery
from inbox.origin import notes_of
from mail.beadmail import BeadMail, bead_message
from mail.threads.model import THREAD, Thread
from mail.unread import MESSAGE, mailbox_filters, unread_filters
from web.history import history

PAGE_SIZE = 50
# Mailbox views: name -> the index filters of the messages it lists.
BOXES: dict[str, Callable[[str], dict[str, Any]]] = {
    "all": mailbox_filters,
    "unread": unread_filters,
    "archived": lambda who: {"type": MESSAGE, "assignee": who, "status": "closed"},
}
SESSION_TIMES = ("started_at", "last_hook_at", "ended_at", "nudged_at")


def page_of(
    store: Store, page: int, size: int = PAGE_SIZE, **filters: Any
) -> tuple[list[Bead], bool]:
    """Page `page` (from 1) of the beads `filters` select, and whether more follow."""
    found = store.list(**filters, limit=size + 1, offset=(page - 1) * size)
    return found[:size], len(found) > size


def message_json(bead: Bead) -> dict[str, Any]:
    """A message copy as `gc mail` shows it, with whose mailbox holds it and its state there."""
    return {
        **bead_message(bead).to_json(),
        "mailbox": bead.assignee,
        "archived": bead.status == "closed",
        "close_reason": bead.close_reason,
    }


def messages_json(store: Store, found: list[Bead]) -> list[dict[str, Any]]:
    """`message_json` of each of `found`, with its `"origin"` as `gc mail` lists give it:
    the note of a message written on another machine, else null (one lookup for them all,
    walking only the commits made since the last one: `inbox.origincache`)."""
    ids = [b.id for b in found]
    notes = notes_of(store.root, MESSAGE, ids, git=store.git)
    return [{**message_json(b), "origin": notes.get(b.id, "").strip() or None} for b in found]


def agents(store: Store, delivery: Delivery, page: int = 1) -> dict[str, Any]:
    """Every agent (known to the store or with a session): unread and total mail, live
    sessions, last activity (its last message or hook, whichever is later)."""
    live: dict[str, list[Any]] = {}
    for session in delivery.sessions():
        live.setdefault(session.agent, []).append(session)
    names = sorted(set(store.known_agents()) | delivery.session_agents())
    start = (page - 1) * PAGE_SIZE
    shown = names[start : start + PAGE_SIZE]
    mail = BeadMail(store)
    rows = []
    for name in shown:
        counts = mail.count(name)
        sent = store.list(sender=name, descending=True, limit=1)
        sessions = [stamped(s.to_json(), *SESSION_TIMES) for s in live.get(name, [])]
        times = [sent[0].created_at] if sent else []
        times += [s["last_hook_at"] for s in sessions]
        rows.append(
            {
                "agent": name,
                "total": counts.total,
                "unread": counts.unread,
                "sessions": sessions,
                "last_activity": max(times) if times else None,
            }
        )
    return {"agents": rows, "page": page, "more": len(names) > start + PAGE_SIZE}


def mailbox(
    store: Store,
    agent: str,
    box: str = "all",
    page: int = 1,
) -> dict[str, Any]:
    """An agent's mail, newest first: `all` (not archived), `unread` or `archived`."""
    check_agent(agent)
    if box not in BOXES:
        raise InvalidInput(f"box must be one of {', '.join(BOXES)}, not {box!r}")
    found, more = page_of(store, page, **BOXES[box](agent), descending=True)
    counts = BeadMail(store).count(agent)
    return {
        "recipient": agent,
        "box": box,
        "total": counts.total,
        "unread": counts.unread,
        "messages": messages_json(store, found),
        "page": page,
        "more": more,
    }


def conversation(store: Store, message: Bead, page: int = 1) -> dict[str, Any]:
    """The mail thread of `message` (a message bead), oldest first: every copy, with its
    mailbox and state."""
    thread_id = message.thread or message.id
    found, more = page_of(store, page, size=2 * PAGE_SIZE, type=MESSAGE, thread=thread_id)
    messages = messages_json(store, found)
    subject = messages[0]["subject"] if messages else bead_message(message).subject
    return {
        "thread_id": thread_id,
        "subject": subject,
        "messages": messages,
        "page": page,
        "more": more,
    }


def sends(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conversation's copies grouped back into the sends that made them (one send gives
    its `to` and each cc a copy, one after another, each mailbox once): each send's first
    copy as `message`, with all its `copies`."""
    out: list[dict[str, Any]] = []
    for message in messages:
        key = (message["from"], message["to"], message["subject"], message["body"],
               tuple(message["cc"]), message["reply_to"])  # fmt: skip
        mailboxes = [c["mailbox"] for c in out[-1]["copies"]] if out else []
        if not out or out[-1]["key"] != key or message["mailbox"] in mailboxes:
            out.append({"key": key, "message": message, "copies": []})
        role = "to" if message["mailbox"] == message["to"] else "cc"
        out[-1]["copies"].append({**message, "role": role})
    return out


def work_threads(store: Store, page: int = 1) -> dict[str, Any]:
    """Work threads, newest first, as `gc thread list --json` shows them."""
    found, more = page_of(store, page, type=THREAD, descending=True)
    now = now_stamp()
    threads = [Thread.from_bead(b).to_json(now) for b in found]
    return {"threads": threads, "page": page, "more": more}


def work_thread(store: Store, ref: str) -> dict[str, Any]:
    """A work thread and its messages in event order, as `gc thread show --json`."""
    from mail.threads.api import Threads, origins_of, with_origin

    api = Threads(store)
    thread, messages = api.show(ref)
    notes = origins_of(api, messages)
    return {
        "thread": thread.to_json(now_stamp()),
        "messages": [with_origin(m, notes) for m in messages],
    }


def beads_of_type(store: Store, type: str, *, closed: bool, page: int = 1) -> dict[str, Any]:
    """Gates or decisions (open ones unless `closed`), newest first, as `gc gate list`."""
    found, more = page_of(
        store, page, type=type, status=None if closed else "open", descending=True
    )
    return {"beads": [b.to_dict() for b in found], "page": page, "more": more}


def bead(store: Store, ref: str, start: bytes | None = None) -> dict[str, Any]:
    """One bead (`gc bead show --json`) with the commits that changed it and their diffs."""
    found = store.get(ref)
    return {"bead": found.to_dict(), **history(store, bead=found.id, start=start)}


def search(store: Store, text: str, page: int = 1) -> dict[str, Any]:
    """Beads whose title, body, labels or agents hold every word of `text`, newest first."""
    found, more = page_of(store, page, text=text, descending=True)
    return {"query": text, "beads": [b.to_dict() for b in found], "page": page, "more": more}
