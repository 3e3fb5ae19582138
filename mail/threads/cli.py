"""`gc thread ...` and the `inbox` command: seed 002's CLI, a thin layer over `Threads`.

`inbox` is this same command group as a program of its own, so the seed's examples run as
written: `--db PATH` is another name for `--beads-dir`, and `inbox init` is `gc init`.
The acting agent is `--agent` (else `beads.records.record.acting_agent`'s order); `--from`
names the sender of `send` and `reply` (default: the acting agent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from beads.cli.common import (
    Duration,
    answer_no,
    emit,
    global_options,
    open_store,
    read_text,
    settings,
)
from beads.errors import NoMatch
from beads.records.record import acting_agent
from beads.records.times import now_stamp
from mail.threads.api import Threads, origins_of, with_origin
from mail.threads.model import (
    DEFAULT_LEASE_SECONDS,
    KINDS,
    REPLY_KINDS,
    STATUSES,
    Lease,
    Thread,
    ThreadMessage,
    Wake,
    artifacts,
    parse_list,
    parse_object,
)
from mail.threads.tokens import keep_token, read_tokens


@click.group()
def thread() -> None:
    """Work threads: send, fetch, claim (leases), update, reply, done/fail, watch, wait-reply."""


def threads(sender: str | None = None) -> Threads:
    """The work threads of this command's store; a `--from` sender without `--agent` is the
    acting agent (the author of the commit), as the seed's commands expect."""
    options = settings()
    if sender is not None and options.agent is None:
        options.agent = sender
    api = Threads(open_store())
    click.get_current_context().call_on_close(api.close)
    return api


def me() -> str:
    return acting_agent(settings().agent)


def as_holder(api: Threads, agent: str) -> Threads:
    """`api`, knowing the tokens this machine's claims of `agent` got (`.runtime/leases/`):
    a write without --lease-token must match the agent's last claim of its thread."""
    for thread_id, token in read_tokens(api.store, agent).items():
        api.remember(agent, thread_id, token)
    return api


def lease_token_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--lease-token",
        help="The token `claim` returned: refused (exit 20 lease_conflict) unless it is the "
        "live lease's. Default: the agent's last claim of the thread on this machine.",
    )(func)


# -- shared options ------------------------------------------------------------------------


def thread_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--thread", "thread_id", required=True, help="The thread's id.")(func)


