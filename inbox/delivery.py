"""`Delivery`: the delivery databases of one store, and the one object callers use.

`.runtime/delivery.sqlite3` holds items, durable entries and the follow watermark: the source
of truth for delivery, separate from the derived bead index (an index rebuild never touches
it). `.runtime/sessions.sqlite3` holds sessions and nudges. Every change is one sqlite
transaction, taking the database's write lock up front.

`Delivery` is composed of collaborators, each owning one job and given what it needs when
made; its methods hand each call to the one that does it:

- `settings` (inbox/deliveryconfig.py, `DeliveryConfig`): `delivery.*` settings, agents' names;
- `session_table` (inbox/sessions.py, `Sessions`): sessions as the hooks report them;
- `names` (inbox/names.py, `AgentNames`): one full name per agent, recipients;
- `item_table` (inbox/items.py, `ItemTable`): push (with nudges), listing, settling, reaping;
- `broadcasts` (inbox/broadcast.py, `Broadcasts`): items for `all` or a rig;
- `queues` (inbox/queuemerge.py, `Queues`): session queues taken into the database (made on
  first use, as `drainer` is: a command that pushes items never loads either);
- `follower` (inbox/follow.py, `Follower`): items derived from the store's commits;
- `drainer` (inbox/drain.py, `Drainer`): the drain policy (what a session is handed), `wait`;
- inbox/database.py: opening, upgrading and transactions; what sqlite's errors mean.

Items of mail, decisions and gates are derived from git by the producers of a
`ProducerSet` (inbox/producers.py): the one given, or the program's default set, looked up
the first time following git needs it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from beads import files
from beads.errors import StorageError
from beads.index.reader import IndexReader, branch_head
from beads.lazy import lazy_attributes
from beads.location import find_store
from beads.records.record import check_agent
from inbox.broadcast import Broadcasts
from inbox.database import MIGRATIONS, SCHEMA, SCHEMA_VERSION, connect, transaction
from inbox.deliveryconfig import DeliveryConfig
from inbox.follow import Follower
from inbox.items import ItemTable
from inbox.names import AgentNames
from inbox.producers import ProducerSet, default_producers
from inbox.queue import check_session
from inbox.sessions import Session, Sessions

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator, Sequence
    from typing import Any

    from inbox.drain import Drained, Drainer
    from inbox.items import Item
    from inbox.nats.outbox import Outbox
    from inbox.nudge import Nudger
    from inbox.queuemerge import Queues
    from inbox.rederive import Refused

__all__ = ["Delivery", "Drained", "Session"]
__getattr__ = lazy_attributes(__name__, {"Drained": "inbox.drain"})

_UNREAD: Any = object()  # the outbox, not read yet


def damaged_advice(path: Path) -> str:
    """What to do about a damaged delivery database at `path`, in words (after the error,
    and in `gc doctor`'s report). Nothing rebuilds it whole: it is the source of truth of what
    was pushed. A new file starts at the branch's commit, and the producers' reconcilers
    (SessionStart, `gc inbox drain --reconcile`) derive again what they still know of."""
    return (
        f"move {path} aside and a new one is made: the pushed items and durable entries it "
        "holds are lost, unread mail and recent decisions and gates come back at each "
        "agent's next session start (or gc inbox drain --reconcile)"
    )


class Delivery:
    """The delivery databases of one store (`root` is the `.beads/` directory)."""

    def __init__(
        self,
        root: Path,
        producers: ProducerSet | None = None,
        *,
        config: Callable[[], dict[str, Any]] | None = None,
        outbox: Outbox | None = _UNREAD,
    ) -> None:
        """`producers`: who derives items from the store's commits (None: the program's
        default set, looked up when following git first needs it; inbox/producers.py).
        `config`: where the caller already has the store's configuration (`Store.config` is
        cached per commit), read anew at each use so a long-lived Delivery sees changes.
        `outbox`: the hook that writes items for agents of other machines (by default this
        machine's, from `delivery.nats.*`; a relay gives its own)."""
        self.root = root
        self.runtime = root / ".runtime"
        files.make_dirs(str(root), str(self.runtime))
        self._producers = producers
        self._producers_known = producers is not None
        self._reader: IndexReader | None = None
        self._outbox = outbox
        self._nudger: Nudger | None = None
        self._queues: Queues | None = None
        self._drainer: Drainer | None = None
        path = self.runtime / "delivery.sqlite3"
        self.db = connect(
            path,
            "NORMAL",
            SCHEMA,
            "entries",
            version=SCHEMA_VERSION,
            migrations=MIGRATIONS,
            setup=self._start_following,
            advice=damaged_advice(path),
        )
        read = config if config is not None else lambda: self.reader.config()
        self.settings = DeliveryConfig(read, fresh=config is not None)
        setting = self.settings.setting
        self.session_table = Sessions(self.runtime, lambda: setting("session_idle_timeout"))
        self.names = AgentNames(
            self.db, self.write, self.settings, self.session_table, self._store_agents
        )
        self.item_table = ItemTable(
            self.runtime, self.db, self.write, self.names, self.settings, self.outbox, self._nudge
        )
        self.broadcasts = Broadcasts(
            self.db, self.write, self.settings, self.names, self.item_table, self.outbox
        )
        self.follower = Follower(
            self.root, self.db, self.item_table, self.producer_set, self.note_fault
        )

    @property
    def queues(self) -> Queues:
        """The session queues' collaborator, made on first use."""
        if self._queues is None:
            from inbox.queuemerge import Queues

            self._queues = Queues(self.runtime, self.write, self.session_table, self.rederive)
        return self._queues

    @property
    def drainer(self) -> Drainer:
        """The drain policy's collaborator, made on first use."""
        if self._drainer is None:
            from inbox.drain import Drainer

            self._drainer = Drainer(
                self.runtime,
                self.write,
                settings=self.settings,
                names=self.names,
                items=self.item_table,
                sessions=self.session_table,
                queues=self.queues,
                broadcasts=self.broadcasts,
                refresh=self.refresh,
                reader=lambda: self.reader,
                sections=self._section,
            )
        return self._drainer

    def _start_following(self, db: sqlite3.Connection) -> None:
        # A new or upgraded database follows the branch from its current commit: what is
        # already in the store was announced by the code that wrote it (or never will be).
        head = branch_head(self.root)
        db.execute(
            "INSERT OR REPLACE INTO follow VALUES (1, ?)", (head.decode() if head else None,)
        )

    @classmethod
    def open(cls, beads_dir: str | Path | None = None) -> Delivery:
        """The delivery database of the store found as `Store.open` finds it."""
        return cls(find_store(beads_dir))

    def close(self) -> None:
        """Close the databases and the index this Delivery opened."""
        if self._reader is not None:
            self._reader.close()
        self.db.close()
        self.session_table.close()

    def __enter__(self) -> Delivery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the collaborators share ------------------------------------------------------

    @property
    def reader(self) -> IndexReader:
        """The store's index, opened once per Delivery (caught up with git when behind)."""
        if self._reader is None:
            self._reader = IndexReader(self.root)
        return self._reader

    def fresh_reader(self) -> IndexReader:
        """`reader`, opened again (so caught up) when the branch moved since it was opened."""
        if self._reader is not None and not self._reader.fresh():
            self._reader.close()
            self._reader = None
        return self.reader

    def producer_set(self) -> ProducerSet | None:
        """The producers this Delivery derives with: the set it was given, else the
        program's default (looked up now, the first time); None when there is none."""
        if not self._producers_known:
            self._producers = default_producers()
            self._producers_known = True
        return self._producers

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the items database, holding its write lock from the start;
        once it has ended, the relay is woken for the outbox rows it wrote (inbox/nats/)."""
        try:
            with transaction(self.db, "delivery.sqlite3") as db:
                yield db
        finally:
            if self._outbox is not None and self._outbox is not _UNREAD:
                self._outbox.ended()

    def note_fault(self, line: str) -> None:
        """Append a fault that must not fail the caller (a nudge, following git) to
        `.runtime/delivery.log`, with the time."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            fd = files.open_file(str(self.root), str(self.runtime / "delivery.log"))
            try:
                os.write(fd, f"{stamp} {line}\n".encode())
            finally:
                os.close(fd)
        except (OSError, StorageError):
            pass

    def outbox(self) -> Outbox | None:
        """The hook that also writes items for agents of other machines to the outbox
        (inbox/nats/outbox.py); None, read once, when this machine has no `delivery.nats.url`."""
        if self._outbox is _UNREAD:
            from beads.git.config import read_values

            local = read_values(self.root / ".git")
            self._outbox = None
            # Without NATS here (most machines), the outbox's module is never imported.
            if local.get("delivery.nats.url"):
                from inbox.nats.outbox import outbox_of, wake_path

                fifo = wake_path(self.root)
                self._outbox = outbox_of(local, self.settings.spellings, fifo)
        return self._outbox

    def nudger(self) -> Nudger:
        """Who nudges this store's idle agents (inbox/nudge.py; loaded on first use)."""
        if self._nudger is None:
            from inbox.nudge import Nudger

            self._nudger = Nudger(self.root, self.settings, self.names, self.session_table)
        return self._nudger

    def _nudge(self, items: list[Item]) -> None:
        # After new items are committed: nudge their idle recipients, never failing the push.
        try:
            # Nudge commands live under `agents` in config.yaml: without any, skip loading
            # the nudge module (and subprocess) on every push.
            if items and self.settings.store_config().get("agents"):
                self.nudger().nudge_agents(items)
        except Exception as exc:  # the items are committed: a nudge must not undo that
            self.note_fault(f"nudge failed: {type(exc).__name__}: {exc}")

    def _store_agents(self) -> list[str]:
        return list(self.reader.index.agents())

    def _section(self, item_type: str) -> Any:
        producers = self.producer_set()
        return producers.section(item_type) if producers is not None else None

    # -- producers ---------------------------------------------------------------------------

    def refresh(self) -> int:
        """Derive the items of commits this database has not seen (`Follower.refresh`);
        returns how many were new. Does nothing without a producer set (inbox/producers.py).
        A fault there is logged and never keeps a drain from delivering what it already has."""
        try:
            return self.follower.refresh()
        except Exception as exc:  # noqa: BLE001 - logged; the next drain tries again
            self.note_fault(f"following git failed: {type(exc).__name__}: {exc}")
            return 0

    def follow(self) -> int:
        """Deprecated name of `refresh` (kept for one release)."""
        import warnings  # lazy: only the old name needs it

        warnings.warn(
            "Delivery.follow is deprecated: use Delivery.refresh", DeprecationWarning, stacklevel=2
        )
        return self.refresh()

    def record(
        self,
        items: Sequence[Item],
        *,
        advance: tuple[bytes | None, bytes | None] | None = None,
    ) -> list[tuple[Item, bool]]:
        """A producer's items, recorded (`Follower.record`)."""
        return self.follower.record(items, advance=advance)

    def rederive(self, wanted: Sequence[tuple[str, str]]) -> tuple[list[Item], list[Refused]]:
        """The items the producers make now of the beads these `(agent, key)` requests name
        (inbox/rederive.py)."""
        if not wanted:
            return [], []
        from inbox.rederive import rederive

        return rederive(
            wanted,
            root=self.root,
            reader=self.fresh_reader,
            producers=self.producer_set,
            agent_of=self.settings.agent_of,
            log=self.note_fault,
        )

    def reconcile(self, agent: str) -> None:
        """Run every producer's reconciler for `agent` (they record the items they know of,
        idempotent by key); a failing one is logged, the others run."""
        producers = self.producer_set()
        for reconciler in producers.reconcilers() if producers is not None else []:
            try:
                reconciler(self, agent)
            except Exception as exc:  # noqa: BLE001 - logged; the next heartbeat tries again
                self.note_fault(f"reconcile failed: {type(exc).__name__}: {exc}")

    def heartbeat(self, agent: str, *, force: bool = False) -> bool:
        """Reconcile every producer for `agent` and reap (`reap`), at most once per
        `delivery.reconcile_interval` for the agent (any hook may call it: one `stat` when it
        is not due), or now with `force` (SessionStart); True if it ran. The interval counts
        from the agent's last heartbeat, or from its first hook when it has none yet (a
        session begins with SessionStart, which reconciles)."""
        mark = self.runtime / "heartbeat" / agent.replace("/", "%2F")
        now = time.time()
        try:
            age: float | None = now - mark.stat().st_mtime
        except FileNotFoundError:
            age = None
        due = force or (age is not None and age >= self.setting("reconcile_interval"))
        if not due and age is not None:
            return False
        # Marked before the work: a second hook meanwhile does not run it again.
        files.create(str(self.root), str(mark))
        os.utime(mark, (now, now))
        if not due:
            return False
        self.reconcile(agent)
        self.reap()
        return True

    # -- items (ItemTable) -------------------------------------------------------------------

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
        """Push one item to each recipient; returns `(item, created)` per recipient
        (`ItemTable.push`: deduplicated by key, idle recipients nudged, items of the
        producers' types refused)."""
        return self.item_table.push(
            recipients, content, key=key, type=type, source=source, priority=priority, ttl=ttl,
            ref_bead=ref_bead, moot_when=moot_when, nudge=nudge, pusher=pusher,
        )  # fmt: skip

    def push_items(self, items: Sequence[Item], *, nudge: bool = True) -> list[tuple[Item, bool]]:
        """Push checked items in one transaction (`ItemTable.push_items`)."""
        return self.item_table.push_items(items, nudge=nudge)

    def insert_items(
        self,
        items: Sequence[Item],
        *,
        nudge: bool = True,
        then: Callable[[sqlite3.Connection], None] | None = None,
    ) -> list[tuple[Item, bool]]:
        """Store items of any type in one transaction (`ItemTable.insert`)."""
        return self.item_table.insert(items, nudge=nudge, then=then)

    def items(self, agent: str | None = None, states: Sequence[str] = ("pending",)) -> list[Item]:
        """Items by state (all agents when `agent` is None), most urgent and oldest first."""
        return self.item_table.items(agent, states)

    def has_pending(self, agent: str, now: float | None = None) -> bool:
        """True when `agent` has an unexpired item not yet delivered."""
        return self.item_table.has_pending(agent, now)

    def take_problems(self) -> list[str]:
        """The rows reading set aside since the last call, one line each (a row holding a
        time no stamp can show: `ItemTable.sound`), for the caller to tell."""
        return self.item_table.take_problems()

    def settle(self, agent: str, keys: Sequence[str], state: str = "moot") -> int:
        """Settle `agent`'s undelivered items of these keys; returns how many."""
        return self.item_table.settle(agent, keys, state)

    def reap(self) -> int:
        """Remove expired and old settled items (`ItemTable.reap`); returns how many."""
        return self.item_table.reap()

    # -- broadcasts ----------------------------------------------------------------------------

    def broadcast(
        self,
        content: str,
        *,
        key: str,
        to: str | None = None,
        rig: str | None = None,
        ttl: float | None = None,
        **fields: Any,
    ) -> list[tuple[Item, bool]]:
        """Push to `to="all"` or `rig`, standing for the group's agents that drain later
        (`Broadcasts.broadcast`)."""
        return self.broadcasts.broadcast(content, key=key, to=to, rig=rig, ttl=ttl, **fields)

    def take_broadcasts(self, agent: str) -> int:
        """Give `agent` its copy of every standing broadcast of its groups it has not had."""
        return self.broadcasts.take(agent)

    # -- names and settings (AgentNames, DeliveryConfig) ----------------------------------------

    def own(self, name: str) -> str:
        """The full name of agent `name`, what its other spellings hold moved to it."""
        return self.names.own(name)

    def recipients(self, to: str | None = None, rig: str | None = None) -> list[str]:
        """The agents (full names) an item for `to` (an agent or `all`) or `rig` goes to."""
        return self.names.recipients(to, rig)

    def store_config(self) -> dict[str, Any]:
        """The store's `config.yaml`."""
        return self.settings.store_config()

    def setting(self, name: str) -> Any:
        """A `delivery.<name>` setting; durations come back as seconds."""
        return self.settings.setting(name)

    def keep_keys(self) -> float:
        """How long a settled item's row (its dedup key) is kept."""
        return self.settings.keep_keys()

    def context_cap(self) -> int:
        """`hooks.max_context_chars`: the most a drain's text may hold."""
        return self.settings.context_cap()

    def agent_of(self, name: str) -> str:
        """The full name of agent `name` (`beads.records.agents`)."""
        return self.settings.agent_of(name)

    def spellings(self, name: str) -> tuple[str, ...]:
        """Every name agent `name` may be stored under, its full name first."""
        return self.settings.spellings(name)

    def rig_of(self, name: str) -> str | None:
        """The rig of agent `name` as config.yaml gives it, or None."""
        return self.settings.rig_of(name)

    # -- sessions (Sessions) -------------------------------------------------------------------

    @property
    def sessions_db(self) -> sqlite3.Connection:
        """The sessions database, opened on first use."""
        return self.session_table.db

    def on_sessions(self, use: Callable[[sqlite3.Connection], Any]) -> Any:
        """`use(sessions_db)`; when it meets a damaged page, once more on a fresh file."""
        return self.session_table.on_sessions(use)

    def write_sessions(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One write transaction on the sessions database."""
        return self.session_table.write()

    def register(self, session: str, agent: str, *, cwd: str | None = None) -> Session:
        """Start (or restart) `session` for `agent` (stored by its full name); it is live and
        busy."""
        check_session(session)  # a bad session id is named before a bad agent
        full = self.names.own(check_agent(agent))
        return self.session_table.register(session, full, cwd=cwd)

    def hook_seen(self, session: str, agent: str, event: str, *, state: str | None = None) -> None:
        """Record a hook of a session (registering it if its SessionStart was missed)."""
        self.session_table.hook_seen(session, self.names.own(agent), event, state=state)

    def end(self, session: str) -> None:
        """SessionEnd: the session is no longer live."""
        self.session_table.end(session)

    def session(self, session: str) -> Session | None:
        """The session of this id, ended or not; None if no hook has reported it."""
        return self.session_table.session(session)

    def sessions(self, *, include_ended: bool = False) -> list[Session]:
        """Live sessions (not ended, heard from within the idle timeout), newest first."""
        return self.session_table.sessions(include_ended=include_ended)

    def live_sessions(self, agent: str) -> list[Session]:
        """`agent`'s live sessions, newest first."""
        return self.session_table.live_sessions(self.names.own(agent))

    def session_agents(self) -> set[str]:
        """Every agent a session was ever registered for."""
        return self.session_table.session_agents()

    def record_nudge(self, session: str, outcome: str, detail: str) -> None:
        """The outcome of a nudge on its session (shown by `gc session list`)."""
        self.session_table.record_nudge(session, outcome, detail)

    # -- session queues (Queues) -----------------------------------------------------------------

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
        """Append an item to one session's JSONL queue (`Queues.enqueue`)."""
        return self.queues.enqueue(session, content, key=key, type=type, source=source,
                                   priority=priority, ttl=ttl, pusher=pusher)  # fmt: skip

    def take_queue(self, session: str, agent: str) -> list[str]:
        """Move the session's queue into the database; returns the problems."""
        return self.queues.take(session, agent)

    # -- draining (Drainer) ----------------------------------------------------------------------

    def drain(
        self,
        session: str,
        agent: str | None = None,
        *,
        max_priority: int = 4,
        limit: int | None = None,
        deliver: bool = True,
    ) -> Drained:
        """Hand `session` its agent's pending items (`Drainer.drain`)."""
        return self.drainer.drain(
            session, agent, max_priority=max_priority, limit=limit, deliver=deliver
        )

    def delivered(self, drained: Drained) -> None:
        """Mark the items of a `drain(deliver=False)` delivered: its output is out."""
        self.drainer.delivered(drained)

    def settle_moot(self, agent: str) -> int:
        """Settle `agent`'s undelivered items whose referenced bead is now moot."""
        return self.drainer.settle_moot(agent)

    def wait(self, agent: str, timeout: float, poll: float = 0.05) -> bool:
        """Block until `agent` has a pending item (True) or `timeout` seconds pass (False)."""
        return self.drainer.wait(agent, timeout, poll)
