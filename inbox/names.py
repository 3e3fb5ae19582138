"""Agents' names in delivery: one full name per agent (beads/records/agents.py), and who an item for
an agent, a rig or `all` goes to."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from beads.errors import InvalidInput, NotFound
from beads.records.agents import rig_members
from beads.records.record import check_agent

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3

    from inbox.deliveryconfig import DeliveryConfig
    from inbox.sessions import Sessions


class AgentNames:
    """The names delivery stores agents under, and the recipients of an item."""

    def __init__(
        self,
        db: sqlite3.Connection,
        write: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        settings: DeliveryConfig,
        sessions: Sessions,
        store_agents: Callable[[], Iterable[str]],
    ) -> None:
        """`db` and `write()`: the delivery database; `settings`: config.yaml's names;
        `sessions`: the sessions database; `store_agents()`: the agents the store knows."""
        self.db = db
        self.write = write
        self.settings = settings
        self.sessions = sessions
        self.store_agents = store_agents
        self._adopted: set[str] = set()

    def own(self, name: str) -> str:
        """The full name of agent `name` (`DeliveryConfig.agent_of`), once what this database
        holds under its other spellings (items, durable entries and sessions from before its
        rig was listed: `mayor` for `gastown/mayor`) is moved to it; cheap after the first
        call."""
        if name.startswith("@"):  # a broadcast's group row
            return name
        names = self.settings.spellings(name)
        full, others = names[0], names[1:]
        if not others or full in self._adopted:
            return full
        marks = ", ".join("?" for _ in others)
        held = self.db.execute(
            f"SELECT 1 FROM items WHERE agent IN ({marks}) UNION ALL "
            f"SELECT 1 FROM entries WHERE agent IN ({marks}) LIMIT 1",
            (*others, *others),
        ).fetchone()
        if held:
            with self.write() as db:
                for other in others:
                    # A key the full name already has is a duplicate: the full name's wins.
                    db.execute("UPDATE OR IGNORE items SET agent = ? WHERE agent = ?",
                               (full, other))  # fmt: skip
                    db.execute("DELETE FROM items WHERE agent = ?", (other,))
                    db.execute("UPDATE entries SET agent = ? WHERE agent = ?", (full, other))
        self.sessions.adopt(full, others)
        self._adopted.add(full)
        return full

    def recipients(self, to: str | None = None, rig: str | None = None) -> list[str]:
        """The agents (full names) an item for `to` (an agent or `all`) or `rig` goes to:
        `all` is every agent config.yaml lists, the store knows, or a session was registered
        for."""
        config = self.settings.store_config()
        if rig is not None:
            members = rig_members(rig, config)
            if not members:
                raise NotFound(f"no rig {rig!r} in config.yaml")
            return [check_agent(m, what="rig member") for m in members]
        if to is None:
            raise InvalidInput("give a recipient: --to AGENT, --to all or --rig RIG")
        agent_of = self.settings.agent_of
        if to == "all":
            named = set(config.get("agents") or {}) | set(self.store_agents())
            named |= self.sessions.session_agents()
            return sorted({agent_of(n) for n in named if n != "all"})
        return [agent_of(check_agent(to, what="recipient"))]
