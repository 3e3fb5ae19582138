"""The delivery databases: `.runtime/delivery.sqlite3` (items, durable entries), and
`.runtime/sessions.sqlite3` (sessions, nudges).

The first is the source of truth for delivery, separate from the derived bead index (an index
rebuild never touches it). Every change is one sqlite transaction; `BEGIN IMMEDIATE` makes
writers take the database's write lock up front, so two drains or two pushes racing on one
agent serialise instead of both reading the same pending rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from beads import dbfile, files
from beads.dbfile import DAMAGED, READ_ONLY, error_code, open_read_only, rollback
from beads.errors import Conflict, GcError, InvalidInput, NotFound, StorageError
from beads.location import find_store
from beads.reader import IndexReader, branch_head
from beads.record import acting_agent, check_agent
from beads.times import parse_duration
from inbox.items import PRODUCER_TYPES, Item, is_moot
from inbox.queue import SessionQueue, check_session
from inbox.render import render

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from typing import Any

# Version 1 (`PRAGMA user_version`): items record their pusher; the `follow` table holds the
# last commit of the store's branch that items were derived from (see inbox/follow.py).
# Today's databases are version 0 and are upgraded in place by MIGRATIONS.
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS items(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    agent TEXT NOT NULL, key TEXT NOT NULL, type TEXT NOT NULL, source TEXT NOT NULL,
    content TEXT NOT NULL, priority INTEGER NOT NULL, created_at REAL NOT NULL,
    expires_at REAL, ref_bead TEXT, moot_when TEXT,
    state TEXT NOT NULL DEFAULT 'pending', session TEXT, settled_at REAL, pusher TEXT,
    UNIQUE(agent, key));
CREATE INDEX IF NOT EXISTS items_by_state ON items(agent, state, priority, created_at);
CREATE TABLE IF NOT EXISTS entries(
    seq INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, kind TEXT NOT NULL,
    sender TEXT, content TEXT NOT NULL, created_at REAL NOT NULL,
    handed_out INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS entries_by_agent ON entries(agent, seq);
CREATE TABLE IF NOT EXISTS follow(one INTEGER PRIMARY KEY CHECK (one = 1), head TEXT);
"""
# Upgrades: MIGRATIONS[n] brings a database of version n to n + 1.
MIGRATIONS = {
    0: """
ALTER TABLE items ADD COLUMN pusher TEXT;
CREATE TABLE IF NOT EXISTS follow(one INTEGER PRIMARY KEY CHECK (one = 1), head TEXT);
""",
}

