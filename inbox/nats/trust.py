"""What a relay does with what arrives: NATS carries notifications, never authority.

Anyone who can publish on the server can put any JSON on an agent's subject, so:

- An item of a producer's type (mail, decision, gate) is a hint: the relay brings the store
  up to date from its git remote (a `gc sync`), then delivers what the bead its key names
  makes, as derived here (inbox/rederive.py); what names no such bead is refused.
- Any other item is taken as a local push would take it (`inbox.items.push_items`): a
  producer's type is refused, and it cannot present itself as typed by a person here. The
  name `human` (the acting agent of a person at this machine's terminal, beads/records/record.py) is
  never taken from the wire: a relayed source that reads as `human` (`inbox.render.names_human`:
  spaces, case and invisible characters do not count) is shown as `human via NATS`, and such a
  relayed pusher is dropped.

A sender's relay syncs before it publishes a hint (inbox/nats/relay.py), so the bead is on
the remote when the hint arrives; a hint whose bead is not found yet is delivered again a few
times (`HINT_TRIES`) before it is refused.
"""

from __future__ import annotations

from pathlib import Path

from beads.errors import GcError
from inbox.items import PRODUCER_TYPES, Item

HUMAN = "human"
RELAYED_HUMAN = "human via NATS"
HINT_TRIES = 3  # deliveries of a hint whose bead is not found, before it is refused
HINT_RETRY = 1.0  # seconds before such a hint is delivered again


def is_hint(item: Item) -> bool:
    """True for an item of a producer's type: a request to derive it from its bead."""
    return item.type in PRODUCER_TYPES


def as_relayed(item: Item) -> Item:
    """A plain item under the local push's rule (see the module's docstring); InvalidInput
    when it holds a producer's dedup key (`decision:<id>`: it would stand in for the answer)."""
    from inbox.items import refuse_producer_type
    from inbox.render import names_human

    refuse_producer_type(item.type, item.key)

    if names_human(item.source):
        item.source = RELAYED_HUMAN
    if names_human(item.pusher):
        item.pusher = None
    return item


def sync_timeout(root: Path) -> float:
    """How long a relay waits for one sync: `sync.timeout` of this machine, else 30 s."""
    from beads.records.times import parse_duration
    from beads.sync.auto import read_local

    try:
        return max(1.0, parse_duration(read_local(root / ".git").get("sync.timeout", "30s")))
    except GcError:
        return 30.0


def pull(root: Path) -> str | None:
    """`gc sync` of the store at `root` when it has a remote (None when it has none, or the
    sync worked); what went wrong otherwise, in words. Runs in a worker thread."""
    from beads.sync.auto import has_remote

    if not has_remote(root / ".git"):
        return None
    from beads.store import Store
    from beads.sync.syncing import sync

    try:
        store = Store(root)
    except GcError as exc:
        return exc.message
    try:
        sync(store)
    except GcError as exc:
        return exc.message
    finally:
        store.close()
    return None
