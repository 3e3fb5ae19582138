"""Inbox items: one notification for one agent, the checks its fields must pass, and its
rows in the delivery database (`ItemTable`: pushing, listing, settling, reaping)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence

from beads.errors import GcError, InvalidInput
from beads.records.ids import check_id
from beads.records.record import acting_agent, check_agent, check_text, shown
from beads.records.times import check_time
from inbox.queue import keep_aside

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3
    from collections.abc import Iterable
    from pathlib import Path
    from typing import Any

    from inbox.deliveryconfig import DeliveryConfig
    from inbox.names import AgentNames

TYPES = ("decision", "alert", "event", "agent", "mail", "gate", "system")
# Items of these types come only from their producers (mail, decisions, gates), through
# `inbox.follow.record`: a push or a queue line of one of them is refused, so nobody can make
# an item that looks like mail from someone else.
PRODUCER_TYPES = ("mail", "decision", "gate")
PRODUCER_KEYS = tuple(f"{kind}:" for kind in PRODUCER_TYPES)  # their items' dedup keys
MAX_CONTENT_BYTES = 64 * 1024
MAX_KEY_CHARS = 200
# A broadcast's standing row has a group for agent (`@all`, `@rig:<rig>`, inbox/broadcast.py).
# Group rows sort between digits and letters: agent names start with a letter or a digit.
GROUPS = "agent >= '@' AND agent < 'A'"
# A settled copy of a standing broadcast is kept while the broadcast stands (a reaped copy
# would be handed out again).
NOT_STANDING = f"key NOT IN (SELECT key FROM items WHERE {GROUPS} AND state = 'standing')"
ITEM_COLUMNS = (
    "id, agent, key, type, source, content, priority, created_at, expires_at, ref_bead, "
    "moot_when, state, session, settled_at, pusher"
)
# Where rows whose times no stamp can show are set aside (`ItemTable.sound`), beside the
# database under `.runtime/`, one JSON line each, as a queue keeps its bad lines.
SET_ASIDE = "delivery.bad.jsonl"


class Item:
    """A notification for `agent`, unique per `(agent, key)`.

    `ref_bead` and `moot_when` make the item moot once the bead matches any of the conditions
    (each a mapping of field to value, `meta.<key>` for meta fields): the bead layer's generic
    way for higher layers to say "this is settled" without the inbox knowing what mail is.

    A plain class rather than a dataclass: hooks build items, and importing `dataclasses`
    would slow every hook.
    """

    __slots__ = FIELDS = (
        "id", "agent", "key", "type", "source", "content", "priority", "created_at",
        "expires_at", "ref_bead", "moot_when", "state", "session", "settled_at", "pusher",
    )  # fmt: skip

    def __init__(
        self,
        agent: str,
        key: str,
        content: str,
        type: str = "event",
        source: str = "system",
        priority: int = 2,
        created_at: float | None = None,
        expires_at: float | None = None,
        ref_bead: str | None = None,
        moot_when: list[dict[str, Any]] | None = None,
        state: str = "pending",
        id: int | None = None,
        session: str | None = None,
        settled_at: float | None = None,
        pusher: str | None = None,
    ) -> None:
        self.agent = agent
        self.key = key
        self.content = content
        self.type = type
        self.source = source
        self.priority = priority
        self.created_at: float = time.time() if created_at is None else created_at
        self.expires_at = expires_at
        self.ref_bead = ref_bead
        self.moot_when = moot_when
        self.state = state
        self.id = id
        self.session = session
        self.settled_at = settled_at
        # The agent that pushed the item, when it is not the producer's own (None for items
        # derived from the store's history): shown beside `source`, which anyone may set.
        self.pusher = pusher

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.to_json() == other.to_json()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"Item({', '.join(f'{k}={v!r}' for k, v in self.to_json().items())})"

    @classmethod
    def new(
        cls, agent: str, content: str, *, key: str, ttl: float | None = None, **fields: Any
    ) -> Item:
        """A checked item created now, expiring `ttl` seconds from now (if given)."""
        # NaN or infinity would make an item that never expires, or expires at once.
        if ttl is not None and not (type(ttl) in (int, float) and 0 < ttl < math.inf):
            raise InvalidInput("ttl must be a positive, finite number of seconds")
        now = time.time()
        expires = now + ttl if ttl is not None else None
        item = cls(agent=agent, key=key, content=content, created_at=now, expires_at=expires,
                   **fields)  # fmt: skip
        return item.check()

    def check(self) -> Item:
        """Validate every field; raise InvalidInput naming the first bad one."""
        check_agent(self.agent, what="recipient")
        if not isinstance(self.key, str) or not self.key or len(self.key) > MAX_KEY_CHARS:
            raise InvalidInput(f"dedup key must be 1..{MAX_KEY_CHARS} characters")
        if any(ord(c) < 32 or c == "\x7f" for c in self.key):
            raise InvalidInput("dedup key must not contain control characters")
        check_text("dedup key", self.key)
        check_text("item source", self.source)
        if self.type not in TYPES:
            raise InvalidInput(f"item type must be one of {', '.join(TYPES)}, not {self.type!r}")
        if not isinstance(self.source, str) or not self.source or len(self.source) > 200:
            raise InvalidInput("item source must be 1..200 characters")
        if self.pusher is not None:
            check_agent(self.pusher, what="pusher")
        check_time("created_at", self.created_at)
        if self.expires_at is not None:
            check_time("expires_at", self.expires_at)
        if type(self.priority) is not int or not 0 <= self.priority <= 4:
            raise InvalidInput("priority must be an integer 0..4")
        if not isinstance(self.content, str) or not self.content.strip():
            raise InvalidInput("item content must not be empty")
        if "\x00" in self.content:
            raise InvalidInput("item content must not contain NUL characters")
        try:
            size = len(self.content.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidInput("item content is not valid UTF-8 text") from None
        if size > MAX_CONTENT_BYTES:
            raise InvalidInput(f"item content is {size} bytes; the limit is {MAX_CONTENT_BYTES}")
        if self.ref_bead is not None:
            check_id(self.ref_bead)
        if self.moot_when is not None and not (
            isinstance(self.moot_when, list)
            and all(isinstance(c, dict) and c for c in self.moot_when)
        ):
            raise InvalidInput("moot_when must be a list of non-empty field mappings")
        return self

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def impossible_time(self) -> str | None:
        """Why one of the item's times is none a stamp can show (before 1970, past the year
        9999, not a number), or None: an item checked when stored never has one, a row an
        older gc or another tool wrote may."""
        for name in ("created_at", "expires_at", "settled_at"):
            value = getattr(self, name)
            if value is not None or name == "created_at":
                try:
                    check_time(name, value)
                except InvalidInput as exc:
                    return exc.message
        return None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}

    @classmethod
    def from_json(cls, data: Any) -> Item:
        """An item from a queue line's object; raise InvalidInput if it is not one."""
        if not isinstance(data, dict):
            raise InvalidInput("an inbox item must be a JSON object")
        # Named in words: a queue line or a NATS message is anyone's, and its reader (the
        # warning, the relay's log) is told what the item lacks, not how Python called it.
        missing = [f"'{name}'" for name in ("agent", "key", "content") if name not in data]
        if missing:
            raise InvalidInput(f"an inbox item needs {' and '.join(missing)}")
        names = {"agent", "key", "content", "type", "source", "priority", "created_at"}
        names |= {"expires_at", "ref_bead", "moot_when", "pusher"}
        return cls(**{k: v for k, v in data.items() if k in names}).check()


