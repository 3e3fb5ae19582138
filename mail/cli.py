"""`gc mail ...`: names, flags and output follow Gas City's `gc mail` where it has them."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import click

from beads.cli.common import (
    answer_no,
    emit,
    global_options,
    limit_option,
    open_store,
    read_text,
    settings,
    table,
)
from beads.errors import InvalidInput, NotFound
from beads.records.record import acting_agent
from mail import api
from mail.message import Message, MessageNotFound, ProviderError
from mail.provider import Provider

if TYPE_CHECKING:
    from inbox.delivery import Delivery


@click.group()
def mail() -> None:
    """Send and read mail between agents (provider: $GC_MAIL, config mail.provider, beadmail)."""


def provider() -> Provider:
    """The mail provider for this command, closed when it ends."""
    from mail.select import open_provider, read_config

    chosen = open_provider(open_store, config=lambda: read_config(settings().beads_dir))
    click.get_current_context().call_on_close(chosen.close)
    return chosen


def me() -> str:
    return acting_agent(settings().agent)


def notified(chosen: Provider, notify: bool) -> Delivery | None:
    """The delivery database `--notify` nudges through (None without it, or without a store:
    an exec provider may run without one, and then nobody can be nudged)."""
    if not notify:
        return None
    from beads.location import find_store
    from inbox.delivery import Delivery
    from mail.beadmail import BeadMail

    if isinstance(chosen, BeadMail):
        return chosen.delivery()
    try:
        delivery = Delivery(find_store(settings().beads_dir))
    except NotFound:
        click.echo(
            "gc: warning: --notify nudges no one, as there is no store to name nudge commands",
            err=True,
        )
        return None
    click.get_current_context().call_on_close(delivery.close)
    return delivery


def body_of(words: list[str], body_option: str | None, body_stdin: bool, limit: int) -> str:
    """The body: `-m`, `--stdin`, else the words joined; words left over beside -m or
    --stdin are refused, never dropped."""
    if words and (body_option is not None or body_stdin):
        given = "-m" if body_option is not None else "--stdin"
        raise InvalidInput(f"left-over arguments {' '.join(words)!r}: the body is given by {given}")
    source = body_option if not words else " ".join(words)
    return read_text(source, None, body_stdin, limit=limit) or ""


def warn(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"gc: warning: {warning}", err=True)


SEND_USAGE = "usage: gc mail send <to> <body>  OR  gc mail send <to> -s <subject> [-m <body>]"


@mail.command()
@click.argument("args", nargs=-1)
@click.option(
    "--to", "to_list", multiple=True, help="A recipient (repeatable); else the first ARG."
)
@click.option("-s", "--subject", default="", help="The subject.")
@click.option("-m", "--message", "body_option", help="The body; else the remaining ARGs.")
@click.option("--stdin", "body_stdin", is_flag=True, help="Read the body from stdin.")
@click.option("--cc", multiple=True, help="Also send a copy to this agent (repeatable).")
@click.option("--priority", type=click.IntRange(0, 4), default=2, show_default=True)
@click.option("--dedup", help="Skip the send while an unarchived message with this key waits.")
@click.option("--from", "sender", help="Send as this agent (relays, bridges).")
@click.option("--all", "to_all", is_flag=True, help="Send to every known agent but the sender.")
@click.option("--notify", is_flag=True, help="Nudge the recipients now.")
@global_options
def send(
    args: tuple[str, ...],
    to_list: tuple[str, ...],
    subject: str,
    body_option: str | None,
    body_stdin: bool,
    cc: tuple[str, ...],
    priority: int,
    dedup: str | None,
    sender: str | None,
    to_all: bool,
    notify: bool,
) -> None:
    """Send mail: gc mail send TO BODY...  or  gc mail send TO -s SUBJECT -m BODY."""
    words = list(args)
    if to_list or to_all:
        if len(words) > 1:  # `dog --to cat hello`: is dog a recipient or the body?
            raise InvalidInput(
                f"with --to or --all, give the body as one argument or with -m, not {words!r}"
            )
    elif words:
        to_list = (words.pop(0),)
    if not words and body_option is None and not body_stdin and not subject:
        raise InvalidInput(SEND_USAGE)  # gc's words
    chosen = provider()
    body = body_of(words, body_option, body_stdin, chosen.max_body)
    sent, warnings = api.send(chosen, sender or me(), to_list, subject, body, cc=cc,
                              priority=priority, dedup=dedup, to_all=to_all,
                              notify=notified(chosen, notify))  # fmt: skip
    warn(warnings)
    # One shape: every copy (cc and --all too) under "messages"; "message" is the first.
    payload: dict[str, Any] = {
        "suppressed": any(m.suppressed for m in sent),
        "message": sent[0].to_json(),
        "messages": [m.to_json() for m in sent],
    }
    lines = [
        f"Suppressed (dedup {dedup}): {m.id} is still in {m.to}'s mailbox"
        if m.suppressed
        else f"Sent message {m.id} to {m.to}"
        if m.mailbox in (None, m.to)
        else f"Sent copy {m.id} to {m.mailbox} (cc)"
        for m in sent
    ]
    emit(payload, "\n".join(lines))


@mail.command()
@click.argument("recipient", required=False)
@click.option("--all", "show_all", is_flag=True, help="Read messages too, not only unread.")
@click.option("--archived", is_flag=True, help="Archived and deleted messages (beadmail).")
@limit_option
@global_options
def inbox(recipient: str | None, show_all: bool, archived: bool, limit: int | None) -> None:
    """List unread mail (of RECIPIENT, default: you)."""
    if show_all and archived:
        raise InvalidInput("give --all or --archived, not both")
    chosen = provider()
    who = api.recipient(chosen, recipient or me())
    if archived:
        messages = chosen.archived(who)
    else:
        messages = api.in_order(chosen.all(who)) if show_all else api.inbox(chosen, who)
    messages = messages[:limit]
    origins = chosen.origins([m.id for m in messages])
    empty = f"No {'archived' if archived else 'unread' if not show_all else ''} messages for {who}"
    emit(
        {"recipient": who, "messages": chosen.listed(messages, origins)},
        lambda: (
            table(
                [
                    ("ID", "FROM", "SUBJECT", "BODY"),
                    *(_inbox_row(m, origins.get(m.id, "")) for m in messages),
                ]
            )  # fmt: skip
            if messages
            else " ".join(empty.split())
        ),
    )


VERBOSE = click.option("-v", "--verbose", is_flag=True, help="Also show cc, thread, reply-to.")


@mail.command()
@click.argument("message_id", required=False)
@VERBOSE
@global_options
def read(message_id: str | None, verbose: bool) -> None:
    """Show a message and mark it read (and the machine it came from, if not this one)."""
    chosen = provider()
    _show(chosen, chosen.read(given(message_id)), verbose)


@mail.command()
@click.argument("message_id", required=False)
@VERBOSE
@global_options
def peek(message_id: str | None, verbose: bool) -> None:
    """Show a message without marking it read."""
    chosen = provider()
    _show(chosen, chosen.get(given(message_id)), verbose)


def _show(chosen: Provider, message: Message, verbose: bool) -> None:
    """What read and peek print: the message, after where it was written when another
    machine (or plain git) wrote it, as its item in a hook says (`"origin"` in --json)."""
    from inbox.origin import above

    origin = chosen.origin(message.id)
    emit({"message": message.to_json(), "origin": origin.strip() or None},
         lambda: above(origin, _block(message, verbose)))  # fmt: skip


@mail.command()
@click.argument("message_id", required=False)
@click.argument("words", nargs=-1)
@click.option("-s", "--subject", default="", help="The subject (default: Re: the original's).")
@click.option("-m", "--message", "body_option", help="The body; else the remaining words.")
@click.option("--stdin", "body_stdin", is_flag=True, help="Read the body from stdin.")
@click.option("--notify", is_flag=True, help="Nudge the recipient now.")
@global_options
def reply(
    message_id: str | None,
    words: tuple[str, ...],
    subject: str,
    body_option: str | None,
    body_stdin: bool,
    notify: bool,
) -> None:
    """Answer a message's sender, in its thread."""
    message_id = given(message_id)
    chosen = provider()
    body = body_of(list(words), body_option, body_stdin, chosen.max_body)
    sent, warnings = api.reply(chosen, message_id, me(), subject, body,
                               notify=notified(chosen, notify))  # fmt: skip
    warn(warnings)
    answer = sent[0]
    original = answer.reply_to or message_id  # the whole id, not the prefix typed
    emit(
        {"message": answer.to_json()},
        f"Replied to {original} \u2014 sent message {answer.id} to {answer.to}",
    )


