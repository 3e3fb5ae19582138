"""Mail policy over any provider: what `gc mail` does, for a Python caller too.

`send` checks the names, expands `to_all` to every agent the provider knows but the sender,
sends one copy per recipient (a name given twice, or as `to` and `cc`, gets one), refuses an
unknown recipient when `mail.strict_recipients` is on (else warns, naming the nearest known
agents; inside a Gas City city, or under any provider with the setting, refuses it), and with
`notify` nudges each recipient now. `reply` refuses an empty reply, as
`send` does. `inbox` and `check` list in Gas City's order (oldest first, then id). `change`
archives, deletes or marks several messages all or nothing. Warnings come back as data
(`Sent.warnings`); the CLI prints them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from beads.errors import InvalidInput
from beads.records.record import check_agent, check_text
from mail.message import Message
from mail.provider import DIRECTORY, Provider

if TYPE_CHECKING:
    from inbox.delivery import Delivery


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
    notify: Delivery | None = None,
) -> Sent:
    """Send to each of `to` (or, with `to_all`, every known agent but the sender); with
    `notify`, nudge each recipient now through that delivery database."""
    started = time.time()
    check_agent(sender, what="sender")
    if to_all and to:
        raise InvalidInput("--all and --to cannot be combined")
    _check_content(subject, body)
    if to_all and DIRECTORY not in provider.capabilities:
        raise InvalidInput(f"--all needs a provider that knows the agents, not {provider.name}")
    known = provider.known_agents()
    recipients = [a for a in known if a != sender] if to_all else list(dict.fromkeys(to))
    if not recipients:
        raise InvalidInput("--all found no other known agent" if to_all else "no recipient")
    copies = [c for c in dict.fromkeys(cc) if c not in recipients]  # one copy each
    warnings = recipient_warnings(provider, [*recipients, *copies], known)
    # The cc copies go with the first recipient's message (one commit with beadmail).
    sent = [
        provider.send(
            sender, name, subject, body, cc=copies if n == 0 else (), priority=priority, dedup=dedup
        )  # fmt: skip
        for n, name in enumerate(recipients)
    ]
    if notify is not None:
        warnings += nudge(notify, [*recipients, *copies], f"[gc] new mail from {sender}", started)
    return Sent([copy for message in sent for copy in (message, *message.copies)], warnings)


def reply(
    provider: Provider,
    message_id: str,
    sender: str,
    subject: str,
    body: str,
    *,
    notify: Delivery | None = None,
) -> Sent:
    """Answer a message's sender in its thread (the subject defaults to "Re: <original>")."""
    started = time.time()
    check_agent(sender, what="sender")
    _check_content(subject, body)
    answer = provider.reply(message_id, sender, subject, body)
    warnings = []
    if notify is not None:
        warnings = nudge(notify, [answer.to], f"[gc] new mail from {sender}", started)
    return Sent([answer], warnings)


def _check_content(subject: str, body: str) -> None:
    # Each named here: a provider's own check (beadmail's title) may name another field.
    check_text("subject", subject)
    check_text("body", body)
    if not body and not subject:
        raise InvalidInput("nothing to send: give a body or a subject")


def nudge(delivery: Delivery, names: Sequence[str], text: str, since: float) -> list[str]:
    """Nudge each of `names` now (`--notify`), unless a nudge already went out since `since`
    (the send's own items nudge idle recipients); a warning for each that could not be."""
    warnings = []
    for name in dict.fromkeys(names):
        if name == "human":
            continue  # as gc: a person is not nudged
        problem = delivery.nudger().nudge_now(name, text, since)
        if problem:
            warnings.append(f"{name} was not nudged: {problem}")
    return warnings


def recipient(provider: Provider, name: str, *, what: str = "recipient") -> str:
    """`name` if the provider can address it: an agent name (or `rig/name`) for a provider
    that knows the agents, any non-empty text for one that does not (exec: the program
    decides), else InvalidInput."""
    if DIRECTORY in provider.capabilities:
        return check_agent(name, what=what)
    check_text(what, name)
    if not name.strip():
        raise InvalidInput(f"the {what} is empty")
    return name


def recipient_warnings(
    provider: Provider, names: Sequence[str], known: Sequence[str] | None = None
) -> list[str]:
    """A warning for each name nobody knows; InvalidInput instead inside a Gas City city
    (`beads.city`: known are its `city.toml` agents and named sessions, config.yaml's agents
    and `human`, whatever the provider, as gc refuses) or when `mail.strict_recipients` is on.
    `rig/name` is known when config.yaml's `rigs` lists `name` in `rig`. Outside a city, an
    exec provider's recipients are the program's to judge unless the setting is on."""
    from beads.city import current_city

    for name in names:
        recipient(provider, name)
    city = current_city()
    strict = provider.strict_recipients()
    if city is not None:
        known = sorted(city.known() | {*provider.configured_agents()})
        why = f"not an agent or named session of the city {city.name} nor in config.yaml"
    elif DIRECTORY in provider.capabilities:
        known = provider.known_agents() if known is None else known
        why = "mail.strict_recipients is on"
    elif strict:
        known = [*provider.configured_agents(), "human"]
        why = "mail.strict_recipients is on"
    else:
        return []  # an exec backend knows its own recipients
    rigs = provider.rigs()
    warnings = []
    for name in dict.fromkeys(names):
        rig, _, member = name.rpartition("/")
        if name in known or member in rigs.get(rig, ()):
            continue
        import difflib  # lazy: only an unknown name needs it

        near = difflib.get_close_matches(name, known, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        if strict or city is not None:
            raise InvalidInput(f"unknown recipient {json.dumps(name)}{hint}: {why}")
        warnings.append(f"unknown recipient {json.dumps(name)}{hint}")
    return warnings


def inbox(provider: Provider, recipient: str) -> list[Message]:
    """Unread mail of `recipient` in Gas City's order: oldest first, then by id."""
    return in_order(provider.inbox(recipient))


def check(provider: Provider, recipient: str) -> list[Message]:
    """Like `inbox`, and guaranteed never to change anything (`check`, `check --inject`)."""
    return in_order(provider.check(recipient))


def in_order(messages: Sequence[Message]) -> list[Message]:
    """`messages` by `created_at`, then id (a time that does not parse sorts first)."""

    def key(message: Message) -> tuple[float, str]:
        try:
            when = datetime.fromisoformat(message.created_at).timestamp()
        except ValueError:
            when = float("-inf")
        return when, message.id

    return sorted(messages, key=key)


# `change`'s operations: the provider method, and whether "already archived" is an answer.
CHANGES = {"archive": True, "delete": True, "mark_read": False, "mark_unread": False}


def change(provider: Provider, op: str, ids: Sequence[str]) -> dict[str, list[str]]:
    """Archive, delete, mark_read or mark_unread each of `ids`, all or nothing: every id is
    resolved before anything changes (an unknown one changes nothing). Returns
    `{"done": [...], "already": [...]}` (full ids; `already`: archived before, for archive
    and delete). With beadmail it is one commit; see `Provider.change` for the others."""
    if op not in CHANGES:
        raise InvalidInput(f"unknown mail change {op!r}")
    if not ids:
        raise InvalidInput("give at least one message id")
    return provider.change(op, list(dict.fromkeys(ids)))
