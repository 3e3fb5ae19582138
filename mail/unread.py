"""THE rule "unread" of beadmail's message beads, in a module of its own: the producer of
"you have mail" items (`mail.notify`) applies it to every commit a process follows, a claim's
too, and needs neither the provider (`mail.beadmail`) nor its messages to do so.

A message bead is unread in its recipient's mailbox while each field of UNREAD holds its first
value; the second settles it (read, or archived). inbox, check, count, the hook's "you have
mail" items (moot once settled) and their derivation all read it from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inbox.items import is_moot

if TYPE_CHECKING:
    from beads.records.record import Bead

MESSAGE = "message"  # the bead type of a beadmail message

UNREAD = {"status": ("open", "closed"), "meta.read": (False, True)}
SETTLED_WHEN = [{field: settled} for field, (_unread, settled) in UNREAD.items()]


def unread_filters(recipient: str) -> dict[str, Any]:
    """Query filters for unread mail of `recipient` (the UNREAD rule)."""
    filters: dict[str, Any] = {"type": MESSAGE, "assignee": recipient, "meta": {}}
    for field, (unread, _settled) in UNREAD.items():
        if field.startswith("meta."):
            filters["meta"][field[len("meta.") :]] = unread
        else:
            filters[field] = unread
    return filters


def is_unread(bead: Bead) -> bool:
    """True when the message bead is unread (the UNREAD rule)."""
    return is_moot(bead.to_dict(), [{field: unread for field, (unread, _) in UNREAD.items()}])


def mailbox_filters(recipient: str) -> dict[str, Any]:
    """Messages in `recipient`'s mailbox, read or not (everything not archived)."""
    return {"type": MESSAGE, "assignee": recipient, "status": "open"}
