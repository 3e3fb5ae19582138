"""Broadcasts: an item for `all` or a rig reaches the group's agents of today and those that
start later, within the item's TTL.

A broadcast is a standing row of the items table (agent `@all` or `@rig:<rig>`, state
`standing`, always with an expiry: `delivery.broadcast_ttl` when none is given). The agents
known at the push get their own copy at once (nudged as any push); any other agent gets one
at its first drain while the broadcast stands (`take_broadcasts`, resolving rig membership
from config.yaml then). The copy keeps the broadcast's key, so each agent has it once.
"""

from __future__ import annotations

import time

from beads.errors import InvalidInput
from beads.records.agents import rig_members, rig_of
from beads.records.record import acting_agent
from inbox.items import (
    GROUPS,
    ITEM_COLUMNS,
    NOT_STANDING,
    Item,
    insert_row,
    refuse_producer_type,
)

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import contextlib
    import sqlite3
    from collections.abc import Callable, Sequence
    from typing import Any

    from inbox.deliveryconfig import DeliveryConfig
    from inbox.items import ItemTable
    from inbox.names import AgentNames

__all__ = ["NOT_STANDING", "Broadcasts", "copy_for", "stand"]


class Broadcasts:
    """Items for `all` or a rig, standing for the group's agents that drain later."""

    def __init__(
        self,
        db: sqlite3.Connection,
        write: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]],
        settings: DeliveryConfig,
        names: AgentNames,
        items: ItemTable,
        outbox: Callable[[], Callable[[sqlite3.Connection, Sequence[Item]], None] | None],
    ) -> None:
        """`db` and `write()`: the delivery database; `settings`: config.yaml; `names`: who
        the group's agents are; `items`: where their copies go; `outbox()`: as `ItemTable`
        takes it."""
        self.db = db
        self.write = write
        self.settings = settings
        self.names = names
        self.items = items
        self.outbox = outbox

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
        """Push to `to="all"` or `rig`: to the group's agents known now, and leave the item
        standing for those that drain later, until it expires (`ttl`, default
        `delivery.broadcast_ttl`); returns `(item, created)` per agent known now."""
        if (to == "all") == (rig is not None):
            raise InvalidInput("a broadcast goes to all or to one rig")
        group = "@all" if rig is None else f"@rig:{rig}"
        recipients = self.names.recipients(to, rig)  # NotFound for an unknown rig
        ttl = self.settings.setting("broadcast_ttl") if ttl is None else ttl
        standing = Item.new(acting_agent(), content, key=key, ttl=ttl, **fields)
        refuse_producer_type(standing.type, standing.key)
        standing.agent, standing.state = group, "standing"
        standing.pusher = standing.pusher or acting_agent()
        outbox = self.outbox()
        with self.write() as db:
            if stand(db, standing) and outbox is not None:
                outbox(db, [standing])  # other machines' relays make their agents' copies
        copies = [copy_for(standing, agent) for agent in recipients]
        return self.items.push_items(copies) if copies else []

    def take(self, agent: str) -> int:
        """Give `agent` its copy of every standing broadcast of its groups it has not had;
        returns how many (one indexed query when there is none: drains call it)."""
        agent = self.names.own(agent)
        now = time.time()
        sql = (
            f"SELECT {ITEM_COLUMNS} FROM items AS b WHERE {GROUPS} AND state = 'standing' "
            "AND expires_at > ? AND NOT EXISTS "
            "(SELECT 1 FROM items WHERE items.agent = ? AND items.key = b.key)"
        )
        standing = self.items.sound(self.db.execute(sql, (now, agent)))
        if not standing:
            return 0
        config = self.settings.store_config()
        rigs = config.get("rigs") or {}
        groups = {"@all"} | {f"@rig:{r}" for r in rigs if agent in rig_members(r, config)}
        rig = rig_of(agent, config)
        if rig is not None:  # `rig/name` is of its rig, listed or not
            groups.add(f"@rig:{rig}")
        copies = [copy_for(item, agent) for item in standing if item.agent in groups]
        if not copies:
            return 0
        with self.write() as db:
            return sum(insert_row(db, item) for item in copies)


def stand(db: sqlite3.Connection, standing: Item) -> bool:
    """Record a broadcast's standing row (`standing.agent` is its group, `@all` or
    `@rig:<rig>`); True if it is new."""
    created = insert_row(db, standing)
    db.execute("UPDATE items SET state = 'standing' WHERE agent = ? AND key = ?",
               (standing.agent, standing.key))  # fmt: skip
    return created


def copy_for(standing: Item, agent: str) -> Item:
    """`agent`'s own item of a broadcast: same key, content and expiry."""
    fields = standing.to_json()
    for name in ("id", "state", "session", "settled_at"):
        fields.pop(name)
    return Item(**{**fields, "agent": agent})