# Sessions are runtime state that every hook writes: they live in a database of their own
# that is never synced (a power cut costs, at worst, the session list), so a hook does not pay
# for two fsyncs; items, the source of truth, stay in the synced one.
SESSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions(
    session TEXT PRIMARY KEY, agent TEXT NOT NULL, state TEXT NOT NULL, cwd TEXT,
    started_at REAL NOT NULL, last_hook TEXT, last_hook_at REAL NOT NULL, ended_at REAL,
    nudged_at REAL, nudge_outcome TEXT, nudge_detail TEXT,
    stop_blocks INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS sessions_by_agent ON sessions(agent, state);
CREATE TABLE IF NOT EXISTS nudges(agent TEXT PRIMARY KEY, last_at REAL NOT NULL);
"""

DEFAULTS: dict[str, Any] = {
    "max_items": 20,  # per drain; priority 0 is never deferred
    "session_idle_timeout": "8h",  # a session silent this long is no longer live
    "nudge_interval": "60s",  # an agent is nudged at most once per interval
    "nudge_timeout": "10s",  # a nudge command running longer is killed
    "keep_delivered": "7d",  # delivered, expired and moot items are reaped after this
}
ITEM_COLUMNS = (
    "id, agent, key, type, source, content, priority, created_at, expires_at, ref_bead, "
    "moot_when, state, session, settled_at, pusher"
)
# A session that claimed items and died before its output was out gets them again at its next
# drain; another session of the agent only after this long (it may still be writing them).
CLAIM_SECONDS = 60.0


# Records below are namedtuples, not dataclasses: hooks build them, and importing
# `dataclasses` (which loads `inspect`) costs a hook about 20 ms.


class Session(
    namedtuple(
        "Session",
        "session agent state cwd started_at last_hook last_hook_at "
        "ended_at nudged_at nudge_outcome nudge_detail stop_blocks",
        defaults=(None, None, None, None, 0),
    )
):
    """One run of an agent, as the hooks report it.

    `state` is busy, idle or ended; times are Unix seconds; `stop_blocks` counts the
    consecutive Stop hooks that blocked (the loop detector reads it).
    """

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class Drained(
    namedtuple("Drained", "session agent items text deferred dropped problems", defaults=(0, 0, ()))
):
    """What a drain delivered (`items`, a list of Item), its rendering (`text`), how many
    items it deferred or dropped, and the problems it had to set aside (`problems`)."""

    __slots__ = ()


class Delivery:
    """The delivery database of one store (`root` is the `.beads/` directory)."""

    def __init__(self, root: Path, *, config: Callable[[], dict[str, Any]] | None = None) -> None:
        """`config`: where the caller already has the store's configuration (`Store.config`
        is cached per commit), read anew at each use so a long-lived Delivery sees changes."""
        self.root = root
        self.runtime = root / ".runtime"
        files.make_dirs(str(root), str(self.runtime))
        self._config_source = config
        self._config: dict[str, Any] | None = None
        self._reader: IndexReader | None = None
        self._sessions_db: sqlite3.Connection | None = None
        self.db = _connect(
            self.runtime / "delivery.sqlite3",
            "NORMAL",
            SCHEMA,
            "entries",
            version=SCHEMA_VERSION,
            migrations=MIGRATIONS,
            setup=self._start_following,
        )

    def _start_following(self, db: sqlite3.Connection) -> None:
        # A new or upgraded database follows the branch from its current commit: what is
        # already in the store was announced by the code that wrote it (or never will be).
        head = branch_head(self.root)
        db.execute(
            "INSERT OR REPLACE INTO follow VALUES (1, ?)", (head.decode() if head else None,)
        )

    @property
    def sessions_db(self) -> sqlite3.Connection:
        """The sessions database, opened on first use (a push with no nudges never needs it)."""
        if self._sessions_db is None:
            path = self.runtime / "sessions.sqlite3"
            try:
                self._sessions_db = _connect(path, "OFF", SESSIONS_SCHEMA, "nudges")
            except DatabaseDamaged as exc:
                self._drop_sessions(exc)
                self._sessions_db = _connect(path, "OFF", SESSIONS_SCHEMA, "nudges")
        return self._sessions_db

    def _drop_sessions(self, damaged: DatabaseDamaged) -> None:
        """Delete a damaged sessions file, so the next use starts a fresh session list: it is
        never synced (a power cut may garble it), and only sessions are lost. Only for damage:
        a busy, read-only or full database, or a newer gc's, is kept as it is."""
        if self._sessions_db is not None:
            self._sessions_db.close()
            self._sessions_db = None
        path = self.runtime / "sessions.sqlite3"
        if dbfile.file_id(path) == damaged.file_id:  # not one another process remade meanwhile
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    def _on_sessions(self, use: Callable[[sqlite3.Connection], Any]) -> Any:
        """`use(sessions_db)`; when it meets a damaged page, once more on a fresh file."""
        try:
            return use(self.sessions_db)
        except DatabaseDamaged as exc:
            self._drop_sessions(exc)
        return use(self.sessions_db)

    def _update_sessions(self, sql: str, parameters: tuple[Any, ...]) -> None:
        """One statement in its own transaction on the sessions database."""

        def run(db: sqlite3.Connection) -> None:
            with _transaction(db, "sessions.sqlite3"):
                db.execute(sql, parameters)

        self._on_sessions(run)

    @classmethod
    def open(cls, beads_dir: str | Path | None = None) -> Delivery:
        """The delivery database of the store found as `Store.open` finds it."""
        return cls(find_store(beads_dir))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self.db.close()
        if self._sessions_db is not None:
            self._sessions_db.close()

    @property
    def reader(self) -> IndexReader:
        """The store's index, opened once per Delivery (caught up with git when behind)."""
        if self._reader is None:
            self._reader = IndexReader(self.root)
        return self._reader

    def __enter__(self) -> Delivery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction on the items database, holding its write lock from the start."""
        return _transaction(self.db, "delivery.sqlite3")

    @contextlib.contextmanager
    def write_sessions(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the sessions database (a damaged file is dropped: the
        next use starts a fresh one)."""
        try:
            with _transaction(self.sessions_db, "sessions.sqlite3") as db:
                yield db
        except DatabaseDamaged as exc:
            self._drop_sessions(exc)
            raise

    # -- configuration ----------------------------------------------------------------------

    def store_config(self) -> dict[str, Any]:
        """The store's `config.yaml` (read from the index: no YAML parser on this path)."""
        if self._config_source is not None:
            return self._config_source()
        if self._config is None:
            self._config = self.reader.config()
        return self._config

    def setting(self, name: str) -> Any:
        """A `delivery.<name>` setting; durations come back as seconds."""
        value = (self.store_config().get("delivery") or {}).get(name, DEFAULTS[name])
        if name == "max_items":
            if type(value) is not int or value < 1:
                raise InvalidInput("delivery.max_items must be a positive integer")
            return value
        return float(value) if isinstance(value, int | float) else parse_duration(str(value))

    def recipients(self, to: str | None = None, rig: str | None = None) -> list[str]:
        """The agents an item for `to` (an agent or `all`) or `rig` goes to."""
        config = self.store_config()
        if rig is not None:
            members = (config.get("rigs") or {}).get(rig)
            if not members:
                raise NotFound(f"no rig {rig!r} in config.yaml")
            return [check_agent(str(m), what="rig member") for m in members]
        if to is None:
            raise InvalidInput("give a recipient: --to AGENT, --to all or --rig RIG")
        if to == "all":
            named = set(config.get("agents") or {}) | set(self.reader.index.agents())
            named |= {
                r[0]
                for r in self._on_sessions(
                    lambda db: db.execute("SELECT DISTINCT agent FROM sessions").fetchall()
                )
            }
            return sorted(named)
        return [check_agent(to, what="recipient")]

    # -- push -------------------------------------------------------------------------------

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
            refuse_producer_type(item.type)
            item.pusher = item.pusher or acting_agent()
        return self.insert_items(items, nudge=nudge)

    def insert_items(
        self,
        items: Sequence[Item],
        *,
        nudge: bool = True,
        then: Callable[[sqlite3.Connection], None] | None = None,
    ) -> list[tuple[Item, bool]]:
        """Store items of any type in one transaction (`then` runs inside it); the producers
        reach it through `inbox.follow.record`, everyone else through `push_items`."""
        results: list[tuple[Item, bool]] = []
        with self.write() as db:
            for item in items:
                created = _insert(db, item)
                if not created:
                    item = self._item_by_key(item.agent, item.key) or item
                results.append((item, created))
            if then is not None:
                then(db)
        if nudge:
            try:
                # Nudge commands live under `agents` in config.yaml: without any, skip loading
                # the nudge module (and subprocess) on every push.
                if self.store_config().get("agents"):
                    from inbox.nudge import nudge_agents

                    nudge_agents(self, [item for item, created in results if created])
            except Exception as exc:  # the items are committed: a nudge must not undo that
                self.log(f"nudge failed: {type(exc).__name__}: {exc}")
        return results

    def log(self, line: str) -> None:
        """Note a fault that must not fail the caller in `.runtime/delivery.log`."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            fd = files.open_file(str(self.root), str(self.runtime / "delivery.log"))
            try:
                os.write(fd, f"{stamp} {line}\n".encode())
            finally:
                os.close(fd)
        except (OSError, StorageError):
            pass

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
        refuse_producer_type(type)
        known = self.session(check_session(session))
        agent = known.agent if known else "queued"  # the drain fills in the session's agent
        item = Item.new(agent, content, key=key, ttl=ttl, type=type, source=source,
                        priority=priority, pusher=acting_agent(pusher))  # fmt: skip
        record = item.to_json()
        for name in ("id", "agent", "state", "session", "settled_at"):
            record.pop(name)
        SessionQueue(self.runtime, session).append(record)
        return item

    def _item_by_key(self, agent: str, key: str) -> Item | None:
        row = self.db.execute(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE agent = ? AND key = ?", (agent, key)
        ).fetchone()
        return _item(row) if row else None

    # -- reading ----------------------------------------------------------------------------

    def items(self, agent: str | None = None, states: Sequence[str] = ("pending",)) -> list[Item]:
        """Items by state (all agents when `agent` is None), most urgent and oldest first."""
        marks = ", ".join("?" for _ in states)
        sql = f"SELECT {ITEM_COLUMNS} FROM items WHERE state IN ({marks})"
        params: list[Any] = list(states)
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        sql += " ORDER BY priority, created_at, id"
        return [_item(row) for row in self.db.execute(sql, params)]

    def follow(self) -> int:
        """Derive the items of commits this database has not seen (`inbox.follow`); returns
        how many were new. A fault there is logged and never keeps a drain from delivering
        what it already has."""
        from inbox.follow import follow

        try:
            return follow(self)
        except Exception as exc:  # noqa: BLE001 - logged; the next drain tries again
            self.log(f"following git failed: {type(exc).__name__}: {exc}")
            return 0

    def has_pending(self, agent: str, now: float | None = None) -> bool:
        """True when `agent` has an unexpired item not yet delivered (cheap: one indexed
        lookup); items claimed by a drain whose output is not known to be out count."""
        now = time.time() if now is None else now
        row = self.db.execute(
            "SELECT 1 FROM items WHERE agent = ? AND state IN ('pending', 'delivering') "
            "AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
            (agent, now),
        ).fetchone()
        return row is not None

    def wait(self, agent: str, timeout: float, poll: float = 0.05) -> bool:
        """Block until `agent` has a pending item (True) or `timeout` seconds pass (False)."""
        from beads.waiting import wait_until

        def pending() -> bool | None:
            self.follow()  # mail committed meanwhile (a crashed send, a push) wakes it too
            return True if self.has_pending(agent) else None

        return wait_until(pending, timeout, poll) is not None

    # -- drain ------------------------------------------------------------------------------

    def drain(
        self,
        session: str,
        agent: str | None = None,
        *,
        max_priority: int = 4,
        limit: int | None = None,
        deliver: bool = True,
    ) -> Drained:
        """Hand `session` its agent's pending items (see DESIGN.md, Delivery).

        First derives the items of commits the database has not seen yet (`inbox.follow`).
        Takes the session's queue, merges it with the agent's undelivered items, drops expired
        and moot ones, sorts by priority then age, hands out at most `limit` (priority 0 is
        never deferred), once per agent. `max_priority` lets the Stop hook take only the
        urgent ones.

        With `deliver=False` the items are only claimed for the session: the caller marks
        them delivered (`delivered`) once its output is written, so a drain killed before
        that hands them out again at the session's next drain (at-least-once; other sessions
        of the agent get them after CLAIM_SECONDS).
        """
        check_session(session)
        known = self.session(session)
        if agent is None:
            if known is None:
                raise NotFound(f"no session {session!r}; give the agent or register the session")
            agent = known.agent
        self.follow()
        if SessionQueue(self.runtime, session).empty() and not self.has_pending(agent):
            return Drained(session=session, agent=agent, items=[], text="")  # the common case
        limit = limit if limit is not None else self.setting("max_items")
        keep = self.setting("keep_delivered")
        problems = self._take_queue(session, agent)
        now = time.time()
        moot = self._moot_keys(self.items(agent, ("pending", "delivering")))
        state = "delivered" if deliver else "delivering"
        with self.write() as db:
            pending = [
                _item(row)
                for row in db.execute(
                    f"SELECT {ITEM_COLUMNS} FROM items WHERE agent = ? AND (state = 'pending' "
                    "OR (state = 'delivering' AND (session = ? OR settled_at < ?))) "
                    "ORDER BY priority, created_at, id",
                    (agent, session, now - CLAIM_SECONDS),
                )
            ]
            dropped: list[tuple[str, int]] = []
            live: list[Item] = []
            for item in pending:
                if item.expired(now):
                    dropped.append(("expired", item.id or 0))
                elif item.key in moot:
                    dropped.append(("moot", item.id or 0))
                elif item.priority <= max_priority:
                    live.append(item)
            urgent = [item for item in live if item.priority == 0]
            rest = [item for item in live if item.priority != 0]
            chosen = urgent + rest[: max(0, limit - len(urgent))]
            db.executemany(
                "UPDATE items SET state = ?, settled_at = ? WHERE id = ?",
                [(why, now, item_id) for why, item_id in dropped],
            )
            db.executemany(
                "UPDATE items SET state = ?, session = ?, settled_at = ? WHERE id = ?",
                [(state, session, now, item.id) for item in chosen],
            )
            db.execute(
                "DELETE FROM items WHERE agent = ? AND state NOT IN ('pending', 'delivering') "
                "AND settled_at < ?",
                (agent, now - keep),
            )
        for item in chosen:
            item.state, item.session, item.settled_at = state, session, now
        return Drained(
            session=session,
            agent=agent,
            items=chosen,
            text=render(chosen),
            deferred=len(live) - len(chosen),
            dropped=len(dropped),
            problems=problems,
        )

    def delivered(self, drained: Drained) -> None:
        """Mark the items of a `drain(deliver=False)` delivered: its output is out."""
        if not drained.items:
            return
        now = time.time()
        with self.write() as db:
            db.executemany(
                "UPDATE items SET state = 'delivered', settled_at = ? "
                "WHERE id = ? AND state = 'delivering' AND session = ?",
                [(now, item.id, drained.session) for item in drained.items],
            )
        for item in drained.items:
            item.state, item.settled_at = "delivered", now

    def _take_queue(self, session: str, agent: str) -> list[str]:
        """Move the session's queue into the database (committed before the file empties)."""
        queue = SessionQueue(self.runtime, session)
        if queue.empty():
            return []

        def store(records: list[dict[str, Any]]) -> list[str]:
            items, problems = [], []
            for record in records:
                try:
                    item = Item.from_json({**record, "agent": agent})
                    refuse_producer_type(item.type)
                    items.append(item)
                except InvalidInput as exc:
                    queue.set_aside(json.dumps(record), str(exc))
                    problems.append(f"queue item set aside: {exc}")
            with self.write() as db:
                for item in items:
                    _insert(db, item)
            return problems

        return queue.take(store)[1]

    def settle(self, agent: str, keys: Sequence[str], state: str = "moot") -> int:
        """Settle `agent`'s undelivered items of these keys (a producer says they are moot:
        for items with no bead to check); returns how many."""
        now = time.time()
        with self.write() as db:
            return sum(
                db.execute(
                    "UPDATE items SET state = ?, settled_at = ? WHERE agent = ? AND key = ? "
                    "AND state IN ('pending', 'delivering')",
                    (state, now, agent, key),
                ).rowcount
                for key in keys
            )

    def _moot_keys(self, items: Sequence[Item]) -> set[str]:
        """Keys of the items whose referenced bead now matches a moot condition."""
        refs = [item for item in items if item.ref_bead and item.moot_when]
        if not refs:
            return set()
        moot = set()
        for item in refs:
            bead = self.reader.get(item.ref_bead or "")
            if bead is not None and is_moot(bead.to_dict(), item.moot_when or []):
                moot.add(item.key)
        return moot

    def reap(self) -> int:
        """Remove expired pending items and settled items past `delivery.keep_delivered`."""
        now = time.time()
        with self.write() as db:
            expired = db.execute(
                "DELETE FROM items WHERE state IN ('pending', 'delivering') "
                "AND expires_at IS NOT NULL AND expires_at <= ?",
                (now,),
            ).rowcount
            old = db.execute(
                "DELETE FROM items WHERE state NOT IN ('pending', 'delivering') AND settled_at < ?",
                (now - self.setting("keep_delivered"),),
            ).rowcount
        return expired + old

    # -- sessions ---------------------------------------------------------------------------

    def register(self, session: str, agent: str, *, cwd: str | None = None) -> Session:
        """Start (or restart) `session` for `agent`; it is live and busy."""
        check_session(session)
        check_agent(agent)
        now = time.time()
        self._update_sessions(
            "INSERT INTO sessions(session, agent, state, cwd, started_at, last_hook, "
            "last_hook_at) VALUES (?, ?, 'busy', ?, ?, 'SessionStart', ?) "
            "ON CONFLICT(session) DO UPDATE SET agent = excluded.agent, state = 'busy', "
            "cwd = COALESCE(excluded.cwd, cwd), last_hook = 'SessionStart', "
            "last_hook_at = excluded.last_hook_at, ended_at = NULL",
            (session, agent, cwd, now, now),
        )
        return self.session(session)  # type: ignore[return-value]

    def hook_seen(self, session: str, agent: str, event: str, *, state: str | None = None) -> None:
        """Record a hook of a session (registering it if its SessionStart was missed)."""
        check_session(session)
        now = time.time()
        self._update_sessions(
            "INSERT INTO sessions(session, agent, state, started_at, last_hook, last_hook_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session) DO UPDATE SET "
            "state = CASE WHEN ? IS NULL THEN sessions.state ELSE ? END, "
            "last_hook = excluded.last_hook, last_hook_at = excluded.last_hook_at, "
            "ended_at = CASE WHEN ? = 'ended' THEN excluded.last_hook_at ELSE NULL END",
            (session, agent, state or "busy", now, event, now, state, state, state),
        )

    def end(self, session: str) -> None:
        """SessionEnd: the session is no longer live."""
        check_session(session)
        now = time.time()
        self._update_sessions(
            "UPDATE sessions SET state = 'ended', ended_at = ?, last_hook = 'SessionEnd', "
            "last_hook_at = ? WHERE session = ?",
            (now, now, session),
        )

    def session(self, session: str) -> Session | None:
        row = self._on_sessions(
            lambda db: db.execute("SELECT * FROM sessions WHERE session = ?", (session,)).fetchone()
        )
        return Session(*row) if row else None

    def sessions(self, *, include_ended: bool = False) -> list[Session]:
        """Live sessions (not ended, heard from within the idle timeout), newest first."""
        rows = self._on_sessions(
            lambda db: db.execute("SELECT * FROM sessions ORDER BY last_hook_at DESC").fetchall()
        )
        found = [Session(*row) for row in rows]
        if include_ended:
            return found
        oldest = time.time() - self.setting("session_idle_timeout")
        return [s for s in found if s.state != "ended" and s.last_hook_at >= oldest]

    def live_sessions(self, agent: str) -> list[Session]:
        return [s for s in self.sessions() if s.agent == agent]

    def count_stop_block(self, session: str, blocked: bool) -> int:
        """Count a blocked Stop (or reset the count); returns the new count."""
        self._update_sessions(
            "UPDATE sessions SET stop_blocks = CASE WHEN ? THEN stop_blocks + 1 ELSE 0 END "
            "WHERE session = ?",
            (blocked, session),
        )
        found = self.session(session)
        return found.stop_blocks if found else 0

    def record_nudge(self, session: str, outcome: str, detail: str) -> None:
        self._update_sessions(
            "UPDATE sessions SET nudged_at = ?, nudge_outcome = ?, nudge_detail = ? "
            "WHERE session = ?",
            (time.time(), outcome, detail[:500], session),
        )


