"""Mail as inbox items: "you have mail" notifications for each recipient.

The rule (`derive`): a message bead new in a commit, open, unread and addressed to an agent
makes the item `mail:<id>` for that agent, moot once the message is read or archived (checked
through the bead at drain time). beadmail applies it to its own commit as it sends; a drain
applies it to the commits it finds past its watermark (`inbox.follow`), so a send killed before
its items were written, or mail that arrived by a push or a sync, is announced all the same.
For an exec provider the hook calls `reconcile`, which asks the provider's `check` and records
the same items; dedup keeps both idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from beads.errors import InvalidInput
from inbox.follow import Change, reconciled
from inbox.items import Item
from mail.unread import MESSAGE, SETTLED_WHEN, is_unread

if TYPE_CHECKING:
    from beads.records.record import Bead
    from inbox.delivery import Delivery
    from inbox.producers import ProducerSet
    from mail.message import Message


def mail_item(recipient: str, message: Message, *, in_store: bool) -> Item:
    """The item `mail:<id>` for `recipient`; `in_store` when the message is a bead."""
    from mail.line import message_line  # only once there is an item to make

    return Item.new(
        recipient,
        message_line(message),
        key=f"mail:{message.id}",
        type="mail",
        source=message.shown_sender(),
        priority=message.priority,
        ref_bead=message.id if in_store else None,
        moot_when=SETTLED_WHEN if in_store else None,
    )


def derive(changes: Sequence[Change]) -> list[Item]:
    """The mail items of a commit range: one per new, open, unread, addressed message."""
    items = []
    for change in changes:
        bead: Bead | None = change.new
        if (
            change.created
            and bead is not None
            and bead.type == MESSAGE
            and is_unread(bead)
            and bead.assignee
        ):
            from mail.beadmail import bead_message  # only for an item to make: a claim makes none

            items.append(mail_item(bead.assignee, bead_message(bead), in_store=True))
    return items


def reconcile(delivery: Delivery, agent: str) -> int:
    """Record an item for every unread message of `agent` (idempotent); returns how many."""
    from beads.records.ids import bead_path
    from beads.settings.config import mail_provider_spec
    from beads.settings.trust import provider_waits
    from beads.store import Store
    from mail.select import open_provider

    config = delivery.store_config()
    waits = provider_waits(config)
    if waits:
        raise InvalidInput(waits)
    settings = config.get("mail") or {}
    opened: list[Store] = []

    def open_store() -> Store:
        opened.append(Store(delivery.root))
        return opened[-1]

    chosen = open_provider(
        open_store,
        spec=mail_provider_spec(lambda: settings),
        timeout=settings.get("exec_timeout"),
    )
    try:
        messages = chosen.check(agent)
    finally:  # a hook runs this: leave no database open behind it (an in-process caller too)
        chosen.close()
        for store in opened:
            store.close()
    in_store = chosen.name == "beadmail"
    items = []
    for message in messages:
        try:
            items.append(mail_item(agent, message, in_store=in_store))
        except InvalidInput as exc:  # one odd message (an id too long for a key) spoils no other
            delivery.note_fault(f"no mail item for {message.id[:80]!r}: {exc}")
    # A message that came from another machine says so, as its item from a follow does.
    paths = {m.id: bead_path(MESSAGE, m.id) for m in messages} if in_store else {}
    made = reconciled(delivery, items, paths)
    if not in_store:
        # No bead to check at drain time: an item whose message is no longer unread (read or
        # archived through the script since) is moot now, or it would announce read mail.
        unread = {item.key for item, _ in made}
        stale = [
            item.key
            for item in delivery.items(agent, ("pending", "delivering"))
            if item.type == "mail" and item.ref_bead is None and item.key not in unread
        ]
        delivery.settle(agent, stale)
    return len(messages)


def add_to(producers: ProducerSet) -> None:
    """Add mail's deriver (bead type `message`) and reconciler to `producers`."""
    producers.add_deriver(MESSAGE, derive)
    producers.add_reconciler(reconcile)
