"""`AgentInbox`: a durable, at-least-once inbox for long-running Python workers.

    inbox = AgentInbox(store, "worker")
    inbox.post("message", "build the docs", sender="mayor")   # persisted before it returns
    for entry in inbox:                                       # in order, until empty
        handle(entry)
        inbox.ack(entry)                                      # done: never replayed

Entries live in the delivery database. An entry carries text `content` and, optionally, a
structured `payload` (any JSON value: a mapping, a list, text, a number, true/false or null),
which comes back exactly as posted, replays included. Opening an inbox that holds entries (a
restart, or entries posted while no worker ran) hands out a synthetic `restore` entry first,
then every stored entry in order, those handed out and not acked before included
(at-least-once); its payload counts them. Consecutive `message` entries from one sender,
without payloads, that nobody has taken yet merge into one entry (and one record). `steering`
entries are transient (never stored) and jump the queue.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput
from beads.location import find_store
from beads.records.record import TYPE_RE, check_agent
from beads.runtime import runs_long
from inbox.delivery import Delivery

RESTORE = "restore"
MESSAGE = "message"
STEERING = "steering"
MAX_CONTENT_BYTES = 1024 * 1024


@dataclass
class Entry:
    """One unit of work for an agent. `seq` is None for transient entries."""

    seq: int | None
    agent: str
    kind: str
    content: str
    sender: str | None
    created_at: float
    payload: Any = None  # a JSON value, as posted

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _encode_payload(payload: Any) -> str | None:
    """`payload` as stored (None for none); InvalidInput if it is not plain JSON data."""
    if payload is None:
        return None
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, sort_keys=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"an entry's payload must be JSON data: {exc}") from None
    if json.loads(text) != payload or _has_nan(payload):  # tuples, non-text keys: not kept
        raise InvalidInput("an entry's payload must be JSON data (dicts with text keys, lists)")
    return text


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False


def _decode_payload(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


class AgentInbox:
    """The durable inbox of `agent` in `store` (a `Store`, a `.beads/` path, or None to find it)."""

    def __init__(self, store: Any, agent: str) -> None:
        # A path is not a Store, though it has a `root` too (its anchor, "/").
        is_path = store is None or isinstance(store, str | os.PathLike)
        root = find_store(store) if is_path else store.root
        self.delivery = Delivery(Path(root))
        self.agent = self.delivery.own(
            check_agent(agent)
        )  # one name per agent (beads/records/agents.py)
        self._steering: deque[Entry] = deque()
        stored, unacked = self.delivery.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(handed_out), 0) FROM entries WHERE agent = ?",
            (self.agent,),
        ).fetchone()
        self._restore: Entry | None = None
        if stored:  # seed 003: the restore entry is always first when anything is replayed
            note = (
                f"restored after a restart: {stored} stored entries follow "
                f"({unacked} handed out before and not acknowledged)"
            )
            counts = {"entries": stored, "unacknowledged": unacked}
            self._restore = Entry(None, self.agent, RESTORE, note, None, time.time(), counts)
        self._after = 0  # entries up to this seq were handed out by this instance

    def close(self) -> None:
        self.delivery.close()

    def __enter__(self) -> AgentInbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def post(
        self, kind: str, content: str = "", *, sender: str | None = None, payload: Any = None
    ) -> Entry:
        """Add an entry; stored durably before this returns (except `steering`). `payload`:
        structured data (JSON values) handed back as posted."""
        if not isinstance(kind, str) or not TYPE_RE.fullmatch(kind) or kind == RESTORE:
            raise InvalidInput(f"invalid entry kind {kind!r}")
        if sender is not None:
            check_agent(sender, what="sender")
        if not isinstance(content, str) or "\x00" in content:
            raise InvalidInput("entry content must be text without NUL characters")
        stored = _encode_payload(payload)
        size = len(content.encode("utf-8", "surrogatepass")) + len((stored or "").encode())
        if size > MAX_CONTENT_BYTES:
            raise InvalidInput(f"entry content is larger than {MAX_CONTENT_BYTES} bytes")
        payload = _decode_payload(stored)  # the caller's object is not shared with the entry
        now = time.time()
        if kind == STEERING:
            entry = Entry(None, self.agent, kind, content, sender, now, payload)
            self._steering.append(entry)
            return entry
        with self.delivery.write() as db:
            if kind == MESSAGE and stored is None:  # a payload is never merged into another
                last = db.execute(
                    "SELECT seq, kind, sender, content, created_at, handed_out, payload "
                    "FROM entries WHERE agent = ? ORDER BY seq DESC LIMIT 1",
                    (self.agent,),
                ).fetchone()
                if (last and last[1] == MESSAGE and last[2] == sender and not last[5]
                        and last[6] is None):  # fmt: skip
                    merged = f"{last[3]}\n{content}"
                    db.execute("UPDATE entries SET content = ? WHERE seq = ?", (merged, last[0]))
                    return Entry(last[0], self.agent, kind, merged, sender, last[4])
            cursor = db.execute(
                "INSERT INTO entries(agent, kind, sender, content, created_at, payload) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (self.agent, kind, sender, content, now, stored),
            )
        return Entry(cursor.lastrowid, self.agent, kind, content, sender, now, payload)

    def next(self, timeout: float | None = None, poll: float = 0.05) -> Entry | None:
        """The next entry (steering first, then in order), or None when there is none.

        With a `timeout` it waits that long for one to be posted (by any process).
        """
        deadline = time.monotonic() + (timeout or 0)
        while True:
            entry = self._take()
            if entry is not None or timeout is None or time.monotonic() >= deadline:
                return entry
            runs_long()  # a wait: the garbage collector's usual collections back
            time.sleep(poll)

    def _take(self) -> Entry | None:
        if self._steering:
            return self._steering.popleft()
        if self._restore is not None:
            entry, self._restore = self._restore, None
            return entry
        with self.delivery.write() as db:
            row = db.execute(
                "SELECT seq, kind, content, sender, created_at, payload FROM entries "
                "WHERE agent = ? AND seq > ? ORDER BY seq LIMIT 1",
                (self.agent, self._after),
            ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE entries SET handed_out = 1 WHERE seq = ?", (row[0],))
        self._after = row[0]
        return Entry(row[0], self.agent, row[1], row[2], row[3], row[4], _decode_payload(row[5]))

    def __iter__(self) -> Iterator[Entry]:
        """Entries until none is left (use `next(timeout=...)` to wait for more)."""
        while (entry := self.next()) is not None:
            yield entry

    def ack(self, entry: Entry) -> None:
        """Mark `entry` processed: it is removed and never replayed."""
        if entry.seq is None:
            return  # transient entries (steering, restore) are not stored
        with self.delivery.write() as db:
            db.execute("DELETE FROM entries WHERE seq = ? AND agent = ?", (entry.seq, self.agent))

    def pending(self) -> int:
        """Stored entries not yet acknowledged."""
        return self.delivery.db.execute(
            "SELECT COUNT(*) FROM entries WHERE agent = ?", (self.agent,)
        ).fetchone()[0]

    def retire(self) -> int:
        """The agent is retired: remove all its entries; returns how many."""
        self._steering.clear()
        self._restore = None
        with self.delivery.write() as db:
            return db.execute("DELETE FROM entries WHERE agent = ?", (self.agent,)).rowcount
