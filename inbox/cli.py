"""`gc inbox` (push, list, drain, wait) and `gc session list`: thin over `inbox.Delivery`."""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

import click

from beads.cli.common import (
    answer_no,
    emit,
    global_options,
    hidden_alias,
    limit_option,
    settings,
    stamped,
    table,
)
from beads.errors import InvalidInput
from beads.faults import fault
from beads.records.agents import acting_rig
from beads.records.record import acting_agent
from beads.records.times import parse_duration
from inbox.database import DatabaseReplaced
from inbox.delivery import Delivery, Session
from inbox.items import TYPES, Item
from inbox.render import preview, shown_source


def open_delivery() -> Delivery:
    """The delivery database of this command's store, closed when the command ends."""
    delivery = Delivery.open(settings().beads_dir)
    click.get_current_context().call_on_close(delivery.close)
    return delivery


def me() -> str:
    return acting_agent(settings().agent)


def chosen_session(session: str | None) -> str:
    """The session a command acts on: `--session`, else `$GC_SESSION_ID` (as Claude Code's
    hooks and Gas City set it), checked; every command taking `--session` uses it."""
    import os

    from inbox.queue import check_session

    chosen = session or os.environ.get("GC_SESSION_ID")
    if not chosen:
        raise InvalidInput("give --session S (or set $GC_SESSION_ID)")
    return check_session(chosen)


def item_json(item: Item) -> dict[str, Any]:
    """An item as JSON replies show it (times as RFC 3339)."""
    return stamped(item.to_json(), "created_at", "expires_at", "settled_at")


@click.group()
def inbox() -> None:
    """Delivery items: push, list, drain into a session, wait."""


@inbox.command()
@click.argument("text")
@click.option(
    "--to",
    "to",
    help="An agent (rig/name for another rig's), or 'all' (default: every agent of your rig).",
)
@click.option("--rig", help="Every agent of this rig (config.yaml rigs), later ones too.")
@click.option("--type", "type_", type=click.Choice(TYPES), default="event", show_default=True)
@click.option("--priority", type=click.IntRange(0, 4), default=2, show_default=True)
@click.option(
    "--ttl", help="Drop the item if undelivered after this long (e.g. 10m; a broadcast: 24h)."
)
@click.option(
    "--dedup", "dedup", help="One item per key per agent: retry with the same key (default: new)."
)
@hidden_alias("--dedup-key", "dedup")
@click.option("--source", help="Who or what the item is from (default: you).")
@click.option("--session", "session", help="Append to this session's queue instead.")
@global_options
def push(
    text: str,
    to: str | None,
    rig: str | None,
    type_: str,
    priority: int,
    ttl: str | None,
    dedup: str | None,
    source: str | None,
    session: str | None,
) -> None:
    """Push TEXT to an agent, a rig or all (or onto one session's queue); with no target, to
    every agent of the current rig ($GC_RIG, else yours)."""
    if rig is not None and to is not None:
        raise InvalidInput(
            f"choose one target: --to {rig}/{to} for agent {to} of rig {rig}, "
            f"or --rig {rig} for every agent of the rig"
        )
    if session is not None and (to is not None or rig is not None):
        raise InvalidInput("give one of --to, --rig and --session")
    delivery = open_delivery()
    source = source or me()
    seconds = parse_duration(ttl) if ttl else None
    if session is not None:
        key = dedup or f"cli:{uuid.uuid4().hex}"
        item = delivery.enqueue(session, text, key=key, type=type_, source=source,
                                priority=priority, ttl=seconds, pusher=me())  # fmt: skip
        emit({"items": [item_json(item)]}, f"Queued item for session {session}")
        return
    if to is None and rig is None:  # seed 001: the default scope is the current rig
        rig = acting_rig(me(), delivery.store_config())
        if rig is None:
            raise InvalidInput(
                "no rig to push to: give --to AGENT (or --to all), --rig RIG, or set $GC_RIG"
            )
    key = dedup or default_key(type_, source, to, rig)
    fields = {"key": key, "type": type_, "source": source, "priority": priority,
              "ttl": seconds, "pusher": me()}  # fmt: skip
    if to == "all" or rig is not None:  # also stands for the group's agents that start later
        results = delivery.broadcast(text, to=to, rig=rig, **fields)
    else:
        results = delivery.push(delivery.recipients(to), text, **fields)
    emit(
        {"items": [dict(item_json(item), created=created) for item, created in results]},
        "\n".join(
            [
                f"{'Pushed' if created else 'Already pending (dedup)'} item {item.id} to "
                f"{item.agent}"
                for item, created in results
            ]
            + (
                ["Standing for the group's agents that start later, until it expires"]
                if to == "all" or rig is not None
                else []
            )  # fmt: skip
        ),
    )


def default_key(type_: str, source: str, to: str | None, rig: str | None) -> str:
    """A push's dedup key when none is given, as seed 001 names them: `broadcast:{id}`,
    `rig:{rig}:{source}:{ms}`, `alert:{source}:{ms}`, else `cli:{id}`. Each push makes a new
    one (a retry of the same push is a second item): `--dedup KEY` makes a retry a no-op."""
    ms = int(time.time() * 1000)
    short = source[:100]  # a key holds at most 200 characters
    if to == "all":
        return f"broadcast:{uuid.uuid4().hex}"
    if rig is not None:
        return f"rig:{rig}:{short}:{ms}"
    if type_ == "alert":
        return f"alert:{short}:{ms}"
    return f"cli:{uuid.uuid4().hex}"


