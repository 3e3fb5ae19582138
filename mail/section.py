"""How a drain shows mail items: the count, at most 3 messages, and what to run next.

Added to a `ProducerSet` (`add_to`, as the program's producer set declares it), so the inbox
layer names no mail wording; imported by a hook only when it shows mail. Each item's line was
written by the mail producer (`mail.reminder.message_line`); it is previewed again here, capped.
"""

from __future__ import annotations

from collections.abc import Sequence

from inbox.items import Item
from inbox.producers import ProducerSet
from inbox.render import preview

MAX_MAIL = 3


def mail_section(items: Sequence[Item]) -> list[str]:
    """The lines for mail `items` (most urgent first) in a drained block."""
    shown = items[:MAX_MAIL]
    lines = [f"You have {len(items)} unread message(s)."]
    if len(items) > len(shown):
        lines.append(f"Showing the first {len(shown)}; run 'gc mail inbox' for the full list.")
    lines += [f"- {preview(item.content)}" for item in shown]
    lines.append("Run 'gc mail read <id>' for full details, or 'gc mail inbox' to see all.")
    return lines


def add_to(producers: ProducerSet) -> None:
    """Add how a drain shows mail (item type `mail`) to `producers`."""
    producers.add_section("mail", mail_section)
