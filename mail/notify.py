"""Mail as inbox items: "you have mail" notifications pushed to each recipient.

beadmail pushes one item per recipient as it sends (key `mail:<id>`, moot once the message is
read or archived, checked through the bead at drain time). For an exec provider the hook calls
`reconcile`, which asks the provider's `check` and pushes the same items; dedup keeps that
idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from beads.errors import InvalidInput
from inbox.delivery import Delivery
from inbox.render import preview
from mail.message import Message

# The message bead is settled once archived (closed) or read: its notification is then moot.
MOOT_WHEN = [{"status": "closed"}, {"meta.read": True}]
log = logging.getLogger("gc.mail")


def item_text(message: Message) -> str:
    """One line: id, sender, subject and a body preview (the render caps it again)."""
    subject = f" [{preview(message.subject, 120, '...')}]" if message.subject else ""
    return f"{message.id} from {message.sender}{subject}: {preview(message.body) or '(empty)'}"


def notify(
    delivery: Delivery, deliveries: Sequence[tuple[str, Message]], *, in_store: bool
) -> None:
    """Push a mail item for each `(recipient, message)`; `in_store` when the message is a bead.

    A message that cannot be an item (an exec script's empty sender, an id too long for a
    key) is skipped with a warning: it never stops the notification of the others."""
    for recipient, message in deliveries:
        try:
            delivery.push(
                [recipient],
                item_text(message),
                key=f"mail:{message.id}",
                type="mail",
                source=message.sender,
                priority=message.priority,
                ref_bead=message.id if in_store else None,
                moot_when=MOOT_WHEN if in_store else None,
            )
        except InvalidInput as exc:
            log.warning("gc: warning: no notification for message %s: %s", message.id, exc)


def notify_safely(
    open_delivery: Callable[[], Delivery], deliveries: Sequence[tuple[str, Message]]
) -> None:
    """Notify after a committed send; a delivery fault is logged, never undoes the send."""
    try:
        notify(open_delivery(), deliveries, in_store=True)
    except Exception as exc:  # the message is committed; `drain --reconcile` can redo this
        log.warning("mail notification failed: %s", exc)


def reconcile(delivery: Delivery, agent: str) -> int:
    """Push an item for every unread message of `agent` (idempotent); returns how many."""
    from beads.store import Store
    from mail.select import open_provider, provider_spec

    settings = delivery.store_config().get("mail") or {}
    chosen = open_provider(
        lambda: Store(delivery.root),
        spec=provider_spec(settings.get("provider")),
        timeout=settings.get("exec_timeout"),
    )
    messages = chosen.check(agent)
    notify(delivery, [(agent, m) for m in messages], in_store=chosen.name == "beadmail")
    return len(messages)
