"""Mail as text injected into an agent's context (`gc mail check --inject`, hooks).

At most 3 messages, previews of at most 240 characters, and every field stripped of
`<system-reminder>` tags until none remain, so a message cannot close the block it sits in
and speak as the system.
"""

from __future__ import annotations

import re

from mail.message import Message

MAX_MESSAGES = 3
PREVIEW_CHARS = 240
_TAG = re.compile(r"</?system-reminder>", re.IGNORECASE)
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")


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


def render(messages: list[Message]) -> str:
    """The `<system-reminder>` block for unread `messages` (most urgent first); "" if none."""
    if not messages:
        return ""
    shown = messages[:MAX_MESSAGES]
    lines = ["<system-reminder>", f"You have {len(messages)} unread message(s)."]
    if len(messages) > len(shown):
        first = f"Showing the first {len(shown)} message(s) here;"
        lines.append(f"{first} run 'gc mail inbox' for the full list.")
    lines.append("")
    for message in shown:
        sender = preview(message.sender, 64, "...")
        subject = preview(message.subject, PREVIEW_CHARS, "... [subject truncated]")
        body = preview(message.body) or subject
        label = f" [{subject}]" if subject and subject != body else ""
        lines.append(f"- {message.id} from {sender}{label}: {body}")
    lines += [
        "",
        "Run 'gc mail read <id>' for full details, or 'gc mail inbox' to see all.",
        "</system-reminder>",
    ]
    return "\n".join(lines)
