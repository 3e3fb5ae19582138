"""One message as one line: the content of a "you have mail" inbox item (`mail.notify`) and
of each entry of `gc mail check --inject` (`mail.reminder`)."""

from __future__ import annotations

from inbox.render import PREVIEW_CHARS, preview
from mail.message import Message


def message_line(message: Message) -> str:
    """One line: id, sender, subject and a body preview (the block caps it again)."""
    sender = preview(message.shown_sender(), 128, "...")
    subject = preview(message.subject, PREVIEW_CHARS, "... [subject truncated]")
    label = f" [{subject}]" if subject else ""
    return f"{message.id} from {sender}{label}: {preview(message.body) or '(empty)'}"
