"""Items of a producer's type that arrive by any channel but the producer's own (a NATS
message, a line of a session's queue file) are requests, never items: each names a bead by
its dedup key (`mail:<id>`, `decision:<id>`, `gate:<id>[:...]`), and what is delivered is
what that bead's producer derives from the bead as this store holds it. The request's own
content, source and priority are ignored; a request that names no bead, or a bead its
producer makes no such item of (for that agent, with that key), is refused.

One function (`rederive`) does this for every channel, so the rule cannot differ between
them. It never fetches: a caller that can (the relay, inbox/nats/relay.py) brings the store
up to date from its remote first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from beads.errors import InvalidInput
from beads.records.ids import bead_path, check_id
from inbox.producers import Change

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from beads.index.reader import IndexReader
    from inbox.items import Item
    from inbox.producers import ProducerSet


class Refused:
    """A request that derived nothing: who it was for, its key, and why."""

    __slots__ = ("agent", "key", "why")

    def __init__(self, agent: str, key: str, why: str) -> None:
        self.agent, self.key, self.why = agent, key, why

    def __str__(self) -> str:
        return f"{self.key} for {self.agent}: {self.why}"


def named_bead(key: str) -> str:
    """The bead id a producer item's dedup key names (its second `:` part); InvalidInput
    when it names none."""
    parts = key.split(":")
    if len(parts) < 2:
        raise InvalidInput(f"the key {key[:80]!r} names no bead")
    return check_id(parts[1], what="bead id in the key")


def rederive(
    wanted: Sequence[tuple[str, str]],
    *,
    root: Path,
    reader: Callable[[], IndexReader],
    producers: Callable[[], ProducerSet | None],
    agent_of: Callable[[str], str],
    log: Callable[[str], None],
) -> tuple[list[Item], list[Refused]]:
    """For each `(agent, key)` asked for: the item the named bead's producer makes of the bead
    now (marked with its origin when the bead's last change was made on another machine,
    inbox/origin.py), or why none (see the module's docstring).

    `root`: the store's `.beads/`; `reader()`: its index, caught up; `producers()`: who
    derives (None: nobody, every request is refused); `agent_of(name)`: an agent's full
    name; `log`: where a fault reading an origin goes."""
    refused: list[Refused] = []
    if not wanted:
        return [], refused
    index = reader()
    known = producers()
    found: list[tuple[Item, str]] = []
    for agent, key in wanted:
        try:
            bead_id = named_bead(key)
        except InvalidInput as exc:
            refused.append(Refused(agent, key, exc.message))
            continue
        bead = index.get(bead_id)
        if bead is None:
            refused.append(Refused(agent, key, f"no bead {bead_id} in this store"))
            continue
        deriver = known.deriver(bead.type) if known is not None else None
        made: list[Item] = []
        if deriver is not None:
            try:
                made = deriver([Change(bead)])
            except InvalidInput as exc:
                refused.append(Refused(agent, key, f"{bead_id} makes no item: {exc.message}"))
                continue
        full = agent_of(agent)
        match = next((i for i in made if agent_of(i.agent) == full and i.key == key),
                     None)  # fmt: skip
        if match is None:
            why = f"{bead_id} (a {bead.type}) makes no item {key} for {agent} now"
            refused.append(Refused(agent, key, why))
            continue
        found.append((match, bead_path(bead.type, bead.id)))
    from inbox.origin import mark_items

    items = [item for item, _ in found]
    mark_items(root, items, {named_bead(item.key): path for item, path in found}, log)
    return items, refused
