"""Sessions: one run of an agent as the hooks report it, in `.runtime/sessions.sqlite3`.

Sessions are runtime state that every hook writes: they live in a database of their own that
is never synced (a power cut costs, at worst, the session list), so a hook does not pay for
two fsyncs; items, the source of truth, stay in the synced `delivery.sqlite3`. A damaged
sessions file is dropped and started afresh. Other layers may keep tables of their own in it
(`on_sessions`), as the Stop hook's loop counter does (gates/stop.py).
"""

from __future__ import annotations

import contextlib
import time
from collections import namedtuple
from collections.abc import Callable, Iterator
from pathlib import Path

from beads.index import dbfile
from beads.records.record import check_agent
from inbox.database import DatabaseDamaged, connect, transaction
from inbox.queue import check_session

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

SESSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions(
    session TEXT PRIMARY KEY, agent TEXT NOT NULL, state TEXT NOT NULL, cwd TEXT,
    started_at REAL NOT NULL, last_hook TEXT, last_hook_at REAL NOT NULL, ended_at REAL,
    nudged_at REAL, nudge_outcome TEXT, nudge_detail TEXT);
CREATE INDEX IF NOT EXISTS sessions_by_agent ON sessions(agent, state);
CREATE TABLE IF NOT EXISTS nudges(agent TEXT PRIMARY KEY, last_at REAL NOT NULL);
"""
# Files made by older versions also have a `stop_blocks` column (the loop counter, now
# gates' own table): reads name their columns, and inserts leave it to its default.


# A namedtuple, not a dataclass: hooks build them, and importing `dataclasses` (which loads
# `inspect`) would slow every hook.
class Session(
    namedtuple(
        "Session",
        "session agent state cwd started_at last_hook last_hook_at "
        "ended_at nudged_at nudge_outcome nudge_detail",
        defaults=(None, None, None, None),
    )
):
    """One run of an agent, as the hooks report it.

    `state` is busy, idle or ended; times are Unix seconds.
    """

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


SESSION_COLUMNS = ", ".join(Session._fields)


class Sessions:
    """The sessions database: registering, hook by hook, listing, nudge outcomes. Agents are
    given by their full names (the caller's `AgentNames.own`)."""

    def __init__(self, runtime: Path, idle_timeout: Callable[[], float]) -> None:
        """`runtime`: the store's `.runtime/`; `idle_timeout()`: seconds after which a silent
        session is no longer live (`delivery.session_idle_timeout`)."""
        self.runtime = runtime
        self.idle_timeout = idle_timeout
        self._db: sqlite3.Connection | None = None

    @property
    def db(self) -> sqlite3.Connection:
        """The sessions database, opened on first use (a push with no nudges never needs it)."""
        if self._db is None:
            path = self.runtime / "sessions.sqlite3"
            try:
                self._db = connect(path, "OFF", SESSIONS_SCHEMA, "nudges")
            except DatabaseDamaged as exc:
                self._drop(exc)
                self._db = connect(path, "OFF", SESSIONS_SCHEMA, "nudges")
        return self._db

    def close(self) -> None:
        """Close the database if it was opened."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def _drop(self, damaged: DatabaseDamaged) -> None:
        """Delete a damaged sessions file, so the next use starts a fresh session list: it is
        never synced (a power cut may garble it), and only sessions are lost. Only for damage:
        a busy, read-only or full database, or a newer gc's, is kept as it is."""
        self.close()
        path = self.runtime / "sessions.sqlite3"
        if dbfile.file_id(path) == damaged.file_id:  # not one another process remade meanwhile
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    def on_sessions(self, use: Callable[[sqlite3.Connection], Any]) -> Any:
        """`use(sessions_db)` (each statement its own transaction); when it meets a damaged
        page, once more on a fresh file."""
        try:
            return use(self.db)
        except DatabaseDamaged as exc:
            self._drop(exc)
        return use(self.db)

    def _update(self, sql: str, parameters: tuple[Any, ...]) -> None:
        """One statement in its own transaction on the sessions database."""

        def run(db: sqlite3.Connection) -> None:
            with transaction(db, "sessions.sqlite3"):
                db.execute(sql, parameters)

        self.on_sessions(run)

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the sessions database (a damaged file is dropped: the
        next use starts a fresh one)."""
        try:
            with transaction(self.db, "sessions.sqlite3") as db:
                yield db
        except DatabaseDamaged as exc:
            self._drop(exc)
            raise

    def adopt(self, full: str, others: tuple[str, ...]) -> None:
        """Sessions registered under another spelling of agent `full` become its own."""
        marks = ", ".join("?" for _ in others)
        held = self.on_sessions(
            lambda db: db.execute(
                f"SELECT 1 FROM sessions WHERE agent IN ({marks}) LIMIT 1", others
            ).fetchone()
        )
        if held:
            self._update(f"UPDATE sessions SET agent = ? WHERE agent IN ({marks})",
                                  (full, *others))  # fmt: skip

    def register(self, session: str, agent: str, *, cwd: str | None = None) -> Session:
        """Start (or restart) `session` for `agent` (its full name); it is live and busy."""
        check_session(session)
        check_agent(agent)
        now = time.time()
        self._update(
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
        self._update(
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
        self._update(
            "UPDATE sessions SET state = 'ended', ended_at = ?, last_hook = 'SessionEnd', "
            "last_hook_at = ? WHERE session = ?",
            (now, now, session),
        )

    def session(self, session: str) -> Session | None:
        """The session of this id, ended or not; None if no hook has reported it."""
        row = self.on_sessions(
            lambda db: db.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session = ?", (session,)
            ).fetchone()
        )
        return Session(*row) if row else None

    def sessions(self, *, include_ended: bool = False) -> list[Session]:
        """Live sessions (not ended, heard from within the idle timeout), newest first."""
        rows = self.on_sessions(
            lambda db: db.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY last_hook_at DESC"
            ).fetchall()
        )
        found = [Session(*row) for row in rows]
        if include_ended:
            return found
        oldest = time.time() - self.idle_timeout()
        return [s for s in found if s.state != "ended" and s.last_hook_at >= oldest]

    def live_sessions(self, agent: str) -> list[Session]:
        """`agent`'s (its full name) live sessions, newest first."""
        return [s for s in self.sessions() if s.agent == agent]

    def session_agents(self) -> set[str]:
        """Every agent a session was ever registered for (`--to all` reaches them)."""
        rows = self.on_sessions(
            lambda db: db.execute("SELECT DISTINCT agent FROM sessions").fetchall()
        )
        return {row[0] for row in rows}

    def record_nudge(self, session: str, outcome: str, detail: str) -> None:
        """The outcome of a nudge on its session (shown by `gc session list`)."""
        self._update(
            "UPDATE sessions SET nudged_at = ?, nudge_outcome = ?, nudge_detail = ? "
            "WHERE session = ?",
            (time.time(), outcome, detail[:500], session),
        )
