"""Queue merging: a session's JSONL queue (inbox/queue.py), the buffer of producers that
cannot reach the database, is taken into the delivery database at the session's next drain;
dedup by key happens there.

A queue line is ours (`key`, `expires_at` in unix seconds, as `enqueue` writes it) or the
seed's (`dedup_key`, `timestamp` in milliseconds, `ttl_seconds`, `id`), told apart by `key`.
A seed line's missing fields get the seed's defaults: priority 2, no expiry, and with no
dedup key the line is unique (keyed by its `id`, else by its whole text, so a drain retried
after a crash still records it once).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from beads.errors import InvalidInput
from beads.records.record import acting_agent
from inbox.items import PRODUCER_TYPES, Item, insert_row, refuse_producer_type
from inbox.queue import SessionQueue, check_session

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3
    from collections.abc import Callable, Sequence
    from typing import Any

    from inbox.rederive import Refused
    from inbox.sessions import Sessions

    Rederive = Callable[[Sequence[tuple[str, str]]], tuple[list[Item], list[Refused]]]


class Queues:
    """Session queues: append to one (`enqueue`), take one into the delivery database."""

    def __init__(
        self,
        runtime: Path,
        write: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        sessions: Sessions,
        rederive: Rederive,
    ) -> None:
        """`runtime`: the store's `.runtime/`; `write()`: a write transaction on the delivery
        database; `sessions`: whose agent a session is; `rederive(wanted)`: the items the
        producers make of beads a queue line names (inbox/rederive.py)."""
        self.runtime = runtime
        self.write = write
        self.sessions = sessions
        self.rederive = rederive

    def enqueue(
        self,
        session: str,
        content: str,
        *,
        key: str,
        type: str = "event",
        source: str = "system",
        priority: int = 2,
        ttl: float | None = None,
        pusher: str | None = None,
    ) -> Item:
        """Append an item to one session's JSONL queue (the merge buffer the next drain of
        that session takes; the database is not touched, dedup happens at the drain)."""
        refuse_producer_type(type, key)
        known = self.sessions.session(check_session(session))
        agent = known.agent if known else "queued"  # the drain fills in the session's agent
        item = Item.new(agent, content, key=key, ttl=ttl, type=type, source=source,
                        priority=priority, pusher=acting_agent(pusher))  # fmt: skip
        record = item.to_json()
        for name in ("id", "agent", "state", "session", "settled_at"):
            record.pop(name)
        SessionQueue(self.runtime, session).append(record)
        return item

    def take(self, session: str, agent: str) -> list[str]:
        """Move the session's queue into the database (committed before the file empties)."""
        queue = SessionQueue(self.runtime, session)
        if queue.empty():
            return []

        def store(records: list[dict[str, Any]]) -> list[str]:
            items, problems = [], []
            asked: dict[tuple[str, str], dict[str, Any]] = {}
            for record in records:
                try:
                    fields = ours(record)
                    if fields.get("type") in PRODUCER_TYPES:
                        # A request: the item is derived from the bead its key names.
                        key = fields.get("key")
                        if not isinstance(key, str):
                            raise InvalidInput("an item of a producer's type without a key")
                        asked[(agent, key)] = record
                        continue
                    item = Item.from_json({**fields, "agent": agent})
                    refuse_producer_type(item.type, item.key)
                    items.append(item)
                except InvalidInput as exc:
                    queue.set_aside(json.dumps(record), str(exc))
                    problems.append(f"queue item set aside: {exc}")
            if asked:
                derived, refused = self.rederive(list(asked))
                for (
                    item
                ) in derived:  # the session's agent, by its full name (beads/records/agents.py)
                    item.agent = agent
                items += derived
                for refusal in refused:
                    record = asked[(refusal.agent, refusal.key)]
                    why = (
                        f"refused: items of type {record.get('type')!r} come only from their "
                        f"producer, and this line names no item of one: {refusal.why}"
                    )
                    queue.set_aside(json.dumps(record), why)
                    problems.append(f"queue item set aside: refused {refusal}")
            with self.write() as db:
                for item in items:
                    insert_row(db, item)
            return problems

        return queue.take(store)[1]


def ours(record: dict[str, Any]) -> dict[str, Any]:
    """A queue line's fields as ours: a seed line (no `key`) translated, ours as it is."""
    if "key" in record:
        return record
    fields = {name: record[name] for name in ("type", "source", "content") if name in record}
    fields["priority"] = record.get("priority", 2)
    key = record.get("dedup_key")
    if not key and record.get("id"):
        key = f"queue:{record['id']}"
    elif not key:
        import hashlib  # lazy: it loads OpenSSL, and only a seed line without key or id needs it

        text = json.dumps(record, sort_keys=True, ensure_ascii=False)
        key = f"queue:{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    fields["key"] = key
    stamp, ttl = record.get("timestamp"), record.get("ttl_seconds")
    if stamp:  # milliseconds; left out, the item is created now
        fields["created_at"] = stamp / 1000 if type(stamp) in (int, float) else stamp
    if ttl:  # 0 or left out: never expires
        if type(ttl) not in (int, float) or ttl < 0:
            raise InvalidInput("ttl_seconds must be a non-negative number")
        start = fields.get("created_at")
        fields["expires_at"] = (start if type(start) in (int, float) else time.time()) + ttl
    return fields