def given(message_id: str | None, what: str = "message") -> str:
    """The id argument, or gc's line for its absence (exit 30)."""
    if not message_id:
        raise InvalidInput(f"missing {what} ID")
    return message_id


def _for_each(op: str, done: str, already: str | None, ids: tuple[str, ...]) -> None:
    if not ids:
        given(None)
    result = api.change(provider(), op, ids)
    warn(result.get("warnings", []))
    lines = [done.format(id=i) for i in result["done"]]
    lines += [f"{already} {i}" for i in result["already"]]
    key = {"archive": "archived", "delete": "deleted"}.get(op, "marked")
    payload = {key: result["done"], "already": result["already"]}
    if result.get("warnings"):
        payload["warnings"] = result["warnings"]
    emit(payload, "\n".join(lines))


@mail.command()
@click.argument("ids", nargs=-1)
@global_options
def archive(ids: tuple[str, ...]) -> None:
    """Archive messages (they leave the mailbox and stay in the store and its history)."""
    _for_each("archive", "Archived message {id}", "Already archived", ids)


@mail.command()
@click.argument("ids", nargs=-1)
@global_options
def delete(ids: tuple[str, ...]) -> None:
    """Delete messages (an archive recorded as a deletion; history keeps them)."""
    _for_each("delete", "Deleted message {id}", "Already deleted", ids)