@inbox.command("list")
@click.option("--all", "show_all", is_flag=True, help="Every state, not only pending.")
@click.option("--delivered", is_flag=True, help="Delivered items only.")
@limit_option
@global_options
def list_items(show_all: bool, delivered: bool, limit: int | None) -> None:
    """List undelivered items (of --agent, default: you)."""
    if show_all and delivered:
        raise InvalidInput("give --all or --delivered, not both")
    # Items claimed by a drain whose output is not known to be out are still undelivered.
    states = ("pending", "delivering", "delivered", "expired", "moot") if show_all else (
        ("delivered",) if delivered else ("pending", "delivering")
    )  # fmt: skip
    delivery = open_delivery()
    who = delivery.agent_of(me())
    delivery.refresh()
    delivery.settle_moot(who)
    items = delivery.items(who, states)[:limit]
    warn(delivery.take_problems())
    emit({"agent": who, "items": [item_json(i) for i in items]}, lambda: _table(items, who))


def warn(problems: list[str]) -> None:
    """Say each problem met on the way (a line or a row set aside) on stderr, one line each."""
    for problem in problems:
        click.echo(f"gc: warning: {problem}", err=True)


@inbox.command()
@click.option("--session", "session", help="The session to drain into (default: $GC_SESSION_ID).")
@click.option("--reconcile", is_flag=True, help="First re-derive items from their producers.")
@global_options
def drain(session: str | None, reconcile: bool) -> None:
    """Deliver the pending items of SESSION's agent and print them as a system reminder."""
    session = chosen_session(session)
    delivery = open_delivery()
    known = delivery.session(session)
    agent = known.agent if known and not settings().agent else me()
    if known is None:
        delivery.register(session, agent)
    if reconcile:  # the producers of the delivery's set (inbox/producers.py)
        delivery.reconcile(agent)
    drained = delivery.drain(session, agent, deliver=False)
    warn(list(drained.problems))
    fault("drain-before-output")
    emit(
        {
            "session": session,
            "agent": agent,
            "items": [item_json(i) for i in drained.items],
            "text": drained.text,
            "deferred": drained.deferred,
            "dropped": drained.dropped,
        },
        drained.text,
    )
    # Delivered once the output is out: a drain killed before this hands them out again.
    sys.stdout.flush()
    delivery.delivered(drained)


@inbox.command()
@click.option("--timeout", default="60", show_default=True, help="Give up after (e.g. 30s).")
@global_options
def wait(timeout: str) -> None:
    """Block until an item is pending for --agent (default: you); exit 10 on timeout."""
    from beads.waiting import terminable

    deadline = time.monotonic() + parse_duration(timeout)
    with terminable():  # SIGTERM ends the wait in one line, as Ctrl-C does
        while True:
            try:
                delivery = open_delivery()
                who = delivery.agent_of(me())
                woke = delivery.wait(who, max(0.0, deadline - time.monotonic()))
                items = delivery.items(who, ("pending", "delivering")) if woke else []
                break
            except DatabaseReplaced:  # a new file, at any step: pushes go there now
                continue
    warn(delivery.take_problems())
    if not woke:
        answer_no({"agent": who, "woke": False, "items": []}, f"No item for {who} within {timeout}")
    emit(
        {"agent": who, "woke": True, "items": [item_json(i) for i in items]},
        lambda: _table(items, who),
    )


def _table(items: list[Item], who: str) -> str:
    if not items:
        return f"No items for {who}"
    rows = [("ID", "P", "TYPE", "FROM", "STATE", "CONTENT")]
    rows += [
        (
            str(i.id),
            str(i.priority),
            i.type,
            shown_source(i),
            i.state,
            preview(i.content, 60, "..."),
        )
        for i in items
    ]
    return table(rows)


@click.group()
def session() -> None:
    """Agent sessions as the hooks report them."""


@session.command("list")
@click.option("--all", "show_all", is_flag=True, help="Ended and timed-out sessions too.")
@limit_option
@global_options
def list_sessions(show_all: bool, limit: int | None) -> None:
    """Live sessions: agent, state (busy/idle), last hook, last nudge outcome."""
    sessions = open_delivery().sessions(include_ended=show_all)[:limit]
    times = ("started_at", "last_hook_at", "ended_at", "nudged_at")
    emit(
        {"sessions": [stamped(s.to_json(), *times) for s in sessions]},
        lambda: _sessions_table(sessions),
    )


def _sessions_table(sessions: list[Session]) -> str:
    if not sessions:
        return "No live sessions"
    now = time.time()
    rows = [("SESSION", "AGENT", "STATE", "LAST HOOK", "LAST NUDGE")]
    for s in sessions:
        nudge = "-"
        if s.nudge_outcome:
            nudge = f"{s.nudge_outcome} {_ago(now, s.nudged_at)}: {s.nudge_detail or ''}".strip()
        hook = f"{s.last_hook or '-'} {_ago(now, s.last_hook_at)}"
        rows.append((s.session, s.agent, s.state, hook, nudge))
    return table(rows)


def _ago(now: float, then: Any) -> str:
    if not then:
        return ""
    seconds = max(0, int(now - then))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
