"""The outbox: pushes for agents of other machines, waiting in the delivery database for the
relay to publish them (inbox/nats/relay.py).

With `delivery.nats.url` in this machine's settings, every item a push, a producer or a
broadcast stores for an agent that does not live here (not in `delivery.nats.agents`), and
every broadcast's standing item, gets an outbox row in the same transaction as the item: the
push never touches the network, and an item committed is an item the relay will publish.
The relay removes a row once JetStream has acknowledged it. No NATS client here: this module
is on the path of every push when NATS is configured.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Sequence

    from inbox.items import Item

TABLE = """CREATE TABLE IF NOT EXISTS outbox(
    id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, key TEXT NOT NULL,
    item TEXT NOT NULL, created_at REAL NOT NULL)"""
# The fields an item travels with (its row's id, state and session stay on each machine).
TRAVELS = ("agent", "key", "type", "source", "content", "priority", "created_at",
           "expires_at", "ref_bead", "moot_when", "pusher")  # fmt: skip


class Outbox:
    """The hook `insert_items` calls inside its transaction: an outbox row for each item
    whose agent does not live on this machine (`here`)."""

    def __init__(self, here: Iterable[str]) -> None:
        self.here = frozenset(here)

    def __call__(self, db: sqlite3.Connection, items: Sequence[Item]) -> None:
        rows = [
            (item.agent, item.key, encode(item), item.created_at)
            for item in items
            if item.agent not in self.here
        ]
        if rows:
            db.execute(TABLE)  # made on first use: a store without NATS never has it
            db.executemany(
                "INSERT INTO outbox(target, key, item, created_at) VALUES (?, ?, ?, ?)", rows
            )


def outbox_of(
    local: dict[str, str], spell: Callable[[str], Iterable[str]] | None = None
) -> Outbox | None:
    """The outbox hook of a store whose machine-local settings (its small git config, read
    without a parser: `beads.git.config.read_values`) are `local`, or None when this machine
    has no `delivery.nats.url`. `spell(agent)` gives every name a local agent goes by
    (`Delivery.spellings`), so an item for `gastown/mayor` stays here when `mayor` lives
    here."""
    if not local.get("delivery.nats.url"):
        return None
    here = [a.strip() for a in local.get("delivery.nats.agents", "").split(",") if a.strip()]
    return Outbox(n for a in here for n in (a, *(spell(a) if spell else ())))


def encode(item: Item) -> str:
    """An item as it travels: JSON of its fields (`TRAVELS`)."""
    return json.dumps({name: getattr(item, name) for name in TRAVELS}, ensure_ascii=False)


def waiting(db: sqlite3.Connection, limit: int) -> list[tuple[int, str, str, str]]:
    """The oldest `limit` rows: `(id, target, key, item JSON)`."""
    db.execute(TABLE)
    return db.execute(
        "SELECT id, target, key, item FROM outbox ORDER BY id LIMIT ?", (limit,)
    ).fetchall()


def remove(db: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Forget rows JetStream has acknowledged."""
    db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in ids])


def count(db: sqlite3.Connection) -> int:
    """How many items wait to be published."""
    db.execute(TABLE)
    return db.execute("SELECT count(*) FROM outbox").fetchone()[0]