def content_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--summary, --body, --body-file, --payload-json and the artifact options."""
    options = [
        click.option("--summary", help="One line: what this message says."),
        click.option("--body", help="The message's text."),
        click.option("--body-file", help="Read the text from a file (- = stdin)."),
        click.option("--payload-json", help="A JSON object stored with the message."),
        *artifact_options(),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def artifact_options() -> list[Callable[..., Any]]:
    return [
        click.option(
            "--artifact", "artifact_paths", multiple=True, help="A file to reference (repeatable)."
        ),
        click.option(
            "--artifact-kind", "artifact_kinds", multiple=True, help="Its kind (default file)."
        ),
        click.option(
            "--artifact-metadata-json",
            "artifact_metadata",
            multiple=True,
            help="A JSON object describing it.",
        ),
    ]


def content(
    api: Threads,
    summary: str | None,
    body: str | None,
    body_file: str | None,
    payload_json: str | None,
    artifact_paths: tuple[str, ...],
    artifact_kinds: tuple[str, ...],
    artifact_metadata: tuple[str, ...],
) -> dict[str, Any]:
    """The keyword arguments of a message, parsed and checked (before anything is written)."""
    return {
        "summary": summary,
        "body": read_text(body, body_file, False, limit=api.store.max_body) or "",
        "payload": parse_object(payload_json, "--payload-json"),
        "artifacts": artifacts(artifact_paths, artifact_kinds, artifact_metadata),
    }


def lease_seconds_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--lease-seconds",
        type=Duration(minimum=1),
        default=str(int(DEFAULT_LEASE_SECONDS)),
        show_default=True,
        help="How long the lease lasts (900, 15m).",
    )(func)


def timeout_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--timeout-seconds",
        type=Duration(minimum=0),
        default="60",
        show_default=True,
        help="Give up after this long (exit 10).",
    )(func)


# -- output --------------------------------------------------------------------------------


def thread_line(thread: Thread) -> str:
    holder = (
        f" (lease: {thread.lease.agent} until {thread.lease.expires_at})" if thread.lease else ""
    )
    who = thread.assigned_to or "anyone"
    return (
        f"{thread.thread_id}  {thread.status:<11}  {thread.to_json()['priority']:<6}  "
        f"{who}  {thread.subject}{holder}"
    )


def message_line(message: ThreadMessage) -> str:
    to = f" -> {message.to_agent}" if message.to_agent else ""
    event = f"#{message.event_id} " if message.event_id is not None else ""
    text = f"{event}{message.created_at[:19].replace('T', ' ')}  {message.kind:<8}  "
    text += f"{message.from_agent}{to}: {message.summary}"
    if message.body:
        text += "\n    " + message.body.replace("\n", "\n    ")
    for item in message.artifacts:
        text += f"\n    [{item.get('kind')}] {item.get('path')}"
    return text


def emit_thread(thread: Thread, message: ThreadMessage | None, text: str) -> None:
    payload: dict[str, Any] = {"thread": thread.to_json(now_stamp())}
    if message is not None:
        payload["message"] = message.to_json()
    emit(payload, text)


def emit_wake(wake: Wake, text: Callable[[], str], origins: dict[str, str]) -> None:
    """What watch and wait-reply print; `origins` (`origins_of` the messages) says where
    each was written (`"origin"`, null for here)."""
    message = wake.message
    payload: dict[str, Any] = {
        "woke": wake.woke,
        "next_event_id": wake.next_event_id,
        "message": message.to_json() if message else None,
        "origin": None,
    }
    if message is not None:
        payload["origin"] = origins.get(message.message_id, "").strip() or None
    if wake.messages and len(wake.messages) > 1 or wake.threads:
        payload["messages"] = [with_origin(m, origins) for m in wake.messages]
        payload["threads"] = [t.to_json(now_stamp()) for t in wake.threads]
    emit(payload, text if wake.woke else "Nothing came before the timeout")
    if not wake.woke:
        click.get_current_context().exit(NoMatch.exit_code)


# -- commands ------------------------------------------------------------------------------


@thread.command()
@click.option("--from", "sender", help="The sender (default: the acting agent).")
@click.option("--to", help="Assign the thread to / send the message to this agent.")
@click.option("--subject", help="The new thread's title.")
@click.option("--thread", "thread_id", help="Add the message to this thread instead.")
@click.option("--run", "run_id", help="The run this thread belongs to.")
@click.option("--task", "task_id", help="The task this thread carries.")
@click.option("--kind", default="task", show_default=True, help="|".join(KINDS))
@click.option("--priority", default="normal", show_default=True, help="low|normal|high or 0-4.")
@content_options
@lease_token_option
@global_options
def send(
    sender: str | None,
    to: str | None,
    subject: str | None,
    thread_id: str | None,
    run_id: str | None,
    task_id: str | None,
    kind: str,
    priority: str,
    lease_token: str | None,
    **message: Any,
) -> None:
    """Start a thread (status pending), or add a message to one with --thread."""
    api = threads(sender)
    author = sender or me()
    as_holder(api, author)
    made, sent = api.send(
        author,
        to=to,
        subject=subject,
        thread=thread_id,
        run_id=run_id,
        task_id=task_id,
        kind=kind,
        priority=priority,
        lease_token=lease_token,
        **content(api, **message),
    )
    verb = "Added message" if thread_id else "Created thread"
    emit_thread(made, sent, f"{verb} {made.thread_id if not thread_id else sent.message_id}")


@thread.command()
@click.option("--status", "statuses", default="pending", show_default=True, help="A list (, or |).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--unread", is_flag=True, help="Only threads with unread mail for the agent.")
@global_options
def fetch(statuses: str, limit: int, unread: bool) -> None:
    """Candidate threads for the agent (its own and those open to all); claims nothing.
    None: exit 10 with `"found": false` (no matching work)."""
    wanted = parse_list(statuses, STATUSES, "--status")
    found = threads().fetch(me(), statuses=wanted or (), limit=limit, unread=unread)
    if not found:
        answer_no({"threads": [], "found": False}, "No threads")
    now = now_stamp()
    emit(
        {"threads": [t.to_json(now) for t in found], "found": True},
        lambda: "\n".join(thread_line(t) for t in found),
    )


@thread.command()
@thread_option
@lease_seconds_option
@global_options
def claim(thread_id: str, lease_seconds: float) -> None:
    """Take the thread's lease (exit 20 lease_conflict while another agent holds one)."""
    api = threads()
    agent = me()
    lease = api.claim(agent, thread_id, lease_seconds=lease_seconds)
    held = api.get(thread_id)
    keep_token(api.store, agent, held.thread_id, lease.token)
    _emit_lease(held, lease, "Claimed")


