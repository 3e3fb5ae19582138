"""The tools of `gc mcp`: names, descriptions and JSON schemas written for a model, and the
checking of a call's arguments.

Each tool's arguments are a pydantic model (pydantic comes with the `mcp` SDK) that refuses
unknown keys: no tool takes an acting agent or a sender (`agent`, `from`), so a call naming
one is a clear `invalid_input` error, as is any argument of the wrong type. Each tool runs one
`AgentStore` operation and names the CLI command whose `--json` reply it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from beads.errors import InvalidInput
from mcpserver.agentstore import AgentStore

# Bounds and words shared with the CLI (mail/threads/model.py, mail/cli.py).
Kind = Literal["task", "progress", "question", "answer", "result", "control", "event"]
Status = Literal["pending", "claimed", "in_progress", "blocked", "done", "failed", "cancelled"]


def _whole(value: Any) -> Any:
    """A number with no fraction (`5.0`) as the integer it is: JSON Schema's `integer` takes
    it, and the schemas this server shows say `integer`. Any other value goes on to the strict
    check (`true` and `"5"` are refused)."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


Whole = Annotated[int, BeforeValidator(_whole)]  # an integer argument
Priority = Annotated[Whole, Field(ge=0, le=4)]
MAX_WAIT_SECONDS = 3600.0


class Args(BaseModel):
    """Arguments of a tool: unknown keys are refused, and so is a value of another JSON type
    than the schema's (`"5"` or `true` for an integer, `1` for a boolean: pydantic's lax mode
    would convert them)."""

    model_config = ConfigDict(extra="forbid", strict=True)


ThreadId = Annotated[str, Field(description="The work thread's id (or an unambiguous prefix).")]
MessageId = Annotated[str, Field(description="A message id (or an unambiguous prefix).")]
LeaseToken = Annotated[
    str | None,
    Field(
        description="The token thread_claim returned. Default: this agent's last claim of "
        "the thread on this machine. A token that is not the live lease's is a lease_conflict."
    ),
]


class Artifact(Args):
    path: str = Field(description="The file's path (a reference: the file is not copied).")
    kind: str | None = Field(None, description="What it is (default: file).")
    metadata: dict[str, Any] | None = Field(None, description="A JSON object describing it.")


class Content(Args):
    """What a work-thread message says."""

    summary: str | None = Field(None, description="One line: what this message says.")
    body: str = Field("", description="The message's text.")
    payload: dict[str, Any] | None = Field(None, description="A JSON object stored with it.")
    artifacts: list[Artifact] = Field(default_factory=list, description="Files it refers to.")


# -- mail --------------------------------------------------------------------------------------


class MailSend(Args):
    to: list[str] = Field(min_length=1, description="Recipients: agent names (or rig/name).")
    subject: str = Field("", description="The subject line.")
    body: str = Field("", description="The message text (a subject or a body is required).")
    cc: list[str] = Field(default_factory=list, description="Agents that also get a copy.")
    priority: Priority = Field(2, description="0 critical, 1 high, 2 normal, 3 low, 4 lowest.")
    dedup: str | None = Field(
        None, description="Skip the send while an unarchived message with this key waits."
    )


class MailReply(Args):
    message_id: MessageId
    body: str = Field(description="The reply's text.")
    subject: str = Field("", description="Default: 'Re: ' and the original subject.")


class MailInbox(Args):
    all: bool = Field(False, description="Read messages too, not only unread ones.")
    archived: bool = Field(False, description="Archived messages instead.")
    limit: Whole | None = Field(None, ge=1, description="At most this many (default: all).")


class MailId(Args):
    message_id: MessageId


class MailArchive(Args):
    message_ids: list[str] = Field(min_length=1, description="Ids of messages in your mailbox.")


class MailThread(Args):
    thread_id: str = Field(description="A mail thread's id, or the id of any message in it.")


class MailSearch(Args):
    query: str = Field(description="Words to find; each must start a word of the message.")
    limit: Whole = Field(20, ge=1, le=500, description="At most this many (newest first).")
    archived: bool = Field(True, description="Search archived messages too.")


class NoArgs(Args):
    pass


# -- work threads -------------------------------------------------------------------------------


class ThreadSend(Content):
    subject: str | None = Field(None, description="A new thread's title (omit with thread_id).")
    thread_id: str | None = Field(None, description="Add the message to this thread instead.")
    to: str | None = Field(
        None, description="The agent the thread is assigned to (omit: open to every agent)."
    )
    kind: Kind = Field("task", description="The message's kind.")
    priority: Literal["critical", "high", "normal", "low", "lowest"] | Priority = "normal"
    run_id: str | None = Field(None, description="The run this thread belongs to.")
    task_id: str | None = Field(None, description="The task this thread carries.")


class ThreadFetch(Args):
    statuses: list[Status] = Field(["pending"], description="Thread statuses to list.")
    limit: Whole = Field(20, ge=1, le=1000)
    unread: bool = Field(False, description="Only threads with unread mail for you.")


class ThreadRef(Args):
    thread_id: ThreadId