def clip(text: str, limit: int = MAX_CONTENT_BYTES // 4) -> str:
    """`text` cut to fit an item's content (UTF-8 takes at most 4 bytes a character)."""
    return text if len(text) <= limit else text[: limit - 15] + " ... [clipped]"


def is_moot(bead_fields: dict[str, Any], conditions: list[dict[str, Any]]) -> bool:
    """True when the bead (as `Bead.to_dict()`) matches any of the conditions."""
    meta = bead_fields.get("meta") or {}
    for condition in conditions:
        if all(
            (meta.get(name[5:]) if name.startswith("meta.") else bead_fields.get(name)) == value
            for name, value in condition.items()
        ):
            return True
    return False


def refuse_producer_type(type: str, key: str | None = None) -> None:
    """Items of a producer's type (mail, decision, gate) come from that producer only, and
    so do their dedup keys (`mail:<id>`, `decision:<id>`, `gate:<id>...`): a plain item
    holding one would stand in for the producer's item, which dedup would then drop."""
    if type in PRODUCER_TYPES:
        raise InvalidInput(
            f"items of type {type!r} come only from their producer (gc mail, gc decision, "
            "gc gate); push another type (alert, event, agent, system)"
        )
    if key is not None and key.startswith(PRODUCER_KEYS):
        raise InvalidInput(
            f"dedup keys starting with {key.split(':', 1)[0]}: are its producer's "
            f"({shown(key)}); push with another key"
        )


class ItemTable:
    """The items table of the delivery database: push (with nudges), list, settle, reap."""

    def __init__(
        self,
        runtime: Path,
        db: sqlite3.Connection,
        write: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        names: AgentNames,
        settings: DeliveryConfig,
        outbox: Callable[[], Callable[[sqlite3.Connection, Sequence[Item]], None] | None],
        nudge: Callable[[list[Item]], None],
    ) -> None:
        """`runtime`: the store's `.runtime/`; `db` and `write()` (one write transaction):
        the delivery database; `names`: who an agent is (`own`); `settings`: `delivery.*`;
        `outbox()`: the hook that also writes items for agents of other machines (None:
        none); `nudge(items)`: run once new items are committed (it must not raise)."""
        self.runtime = runtime
        # What reading set aside, one line each, until the caller takes them (`take_problems`).
        self.problems: list[str] = []
        self.db = db
        self.write = write
        self.names = names
        self.settings = settings
        self.outbox = outbox
        self.nudge = nudge

    def push(
        self,
        recipients: Sequence[str],
        content: str,
        *,
        key: str,
        type: str = "event",
        source: str = "system",
        priority: int = 2,
        ttl: float | None = None,
        ref_bead: str | None = None,
        moot_when: list[dict[str, Any]] | None = None,
        nudge: bool = True,
        pusher: str | None = None,
    ) -> list[tuple[Item, bool]]:
        """Push one item to each recipient; returns `(item, created)` per recipient.

        A second push of the same key to the same agent is a no-op (`created` False, the
        existing item returned). Once the database has committed, idle recipients are nudged
        (never blocking this call). `pusher` (default: the acting agent) is recorded and shown
        with the item. Items of the producers' types (mail, decision, gate) are refused.
        """
        items = [
            Item.new(
                agent,
                content,
                key=key,
                ttl=ttl,
                type=type,
                source=source,
                priority=priority,
                ref_bead=ref_bead,
                moot_when=moot_when,
                pusher=acting_agent(pusher),
            )  # fmt: skip
            for agent in dict.fromkeys(recipients)
        ]
        return self.push_items(items, nudge=nudge)

    def push_items(self, items: Sequence[Item], *, nudge: bool = True) -> list[tuple[Item, bool]]:
        """Push checked items in one transaction (see `push`); returns `(item, created)`."""
        for item in items:
            refuse_producer_type(item.type, item.key)
            item.pusher = item.pusher or acting_agent()
        return self.insert(items, nudge=nudge)

    def insert(
        self,
        items: Sequence[Item],
        *,
        nudge: bool = True,
        then: Callable[[sqlite3.Connection], None] | None = None,
    ) -> list[tuple[Item, bool]]:
        """Store items of any type in one transaction (`then` runs inside it); the producers
        reach it through `Follower.record`, everyone else through `push_items`."""
        results: list[tuple[Item, bool]] = []
        for item in items:  # one name per agent (beads/records/agents.py), whoever made the item
            item.agent = self.names.own(item.agent)
        outbox = self.outbox()
        with self.write() as db:
            for item in items:
                created = insert_row(db, item)
                if not created:
                    found = self.by_key(item.agent, item.key)
                    if found is None:  # the key's row was set aside (`sound`): the key is free
                        created = insert_row(db, item)
                    item = found or item
                results.append((item, created))
            if then is not None:
                then(db)
            if outbox is not None:  # items for agents of other machines: the relay's to send
                outbox(db, [item for item, created in results if created])
        if nudge:
            self.nudge([item for item, created in results if created])
        return results

    def by_key(self, agent: str, key: str) -> Item | None:
        """The item of `agent` (its full name) with this dedup key, or None."""
        rows = self.db.execute(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE agent = ? AND key = ?", (agent, key)
        )
        found = self.sound(rows)
        return found[0] if found else None

    def items(self, agent: str | None = None, states: Sequence[str] = ("pending",)) -> list[Item]:
        """Items by state (all agents when `agent` is None), most urgent and oldest first."""
        marks = ", ".join("?" for _ in states)
        sql = f"SELECT {ITEM_COLUMNS} FROM items WHERE state IN ({marks})"
        params: list[Any] = list(states)
        if agent is not None:
            sql += " AND agent = ?"
            params.append(self.names.own(agent))
        sql += " ORDER BY priority, created_at, id"
        return self.sound(self.db.execute(sql, params))

    def sound(self, rows: Iterable[tuple[Any, ...]]) -> list[Item]:
        """The items of rows of `SELECT {ITEM_COLUMNS}`, in order. A row holding a time no
        stamp can show (`Item.impossible_time`), which would fail every listing and drain of
        its agent, is set aside as a queue's bad line is: kept in
        `.runtime/delivery.bad.jsonl` with the reason, removed from the table, and said in
        `problems`. Within a write transaction on the database, in that transaction."""
        items, bad = [], []
        for row in rows:
            item = from_row(row)
            why = item.impossible_time()
            if why is None:
                items.append(item)
            else:
                bad.append((item, why))
        for item, why in bad:
            self._set_aside(item, why)
        return items

    def _set_aside(self, item: Item, why: str) -> None:
        # The line is written before the row goes: a fault between the two keeps both.
        whose = f"item {item.id} of {item.agent}"
        try:
            record = {"row": item.to_json(), "error": why}
            keep_aside(str(self.runtime.parent), self.runtime / SET_ASIDE, record)
            if self.db.in_transaction:
                self.db.execute("DELETE FROM items WHERE id = ?", (item.id,))
            else:
                with self.write() as db:
                    db.execute("DELETE FROM items WHERE id = ?", (item.id,))
        except (OSError, GcError) as exc:  # a read-only store: left where it is, not shown
            self.problems.append(f"{whose} skipped ({why}); it cannot be set aside: {exc}")
            return
        self.problems.append(f"{whose} set aside in {SET_ASIDE}: {why}")

    def take_problems(self) -> list[str]:
        """What reading set aside since the last call (`sound`), one line each."""
        taken, self.problems = self.problems, []
        return taken

    def has_pending(self, agent: str, now: float | None = None) -> bool:
        """True when `agent` has an unexpired item not yet delivered (cheap: one indexed
        lookup); items claimed by a drain whose output is not known to be out count."""
        now = time.time() if now is None else now
        row = self.db.execute(
            "SELECT 1 FROM items WHERE agent = ? AND state IN ('pending', 'delivering') "
            "AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
            (self.names.own(agent), now),
        ).fetchone()
        return row is not None

    def settle(self, agent: str, keys: Sequence[str], state: str = "moot") -> int:
        """Settle `agent`'s undelivered items of these keys (a producer says they are moot:
        for items with no bead to check); returns how many."""
        now = time.time()
        agent = self.names.own(agent)
        with self.write() as db:
            return sum(
                db.execute(
                    "UPDATE items SET state = ?, settled_at = ? WHERE agent = ? AND key = ? "
                    "AND state IN ('pending', 'delivering')",
                    (state, now, agent, key),
                ).rowcount
                for key in keys
            )

    def reap(self) -> int:
        """Remove expired pending items (and broadcasts); empty the content of settled items
        past `delivery.keep_delivered`, and remove their rows past `keep_keys` (but the copies
        of a broadcast that still stands); returns how many rows were removed or emptied."""
        now = time.time()
        with self.write() as db:
            expired = db.execute(
                "DELETE FROM items WHERE state IN ('pending', 'delivering', 'standing') "
                "AND expires_at IS NOT NULL AND expires_at <= ?",
                (now,),
            ).rowcount
            return expired + forget_settled(
                db,
                now - self.settings.setting("keep_delivered"),
                now - self.settings.keep_keys(),
            )


def forget_settled(
    db: sqlite3.Connection, content_before: float, key_before: float, agent: str | None = None
) -> int:
    """Settled items (of `agent`, or all) settled before `content_before` lose their content;
    those settled before `key_before` lose their row (the dedup key); a copy of a standing
    broadcast keeps both. Returns how many rows changed."""

    settled = "state NOT IN ('pending', 'delivering', 'standing')"
    whose = " AND agent = ?" if agent is not None else ""
    extra = (agent,) if agent is not None else ()
    gone = db.execute(
        f"DELETE FROM items WHERE {settled} AND settled_at < ? AND {NOT_STANDING}{whose}",
        (key_before, *extra),
    ).rowcount
    emptied = db.execute(
        f"UPDATE items SET content = '' WHERE {settled} AND settled_at < ? AND content != '' "
        f"AND {NOT_STANDING}{whose}",
        (content_before, *extra),
    ).rowcount
    return gone + emptied


def insert_row(db: sqlite3.Connection, item: Item) -> bool:
    """Insert `item` unless its `(agent, key)` is taken; True (and `item.id` set) if new."""
    cursor = db.execute(
        "INSERT OR IGNORE INTO items(agent, key, type, source, content, priority, created_at, "
        "expires_at, ref_bead, moot_when, pusher) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            item.agent,
            item.key,
            item.type,
            item.source,
            item.content,
            item.priority,
            item.created_at,
            item.expires_at,
            item.ref_bead,
            json.dumps(item.moot_when) if item.moot_when else None,
            item.pusher,
        ),
    )
    if cursor.rowcount == 1:
        item.id = cursor.lastrowid
        return True
    return False


def from_row(row: tuple[Any, ...]) -> Item:
    """The item of a row of `SELECT {ITEM_COLUMNS}`."""
    (id_, agent, key, type_, source, content, priority, created, expires, ref, moot, state,
     session, settled, pusher) = row  # fmt: skip
    return Item(
        agent=agent,
        key=key,
        content=content,
        type=type_,
        source=source,
        priority=priority,
        created_at=created,
        expires_at=expires,
        ref_bead=ref,
        moot_when=json.loads(moot) if moot else None,
        state=state,
        id=id_,
        session=session,
        settled_at=settled,
        pusher=pusher,
    )