@mail.command("mark-read")
@click.argument("ids", nargs=-1)
@global_options
def mark_read(ids: tuple[str, ...]) -> None:
    """Mark messages read."""
    _for_each("mark_read", "Marked {id} as read", None, ids)


@mail.command("mark-unread")
@click.argument("ids", nargs=-1)
@global_options
def mark_unread(ids: tuple[str, ...]) -> None:
    """Mark messages unread."""
    _for_each("mark_unread", "Marked {id} as unread", None, ids)


@mail.command()
@click.argument("thread_or_message_id", required=False)
@global_options
def thread(thread_or_message_id: str | None) -> None:
    """Show a thread, by its id or the id of any message in it."""
    thread_or_message_id = given(thread_or_message_id, "thread")
    chosen = provider()
    messages = chosen.thread(thread_or_message_id)
    if not messages:  # a message id: show the thread it belongs to
        with contextlib.suppress(MessageNotFound, ProviderError):
            found = chosen.get(thread_or_message_id)
            messages = chosen.thread(found.thread_id or found.id)
    columns = ("ID", "FROM", "TO", "SUBJECT", "SENT", "READ")
    origins = chosen.origins([m.id for m in messages])
    emit(
        {"messages": chosen.listed(messages, origins)},
        lambda: (
            table([columns, *(_thread_row(m, origins.get(m.id, "")) for m in messages)])
            if messages
            else f"No messages in thread {thread_or_message_id}"
        ),
    )


@mail.command()
@click.argument("recipient", required=False)
@global_options
def count(recipient: str | None) -> None:
    """Count the mailbox: total and unread."""
    chosen = provider()
    who = api.recipient(chosen, recipient or me())
    counts = chosen.count(who)
    emit(
        {"recipient": who, "total": counts.total, "unread": counts.unread},
        f"{counts.total} total, {counts.unread} unread for {who}",
    )


@mail.command()
@click.argument("recipient", required=False)
@click.option("--inject", is_flag=True, help="Print a <system-reminder> block for hooks; exit 0.")
@global_options
def check(recipient: str | None, inject: bool) -> None:
    """Exit 0 when there is unread mail, 10 when there is none (never marks anything read)."""
    if inject:
        _inject(recipient)
        return
    chosen = provider()
    who = api.recipient(chosen, recipient or me())
    messages = api.check(chosen, who)
    payload = {
        "recipient": who,
        "found": bool(messages),
        "unread": len(messages),
        "messages": [m.to_json() for m in messages],
    }
    if not messages:
        answer_no(payload)  # silent, as gc's check is: the exit code is the answer
    emit(payload, f"{len(messages)} unread message(s) for {who}")