@thread.command()
@thread_option
@lease_seconds_option
@lease_token_option
@global_options
def renew(thread_id: str, lease_seconds: float, lease_token: str | None) -> None:
    """Extend the lease you hold."""
    agent = me()
    api = as_holder(threads(), agent)
    lease = api.renew(agent, thread_id, lease_seconds=lease_seconds, lease_token=lease_token)
    _emit_lease(api.get(thread_id), lease, "Renewed")


def _emit_lease(held: Thread, lease: Lease, verb: str) -> None:
    """The reply of claim and renew: the thread as it now stands, and the lease."""
    emit(
        {"thread": held.to_json(now_stamp()), "lease": lease.to_json()},
        f"{verb} {held.thread_id} until {lease.expires_at}",
    )


@thread.command()
@thread_option
@click.option("--reason", help="Why (the event's summary).")
@lease_token_option
@global_options
def release(thread_id: str, reason: str | None, lease_token: str | None) -> None:
    """Give the lease back: the thread is pending again."""
    agent = me()
    api = as_holder(threads(), agent)
    released = api.release(agent, thread_id, reason=reason, lease_token=lease_token)
    keep_token(api.store, agent, released.thread_id, None)
    emit_thread(released, None, f"Released {released.thread_id}")


@thread.command()
@thread_option
@click.option("--status", help="in_progress|blocked")
@content_options
@lease_token_option
@global_options
def update(thread_id: str, status: str | None, lease_token: str | None, **message: Any) -> None:
    """Report progress on a thread you hold; --status blocked asks the creator a question."""
    agent = me()
    api = as_holder(threads(), agent)
    changed, sent = api.update(
        agent, thread_id, status=status, lease_token=lease_token, **content(api, **message)
    )
    emit_thread(changed, sent, f"Updated {changed.thread_id}: {changed.status}")


@thread.command()
@click.option("--from", "sender", help="The sender (default: the acting agent).")
@click.option("--to", help="The recipient (default: the other side of the thread).")
@thread_option
@click.option("--kind", default="answer", show_default=True, help="|".join(KINDS))
@content_options
@lease_token_option
@global_options
def reply(
    sender: str | None,
    to: str | None,
    thread_id: str,
    kind: str,
    lease_token: str | None,
    **message: Any,
) -> None:
    """Reply inside a thread (an answer, a question, progress, a control message)."""
    api = threads(sender)
    author = sender or me()
    as_holder(api, author)
    sent = api.reply(
        author, thread_id, to=to, kind=kind, lease_token=lease_token, **content(api, **message)
    )
    emit({"message": sent.to_json()}, f"Sent {sent.kind} {sent.message_id}")


def _finish(verb: str) -> Callable[..., None]:
    def command(thread_id: str, lease_token: str | None, **message: Any) -> None:
        agent = me()
        api = as_holder(threads(), agent)
        finish = getattr(api, verb)
        finished, sent = finish(
            agent, thread_id, lease_token=lease_token, **content(api, **message)
        )
        keep_token(api.store, agent, finished.thread_id, None)
        emit_thread(finished, sent, f"{finished.thread_id} is {finished.status}")

    return command


done = thread.command(
    "done", help="Finish a thread you hold with its result (to the thread's creator)."
)(global_options(lease_token_option(content_options(thread_option(_finish("done"))))))
fail = thread.command("fail", help="End a thread you hold as failed, saying why.")(
    global_options(lease_token_option(content_options(thread_option(_finish("fail")))))
)


@thread.command()
@thread_option
@click.option("--reason", help="Why.")
@lease_token_option
@global_options
def cancel(thread_id: str, reason: str | None, lease_token: str | None, **refs: Any) -> None:
    """Cancel a thread that is not finished (a leader's override)."""
    found = artifacts(refs["artifact_paths"], refs["artifact_kinds"], refs["artifact_metadata"])
    agent = me()
    api = as_holder(threads(), agent)
    cancelled = api.cancel(
        agent, thread_id, reason=reason, artifacts=found, lease_token=lease_token
    )
    keep_token(api.store, agent, cancelled.thread_id, None)
    emit_thread(cancelled, None, f"Cancelled {cancelled.thread_id}")