class ThreadClaim(Args):
    thread_id: ThreadId
    lease_seconds: float = Field(900, ge=1, le=86400 * 30, description="How long the lease lasts.")


class ThreadRenew(ThreadClaim):
    lease_token: LeaseToken = None


class ThreadUpdate(Content):
    thread_id: ThreadId
    status: Literal["in_progress", "blocked"] | None = Field(
        None, description="in_progress, or blocked (asks the thread's creator a question)."
    )
    lease_token: LeaseToken = None


class ThreadReply(Content):
    thread_id: ThreadId
    to: str | None = Field(None, description="Default: the other side of the thread.")
    kind: Kind = "answer"
    lease_token: LeaseToken = None


class ThreadFinish(Content):
    thread_id: ThreadId
    lease_token: LeaseToken = None


class ThreadEnd(Args):
    thread_id: ThreadId
    reason: str | None = Field(None, description="Why.")
    lease_token: LeaseToken = None


class ThreadWait(Args):
    thread_id: ThreadId
    after_event: Whole | None = Field(
        None, ge=0, le=2**63 - 1, description="Wait for messages after this event id."
    )
    after_message: str | None = Field(
        None, description="Wait for messages after this message (valid on every machine)."
    )
    kinds: list[Kind] | None = Field(None, description="Default: answer, control, result.")
    timeout_seconds: float = Field(
        60, ge=0, le=MAX_WAIT_SECONDS, description="Give up after this long (woke: false)."
    )
    lease_token: str | None = Field(
        None, description="Stop with lease_conflict once the thread no longer has this lease."
    )


# -- inbox items and decisions -------------------------------------------------------------------


class InboxList(Args):
    all: bool = Field(False, description="Every state, not only undelivered items.")
    delivered: bool = Field(False, description="Delivered items only.")
    limit: Whole | None = Field(None, ge=1)


class InboxPeek(Args):
    item_id: Whole = Field(ge=1, description="The item's id (from inbox_list).")


class DecisionList(Args):
    answered: bool = Field(False, description="Answered decisions too.")


class DecisionAnswer(Args):
    decision_id: str = Field(description="The decision's id (from decision_list).")
    option: str = Field(description="The key of the option chosen.")
    text: str | None = Field(None, description="A note with the answer.")


class Tool(NamedTuple):
    """One tool: its name, the CLI command whose `--json` reply it returns, what it says to a
    model, its arguments, what it runs, and whether it changes nothing."""

    name: str
    command: str
    description: str
    args: type[Args]
    run: Callable[[AgentStore, Any], dict[str, Any]]
    read_only: bool = False


def _content(a: Content) -> dict[str, Any]:
    return {
        "summary": a.summary,
        "body": a.body,
        "payload": a.payload,
        "artifacts": [x.model_dump() for x in a.artifacts],
    }


# The blocking tool: the server runs it (mcpserver.server), looking again each time the branch
# moves, so that the client can cancel it.
WAIT_TOOL = "thread_wait_reply"