def refuse_producer_type(type: str) -> None:
    """Items of a producer's type (mail, decision, gate) come from that producer only."""
    if type in PRODUCER_TYPES:
        raise InvalidInput(
            f"items of type {type!r} come only from their producer (gc mail, gc decision, "
            "gc gate); push another type (alert, event, agent, system)"
        )


_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class DatabaseDamaged(StorageError):
    """A delivery database file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB); `file_id` is the
    `(device, inode)` of the file found so."""

    def __init__(self, message: str, file_id: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.file_id = file_id


def database_error(
    exc: sqlite3.Error, name: str, file_id: tuple[int, int] | None = None
) -> GcError:
    """What sqlite's `exc` on the database `name` (the file `file_id`) means to a user, said
    as the store's own errors say it: a full disk, a read-only store, a busy or a damaged
    file."""
    code = error_code(exc)
    # A full disk shows as SQLITE_FULL, or, when the `-shm` file cannot grow, as this I/O
    # error (sqlite writes it through: ENOSPC, a quota).
    full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_IOERR_SHMSIZE
    if code == sqlite3.SQLITE_FULL or full:
        return StorageError(f"no space left on device ({name} could not be written)")
    if code in READ_ONLY:
        return StorageError(f"store is read-only: {name} cannot be written ({exc})")
    if code in _BUSY:
        return Conflict(f"{name} is busy: {exc}")
    if code in DAMAGED:
        return DatabaseDamaged(f"{name} is damaged: {exc}", file_id)
    return StorageError(f"{name}: {exc}")


class _Connection(sqlite3.Connection):
    """A delivery database's connection: once open, a statement's error says what it means
    to a user and names the file (`database_error`), for reads as for writes."""

    name: str | None = None  # set once open: until then, sqlite's errors as they are
    file_id: tuple[int, int] | None = None  # the file opened (a damaged one is named so)

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> Exception:
        return exc if self.name is None else database_error(exc, self.name, self.file_id)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection, name: str) -> Iterator[sqlite3.Connection]:
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise database_error(exc, name, getattr(db, "file_id", None)) from None
    try:
        yield db
        db.execute("COMMIT")
    except BaseException as exc:
        rollback(db)
        if isinstance(exc, sqlite3.Error):
            raise database_error(exc, name, getattr(db, "file_id", None)) from None
        raise


