"""Inbox items as text for an agent's context: `<system-reminder>` blocks.

Every field is stripped of `<system-reminder>` tags until none remain, so an item cannot close
the block it sits in and speak as the system. Mail items follow the mail caps: at most 3
shown, previews of at most 240 characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from inbox.items import Item

MAX_MAIL = 3
PREVIEW_CHARS = 240
MAX_ITEM_CHARS = 2000
_TAG = re.compile(r"</?system-reminder>", re.IGNORECASE)
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")
PRIORITY_NAMES = ("P0 critical", "P1 high", "P2", "P3 low", "P4 lowest")


def strip_tags(text: str) -> str:
    """Remove `<system-reminder>` and `</system-reminder>` until none remain (nested tricks too)."""
    while True:
        stripped = _TAG.sub("", text)
        if stripped == text:
            return text
        text = stripped


def preview(text: str, limit: int = PREVIEW_CHARS, marker: str = " ... [preview truncated]") -> str:
    """One line: tags stripped, whitespace and control characters collapsed, at most `limit`."""
    line = _SPACE.sub(" ", strip_tags(text[: limit * 16])).strip()
    line = strip_tags(line)
    return line if len(line) <= limit else line[:limit].rstrip() + marker


def shown_source(item: Item) -> str:
    """Who an item is from, as shown: `mayor (pushed by eve)` when the pusher is not the
    source it claims (anyone may name a source; the pusher is recorded by the push)."""
    source = preview(item.source, 160, "...")
    if item.pusher and item.pusher != item.source:
        return f"{source} (pushed by {item.pusher})"
    return source


def render(items: Sequence[Item]) -> str:
    """The `<system-reminder>` block for delivered `items` (most urgent first); "" if none."""
    if not items:
        return ""
    mail = [item for item in items if item.type == "mail"]
    other = [item for item in items if item.type != "mail"]
    lines = ["<system-reminder>"]
    if other:
        lines.append(f"gc inbox: {len(other)} new item(s).")
        for item in other:
            label = f"[{PRIORITY_NAMES[item.priority]} {item.type} from {shown_source(item)}]"
            lines.append(f"- {label} {preview(item.content, MAX_ITEM_CHARS)}")
    if mail:
        if other:
            lines.append("")
        # The mail producer wrote each item's line (`mail.render.message_line`).
        lines.append(f"You have {len(mail)} unread message(s).")
        shown = mail[:MAX_MAIL]
        if len(mail) > len(shown):
            lines.append(f"Showing the first {len(shown)}; run 'gc mail inbox' for the full list.")
        lines += [f"- {preview(item.content)}" for item in shown]
        lines.append("Run 'gc mail read <id>' for full details, or 'gc mail inbox' to see all.")
    lines.append("</system-reminder>")
    return "\n".join(lines)