TOOLS: list[Tool] = [
    Tool("mail_send", "mail.send",
         "Send mail to other agents, as you. Each recipient (and cc) gets its own copy. "
         "Returns the copies sent; warnings name unknown recipients.",
         MailSend,
         lambda s, a: s.mail_send(a.to, a.subject, a.body, cc=a.cc, priority=a.priority,
                                  dedup=a.dedup)),
    Tool("mail_reply", "mail.reply",
         "Reply to a message in your mailbox: goes to its sender, in the same thread.",
         MailReply, lambda s, a: s.mail_reply(a.message_id, a.body, a.subject)),
    Tool("mail_inbox", "mail.inbox",
         "List your unread mail, oldest first (all: read ones too; archived: archived ones). "
         "Changes nothing.",
         MailInbox,
         lambda s, a: s.mail_inbox(read_too=a.all, archived=a.archived, limit=a.limit),
         read_only=True),
    Tool("mail_read", "mail.read",
         "Show a message of your mailbox and mark it read.",
         MailId, lambda s, a: s.mail_read(a.message_id)),
    Tool("mail_peek", "mail.peek",
         "Show a message you sent or received without marking it read.",
         MailId, lambda s, a: s.mail_peek(a.message_id), read_only=True),
    Tool("mail_archive", "mail.archive",
         "Archive messages of your mailbox (all or none; they stay in the store's history).",
         MailArchive, lambda s, a: s.mail_archive(a.message_ids)),
    Tool("mail_thread", "mail.thread",
         "Show a mail conversation, oldest first: the messages in it you sent or received.",
         MailThread, lambda s, a: s.mail_thread(a.thread_id), read_only=True),
    Tool("mail_count", "mail.count",
         "Count your mailbox: total (not archived) and unread.",
         NoArgs, lambda s, a: s.mail_count(), read_only=True),
    Tool("mail_search", "mail.search",
         "Search your mail (received and sent) by words, newest first. Each result is a "
         "message with `mailbox` (whose copy) and `archived`; `more` says a larger limit "
         "would find more.",
         MailSearch,
         lambda s, a: s.mail_search(a.query, limit=a.limit, archived=a.archived),
         read_only=True),
    Tool("thread_send", "thread.send",
         "Start a work thread (status pending) with a task for an agent, or for any agent "
         "when `to` is omitted; with thread_id, add a message to an existing thread instead.",
         ThreadSend,
         lambda s, a: s.thread_send(to=a.to, subject=a.subject, thread_id=a.thread_id,
                                    run_id=a.run_id, task_id=a.task_id, kind=a.kind,
                                    priority=a.priority, **_content(a))),
    Tool("thread_fetch", "thread.fetch",
         "List work threads you could take (assigned to you or open to all), most urgent "
         "first. Claims nothing: claim one with thread_claim.",
         ThreadFetch,
         lambda s, a: s.thread_fetch(statuses=a.statuses, limit=a.limit, unread=a.unread),
         read_only=True),
    Tool("thread_show", "thread.show",
         "Show a work thread and all its messages in order (events too).",
         ThreadRef, lambda s, a: s.thread_show(a.thread_id), read_only=True),
    Tool("thread_claim", "thread.claim",
         "Take a work thread's lease before working on it. Fails with lease_conflict while "
         "another agent holds a live lease. Keep the returned lease token.",
         ThreadClaim, lambda s, a: s.thread_claim(a.thread_id, a.lease_seconds)),
    Tool("thread_renew", "thread.renew",
         "Extend the lease you hold on a work thread.",
         ThreadRenew,
         lambda s, a: s.thread_renew(a.thread_id, a.lease_seconds, a.lease_token)),
    Tool("thread_update", "thread.update",
         "Report progress on a thread you hold; status blocked asks its creator a question.",
         ThreadUpdate,
         lambda s, a: s.thread_update(a.thread_id, status=a.status, lease_token=a.lease_token,
                                      **_content(a))),
    Tool("thread_reply", "thread.reply",
         "Write in a work thread (an answer, a question, progress, a control message); goes "
         "to the other side of the thread unless `to` is given. Changes no status.",
         ThreadReply,
         lambda s, a: s.thread_reply(a.thread_id, to=a.to, kind=a.kind,
                                     lease_token=a.lease_token, **_content(a))),
    Tool(WAIT_TOOL, "thread.wait-reply",
         "Wait until a reply (answer, control or result by default) arrives in a work thread, "
         "or the timeout passes (woke: false, not an error). Use next_event_id as after_event "
         "to wait again without missing anything. The client may cancel the wait.",
         ThreadWait, lambda s, a: {}, read_only=True),
    Tool("thread_release", "thread.release",
         "Give back the lease of a thread you hold: it is pending again for others.",
         ThreadEnd, lambda s, a: s.thread_release(a.thread_id, a.reason, a.lease_token)),
    Tool("thread_done", "thread.done",
         "Finish a thread you hold with its result (sent to the thread's creator).",
         ThreadFinish,
         lambda s, a: s.thread_finish("done", a.thread_id, lease_token=a.lease_token,
                                      **_content(a))),
    Tool("thread_fail", "thread.fail",
         "End a thread you hold as failed, saying why (sent to the thread's creator).",
         ThreadFinish,
         lambda s, a: s.thread_finish("fail", a.thread_id, lease_token=a.lease_token,
                                      **_content(a))),
    Tool("thread_cancel", "thread.cancel",
         "Cancel a work thread that is not finished.",
         ThreadEnd, lambda s, a: s.thread_cancel(a.thread_id, a.reason, a.lease_token)),
    Tool("inbox_list", "inbox.list",
         "List your delivery items (notifications: mail, decisions, gates, alerts), most "
         "urgent first; undelivered ones unless asked. Changes nothing: hooks deliver them.",
         InboxList,
         lambda s, a: s.inbox_list(every=a.all, delivered=a.delivered, limit=a.limit),
         read_only=True),
    Tool("inbox_peek", "inbox.peek",
         "Show one of your delivery items by id, in any state, without delivering it.",
         InboxPeek, lambda s, a: s.inbox_peek(a.item_id), read_only=True),
    Tool("decision_list", "decision.list",
         "List the open decisions assigned to you (answered: those answered too). Decisions "
         "for a person (human) are never listed here.",
         DecisionList, lambda s, a: s.decision_list(answered=a.answered), read_only=True),
    Tool("decision_answer", "decision.respond",
         "Answer a decision assigned to you with one of its option keys; the requester is "
         "told. A decision for a person (human) cannot be answered here.",
         DecisionAnswer, lambda s, a: s.decision_answer(a.decision_id, a.option, a.text)),
]  # fmt: skip
BY_NAME = {tool.name: tool for tool in TOOLS}


def schema(tool: Tool) -> dict[str, Any]:
    """The tool's input schema (JSON Schema of its arguments)."""
    return tool.args.model_json_schema()


def parse(tool: Tool, arguments: dict[str, Any] | None) -> Any:
    """The call's arguments checked against the tool's, or InvalidInput saying what is wrong
    with each (one line)."""
    try:
        return tool.args.model_validate(arguments or {})
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            problems.append(f"{where}: {error['msg']}")
        raise InvalidInput(f"{tool.name}: " + "; ".join(problems)) from None
