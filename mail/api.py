"""Mail policy over any provider: what `gc mail send` does, for a Python caller too.

`send` checks the names, expands `to_all` to every agent the provider knows but the sender,
refuses an unknown recipient when `mail.strict_recipients` is on (else warns, naming the
nearest known agents) and sends one message per recipient. Warnings come back as data
(`Sent.warnings`); the CLI prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from beads.errors import InvalidInput
from beads.record import check_agent
from mail.message import Message
from mail.provider import DIRECTORY, Provider


class Sent(NamedTuple):
    """What a send did: the recipients' copies (`suppressed` ones by dedup), and warnings."""

    messages: list[Message]
    warnings: list[str]


def send(
    provider: Provider,
    sender: str,
    to: Sequence[str],
    subject: str,
    body: str,
    *,
    cc: Sequence[str] = (),
    priority: int = 2,
    dedup: str | None = None,
    to_all: bool = False,
) -> Sent:
    """Send to each of `to` (or, with `to_all`, every known agent but the sender)."""
    check_agent(sender, what="sender")
    if to_all and to:
        raise InvalidInput("--all and --to cannot be combined")
    if not body and not subject:
        raise InvalidInput("nothing to send: give a body or a subject")
    if to_all and DIRECTORY not in provider.capabilities:
        raise InvalidInput(f"--all needs a provider that knows the agents, not {provider.name}")
    known = provider.known_agents()
    recipients = [a for a in known if a != sender] if to_all else list(to)
    if not recipients:
        raise InvalidInput("--all found no other known agent" if to_all else "no recipient")
    warnings = recipient_warnings(provider, [*recipients, *cc], known)
    sent = [
        provider.send(sender, name, subject, body, cc=cc, priority=priority, dedup=dedup)
        for name in recipients
    ]
    return Sent(sent, warnings)


def recipient_warnings(
    provider: Provider, names: Sequence[str], known: Sequence[str] | None = None
) -> list[str]:
    """A warning for each name the provider does not know; InvalidInput instead when its
    recipients are strict. Providers that know no agents (exec) accept every valid name."""
    for name in names:
        check_agent(name, what="recipient")
    if DIRECTORY not in provider.capabilities:
        return []  # an exec backend knows its own recipients
    known = provider.known_agents() if known is None else known
    strict = provider.strict_recipients()
    warnings = []
    for name in dict.fromkeys(names):
        if name in known:
            continue
        import difflib  # lazy: only an unknown name needs it

        near = difflib.get_close_matches(name, known, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        if strict:
            raise InvalidInput(f"unknown recipient {name!r}{hint}; mail.strict_recipients is on")
        warnings.append(f"unknown recipient {name!r}{hint}")
    return warnings
