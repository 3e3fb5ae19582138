"""Mail as text for an agent's context: one line per message, and `<system-reminder>` blocks.

The line (`mail.line.message_line`) is the content of a "you have mail" inbox item
(`mail.notify`), so the hooks, which cannot import `mail`, show exactly what it wrote;
`render` is the inbox's rendering of those items (`inbox.render`, with mail's own section,
`mail.section`:
at most 3 messages, 240-character previews, every field stripped of `<system-reminder>` tags).
`inject` is the block of `gc mail check --inject` in Gas City's layout (header, a blank line,
the messages, a blank line, the footer), with the same lines, as many as
`hooks.max_context_chars` holds, then one line saying how many more wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beads.errors import InvalidInput
from inbox.render import MAX_CONTEXT_CHARS, strip_tags
from mail.line import message_line
from mail.message import Message


def render(recipient: str, messages: Sequence[Message]) -> str:
    """The `<system-reminder>` block for `recipient`'s unread `messages` (most urgent first),
    as a hook would show them; "" if none."""
    from inbox.render import render as render_items
    from mail.notify import mail_item
    from mail.section import mail_section

    items = []
    for message in messages:
        try:
            items.append(mail_item(recipient, message, in_store=False))
        except InvalidInput:  # an id no item key can hold: a hook never shows it either
            continue
    return render_items(items, sections={"mail": mail_section}.get)


FOOTER = "Run 'gc mail read <id>' for full details, or 'gc mail inbox' to see all."


def inject(messages: Sequence[Message], cap: int = MAX_CONTEXT_CHARS) -> str:
    """`gc mail check --inject`'s block for unread `messages` (in the order given): gc's
    header, blank lines and footer, one `message_line` per message while the block stays
    within `cap` characters, then one line counting the rest; "" if none."""
    if not messages:
        return ""
    head = ["<system-reminder>", f"You have {len(messages)} unread message(s).", ""]
    tail = ["", FOOTER, "</system-reminder>"]
    lines: list[str] = []
    for n, message in enumerate(messages):
        line = strip_tags(f"- {message_line(message)}")
        rest = len(messages) - n - 1
        more = [_more(rest)] if rest else []
        if n and len("\n".join([*head, *lines, line, *more, *tail])) + 1 > cap:
            lines.append(_more(len(messages) - n))
            break
        lines.append(line)
    return "\n".join([*head, *lines, *tail]) + "\n"


def _more(count: int) -> str:
    return f"... and {count} more unread message(s): run 'gc mail inbox' to see all."


def context_cap(config: dict[str, Any]) -> int:
    """`hooks.max_context_chars` of `config` (checked as `gc config set` checks it)."""
    value = (config.get("hooks") or {}).get("max_context_chars", MAX_CONTEXT_CHARS)
    if type(value) is not int or not 1000 <= value <= 1_000_000:
        raise InvalidInput("hooks.max_context_chars must be an integer 1000..1000000")
    return value
