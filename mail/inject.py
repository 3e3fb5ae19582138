"""Mail as text injected into an agent's context (`gc mail check --inject`, hooks).

At most 3 messages, previews of at most 240 characters, and every field stripped of
`<system-reminder>` tags until none remain (`inbox.render` does both, for hooks too), so a
message cannot close the block it sits in and speak as the system.
"""

from __future__ import annotations

from inbox.render import MAX_MAIL, PREVIEW_CHARS, preview
from mail.message import Message


def render(messages: list[Message]) -> str:
    """The `<system-reminder>` block for unread `messages` (most urgent first); "" if none."""
    if not messages:
        return ""
    shown = messages[:MAX_MAIL]
    lines = ["<system-reminder>", f"You have {len(messages)} unread message(s)."]
    if len(messages) > len(shown):
        first = f"Showing the first {len(shown)} message(s) here;"
        lines.append(f"{first} run 'gc mail inbox' for the full list.")
    lines.append("")
    for message in shown:
        sender = preview(message.shown_sender(), 128, "...")
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