for _option in reversed(artifact_options()):
    cancel = _option(cancel)


@thread.command("list")
@click.option("--status", "statuses", help="A list of statuses (, or |).")
@click.option("--created-by", help="Threads this agent created.")
@click.option("--assigned-to", help="Threads assigned to this agent.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@global_options
def list_threads(
    statuses: str | None, created_by: str | None, assigned_to: str | None, limit: int
) -> None:
    """Threads, newest first (--agent: those it created or is assigned)."""
    found = threads().list(
        statuses=parse_list(statuses, STATUSES, "--status"),
        created_by=created_by,
        assigned_to=assigned_to,
        agent=settings().agent,
        limit=limit,
    )
    now = now_stamp()
    emit(
        {"threads": [t.to_json(now) for t in found]},
        lambda: "\n".join(thread_line(t) for t in found) or "No threads",
    )


@thread.command()
@click.argument("thread_ref", required=False)
@click.option("--thread", "thread_id", help="The thread's id.")
@global_options
def show(thread_ref: str | None, thread_id: str | None) -> None:
    """A thread with its whole history, in order."""
    from beads.errors import InvalidInput

    if (thread_ref is None) == (thread_id is None):
        raise InvalidInput("give the thread once: --thread ID (or ID)")
    api = threads()
    found, messages = api.show(thread_ref or thread_id or "")
    origins = origins_of(api, messages)
    payload = {
        "thread": found.to_json(now_stamp()),
        "messages": [with_origin(m, origins) for m in messages],
    }
    emit(
        payload,
        lambda: "\n".join(
            [
                thread_line(found),
                *(origins.get(m.message_id, "") + message_line(m) for m in messages),
            ]
        ),
    )


@thread.command()
@click.option("--status", "statuses", help="Only threads in these statuses (, or |).")
@click.option(
    "--after-event", type=click.IntRange(min=0, max=2**63 - 1), help="Wake for events after this."
)
@timeout_option
@global_options
def watch(statuses: str | None, after_event: int | None, timeout_seconds: float) -> None:
    """Block until a thread (of --agent) gets a message, or a lease expires; exit 10 on timeout."""
    from beads.waiting import terminable

    api = threads()
    with terminable():  # SIGTERM ends the wait in one line, as Ctrl-C does
        wake = api.watch(
            agent=settings().agent,
            statuses=parse_list(statuses, STATUSES, "--status"),
            after_event=after_event,
            timeout=timeout_seconds,
        )
    # A message written on another machine says so, as its item in a hook would.
    origins = origins_of(api, [wake.message, *wake.messages])
    emit_wake(
        wake,
        lambda: "\n".join(
            [*(origins.get(m.message_id, "") + message_line(m) for m in wake.messages)]
            + [f"lease expired: {thread_line(t)}" for t in wake.threads if not wake.messages]
        ),
        origins,
    )


@thread.command("wait-reply")
@thread_option
@click.option(
    "--after-event", type=click.IntRange(min=0, max=2**63 - 1), help="Wait for events after this."
)
@click.option("--after-message", help="Wait for messages after this one (any machine).")
@click.option("--kinds", default=",".join(REPLY_KINDS), show_default=True, help="A list (, or |).")
@timeout_option
@click.option(
    "--lease-token",
    help="The holder's token: stop waiting (exit 20 lease_conflict) once the thread no "
    "longer carries this lease.",
)
@global_options
def wait_reply(
    thread_id: str,
    after_event: int | None,
    after_message: str | None,
    kinds: str,
    timeout_seconds: float,
    lease_token: str | None,
) -> None:
    """Block until a reply of these kinds comes in the thread; exit 10 on timeout. A reply
    from another machine starts with where it came from: (from human on build-01)."""
    from beads.waiting import terminable

    api = threads()
    with terminable():  # SIGTERM ends the wait in one line, as Ctrl-C does
        wake = api.wait_reply(
            thread_id,
            after_event=after_event,
            after_message=after_message,
            kinds=parse_list(kinds, KINDS, "--kinds") or (),
            timeout=timeout_seconds,
            lease_token=lease_token,
        )
    reply = wake.message
    # A reply written on another machine says so, as its item in a hook would.
    origins = origins_of(api, [reply])
    origin = origins.get(reply.message_id, "") if reply else ""
    emit_wake(wake, lambda: origin + message_line(reply) if reply else "", origins)
