"""Mail as text for an agent's context: one line per message, and the `<system-reminder>`
block of `gc mail check --inject`.

The line (`message_line`) is the content of a "you have mail" inbox item (`mail.notify`), so
the hooks, which cannot import `mail`, show exactly what this module wrote; the block is the
inbox's rendering of those items (`inbox.render`, with mail's own section, `mail.section`:
at most 3 messages, 240-character previews, every field stripped of `<system-reminder>` tags),
so `check --inject` and a hook say the same thing in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

from beads.errors import InvalidInput
from inbox.render import PREVIEW_CHARS, preview
from mail.message import Message


def message_line(message: Message) -> str:
    """One line: id, sender, subject and a body preview (the block caps it again)."""
    sender = preview(message.shown_sender(), 128, "...")
    subject = preview(message.subject, PREVIEW_CHARS, "... [subject truncated]")
    label = f" [{subject}]" if subject else ""
    return f"{message.id} from {sender}{label}: {preview(message.body) or '(empty)'}"


def render(recipient: str, messages: Sequence[Message]) -> str:
    """The `<system-reminder>` block for `recipient`'s unread `messages` (most urgent first),
    as a hook would show them; "" if none."""
    from inbox.render import render as render_items
    from mail.notify import mail_item
    from mail.section import mail_section  # noqa: F401 - registers the section, if not yet

    items = []
    for message in messages:
        try:
            items.append(mail_item(recipient, message, in_store=False))
        except InvalidInput:  # an id no item key can hold: a hook never shows it either
            continue
    return render_items(items)