def _inject(recipient: str | None) -> None:
    # A hook must never break the agent: any failure prints nothing and exits 0.
    from mail.reminder import context_cap, inject

    try:
        chosen = provider()
        who = api.recipient(chosen, recipient or me())
        text = inject(api.check(chosen, who), context_cap(chosen.settings()))
    except Exception as exc:  # noqa: BLE001 - fail open, say why on stderr
        click.echo(f"gc: mail check --inject: {exc}", err=True)
        return
    emit({"recipient": who, "text": text}, text.rstrip("\n") or None)


@mail.command()
@click.argument("message_id", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@global_options
def log(message_id: str | None, limit: int) -> None:
    """The mail history from git (of one message with ID)."""
    store = open_store()
    from beads.cli.admin import show_log

    show_log(lambda: store.log(message_id, limit, grep=None if message_id else "mail "))


@mail.command()
@click.argument("program")
@click.option("--strict", is_flag=True, help="Also run the extra cases, beyond Gas City's.")
@global_options
def conformance(program: str, strict: bool) -> None:
    """Run the mail conformance suite against an exec PROGRAM (it sends real mail): Gas
    City's core cases, and with --strict the extras (read flags, `all`, multi-line bodies)."""
    from mail.conformance import run, unique_prefix
    from mail.execmail import ExecMail

    prefix = unique_prefix()
    if not settings().json:
        click.echo(
            f"Running the mail conformance suite against {program}. It sends, reads and "
            f"archives real messages for recipients named {prefix}-* on whatever "
            "backend the program talks to."
        )
    results = run(ExecMail(program, timeout=_exec_timeout()), prefix, strict=strict)
    tally = {o: sum(1 for r in results if r.outcome == o) for o in ("passed", "failed", "skipped")}
    lines = [
        f"{r.outcome.upper()[:4]} {r.name}"
        + (" (extra)" if r.extra else "")
        + (f": {r.detail}" if r.detail else "")
        for r in results
    ]
    lines.append(f"{tally['passed']} passed, {tally['failed']} failed, {tally['skipped']} skipped")
    payload = {"prefix": prefix, "conforms": not tally["failed"], **tally}
    payload["results"] = [vars(r) for r in results]
    if tally["failed"]:  # "does it conform?" answered no: exit 10, as every yes/no command
        answer_no(payload, "\n".join(lines))
    emit(payload, "\n".join(lines))


# -- helpers ---------------------------------------------------------------------------------


def _exec_timeout() -> float:
    """`mail.exec_timeout` of the store, when there is one (else the default)."""
    from mail.execmail import DEFAULT_TIMEOUT
    from mail.select import exec_timeout, read_config

    try:
        config = read_config(settings().beads_dir)
    except NotFound:
        return DEFAULT_TIMEOUT
    return exec_timeout((config.get("mail") or {}).get("exec_timeout"), DEFAULT_TIMEOUT)


def _block(message: Message, verbose: bool = False) -> str:
    """gc's header lines (a relayed message names its real sender in `From`); with
    `verbose`, also cc, thread and reply-to."""
    lines = [
        f"ID:       {message.id}",
        f"From:     {message.shown_sender()}",
        f"To:       {message.to}",
    ]
    if message.subject:
        lines.append(f"Subject:  {message.subject}")
    lines.append(f"Sent:     {_when(message.created_at, seconds=True)}")
    if verbose:
        lines += [f"Cc:       {', '.join(message.cc) or '-'}",
                  f"Thread:   {message.thread_id or message.id}",
                  f"Reply-To: {message.reply_to or '-'}"]  # fmt: skip
    if message.body:
        lines.append(f"Body:     {message.body}")
    return "\n".join(lines)


def _when(stamp: str, *, seconds: bool = False) -> str:
    return stamp[: 19 if seconds else 16].replace("T", " ")


def _inbox_row(m: Message, origin: str = "") -> tuple[str, ...]:
    """A row of `inbox`; `origin` (a note, or "") goes in front of the sender."""
    body = " ".join(m.body.split())
    return (m.id, origin + m.shown_sender(), m.subject,
            body if len(body) <= 60 else body[:57] + "...")  # fmt: skip


def _thread_row(m: Message, origin: str = "") -> tuple[str, ...]:
    """A row of `thread`; `origin` (a note, or "") goes in front of the sender."""
    return (
        m.id,
        origin + m.shown_sender(),
        m.to,
        m.subject,
        _when(m.created_at),
        "\u2713" if m.read else " ",
    )