def _connect(
    path: Path,
    synchronous: str,
    schema: str,
    last_table: str,  # a table of every version: absent, the database is new
    *,
    version: int = 0,
    migrations: dict[int, str] | None = None,
    setup: Callable[[sqlite3.Connection], None] | None = None,
) -> sqlite3.Connection:
    """Open (and on first use create, or upgrade) one of the delivery databases.

    A database of an older `user_version` is brought up by `migrations`; `setup` runs once,
    in the same transaction, when the database is made or upgraded. A newer one is refused.
    One this process may not write (a read-only store) is opened read-only: reads answer,
    writes fail with `store is read-only`. A damaged file raises `DatabaseDamaged`.
    """
    # sqlite opens by name: never through a link, created with the store's mode.
    files.prepare_db(str(path.parent.parent), str(path))
    file_id = dbfile.file_id(path)
    db = None
    try:
        db = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False, factory=_Connection
        )
        db.file_id = file_id
        db.execute(f"PRAGMA synchronous={synchronous}")
        if _schema_state(db, last_table, path, version) == (version, True):
            db.name = path.name
            return db  # the common case: two cheap reads
        db.execute("PRAGMA journal_mode=WAL")  # kept in the file: set it once
        with _transaction(db, path.name):
            found, made = _schema_state(
                db, last_table, path, version
            )  # another process may be here
            if not made:
                statements = schema.split(";")
            else:
                steps = range(found, version)
                statements = [s for n in steps for s in (migrations or {})[n].split(";")]
            if not made or found < version:
                for statement in statements:
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version={version}")
                if setup is not None:
                    setup(db)
        db.name = path.name
        return db
    except GcError:
        if db is not None:
            db.close()
        raise
    except sqlite3.Error as exc:
        if db is not None:
            db.close()
        error = database_error(exc, path.name, file_id)
        if error_code(exc) in READ_ONLY:
            return _connect_read_only(path, last_table, version, error)
        raise error from None


def _connect_read_only(
    path: Path, last_table: str, version: int, cause: GcError
) -> sqlite3.Connection:
    """Open a database this process may not write (a read-only mount, another user's store);
    a newer gc's database is refused here too."""

    def current(db: sqlite3.Connection) -> bool:
        return _schema_state(db, last_table, path, version) == (version, True)

    db = open_read_only(path, current, factory=_Connection)
    if db is None:
        raise cause
    db.name = path.name  # type: ignore[attr-defined]
    return db


def _schema_state(db: sqlite3.Connection, table: str, path: Path, known: int) -> tuple[int, bool]:
    """`(user_version, whether `table` exists)`; a version above `known` (a database made by
    a newer gc) is refused rather than half-read."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > known:
        raise StorageError(
            f"{path.name} has schema version {version}, newer than this gc knows ({known}): "
            "upgrade gc-beads"
        )
    made = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,))
    return version, made.fetchone() is not None


def _insert(db: sqlite3.Connection, item: Item) -> bool:
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


def _item(row: tuple[Any, ...]) -> Item:
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
