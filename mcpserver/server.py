"""The MCP server of `gc mcp`: the official SDK's low-level server over stdio.

One process serves one client, one store and one agent (`AgentStore`). Every tool call first
checks that the store it holds is still the one on disk (`AgentStore.fresh`), then runs its
operation to the end on the event loop: calls never interleave inside a write, and no lock
is held between calls. A result is the CLI's `--json` object (`{"ok": true, "command":
"mail.send", ...}`) as structured content and as its JSON text; a failure is a tool error
(`isError`) carrying the CLI's error object (`{"ok": false, "error": {"code": "not_found",
"message": ...}}`), never a traceback. `thread_wait_reply` is the one call that waits: it
looks again each time the store's branch moves, sleeping between looks on the event loop,
so a client's cancellation ends it at once. When the client closes stdin, every request read
is answered before the server exits, but for one still running after a grace period (`GRACE`,
`CheckedLines`). A client that stops reading (closes its end of stdout) ends the server
quietly, as a reader that went away ends any `gc` command: at the next answer that cannot be
written, or within `READER_CHECK` seconds while there is none, though the client keeps stdin
open (`reader_gone`); the client's lines are read on the event loop (`wire_lines`), so no
read of a silent client holds the server, and the answers are written there too
(`WireWriter`), with no thread between a call and its answer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import stat
import sys
import termios
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from anyio.lowlevel import checkpoint
from mcp.server.lowlevel import Server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage

from beads.errors import GcError, InvalidInput, StorageError
from beads.jsontext import unique_keys
from beads.waiting import POLL, BranchWatch
from mcpserver.agentstore import OPEN_THREADS, AgentStore
from mcpserver.tools import BY_NAME, TOOLS, WAIT_TOOL, Tool, parse, schema

NAME = "gc-beads"
# How long the requests still being served after the client closed stdin may run on before
# the server ends them (the SDK's cancellation, as at the end of any session) and exits. Of
# the order of a command's budget (`mail.exec_timeout`, 30 s): a write finishes well within
# it, while a wait (`thread_wait_reply` may wait an hour) does not keep the process of a
# client that went away alive until its timeout.
GRACE = 30.0
GRACE_ENV = "GC_MCP_GRACE"  # for tests only: a shorter grace, in seconds
# Seconds between two looks at whether the client still reads stdout while no answer is
# being written: nothing on the event loop says so (the pipe stays writable).
READER_CHECK = 0.5
READ_SIZE = 1 << 16  # bytes read from stdin at a time
RESOURCES = {
    "gc://mail/inbox": (
        "inbox",
        "Your unread mail, oldest first (as the mail_inbox tool lists it).",
        lambda s: {"command": "mail.inbox", **s.mail_inbox()},
    ),
    "gc://threads/open": (
        "open threads",
        "Work threads you could take or are working on: pending, claimed, in progress or "
        "blocked, assigned to you or open to all (as thread_fetch lists them).",
        lambda s: {
            "command": "thread.fetch",
            **s.thread_fetch(statuses=OPEN_THREADS, limit=1000),
        },  # fmt: skip
    ),
}


def build_server(agent_store: AgentStore) -> Server[Any]:
    """The MCP server over `agent_store`: its tools and resources."""

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_listed(tool) for tool in TOOLS])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = BY_NAME.get(params.name)
        command = tool.command if tool else params.name
        try:
            if tool is None:
                raise InvalidInput(f"no tool {params.name!r}: see the list of tools")
            args = parse(tool, params.arguments)
            agent_store.fresh()
            if tool.name == WAIT_TOOL:
                payload = await wait_reply(agent_store, args)
            else:
                payload = tool.run(agent_store, args)
        except Exception as exc:  # every failure is a tool error with the CLI's error object
            return _failure(command, _as_gc_error(exc))
        return _result({"ok": True, "command": command, **payload})

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=name, description=text, mime_type="application/json")
                for uri, (name, text, _read) in RESOURCES.items()
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in RESOURCES:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=types.INVALID_PARAMS, message=f"no resource {uri}")
        try:
            agent_store.fresh()
            body = {"ok": True, **RESOURCES[uri][2](agent_store)}
        except Exception as exc:
            body = {"ok": False, "error": _as_gc_error(exc).to_json()}
        text = json.dumps(body)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="application/json")]
        )

    server: Server[Any] = Server(
        NAME,
        version="0.1.0",
        instructions=(
            f"The gc-beads store of this project: mail, work threads, delivery items and "
            f"decisions. Every tool acts as the agent {agent_store.agent}; none takes a sender. "
            "Results and errors are gc's --json objects (error codes: invalid_input, "
            "invalid_transition, not_found, conflict, lease_conflict, storage_error)."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    # The SDK's OpenTelemetry middleware makes a span per message: nothing here exports them,
    # and a stdio call pays for it on both sides of every tool call.
    server.middleware.clear()
    return server


async def wait_reply(agent_store: AgentStore, args: Any) -> dict[str, Any]:
    """`gc thread wait-reply --json`, cancellable: one look now, then one each time the branch
    moves, until a reply comes or `timeout_seconds` pass (`woke: false`)."""
    watch = BranchWatch(agent_store.root)
    watch.moved()  # before the first look: a commit made after it is seen moving the branch
    look = {"thread_id": args.thread_id, "kinds": args.kinds, "lease_token": args.lease_token}
    wake = agent_store.thread_wait_step(
        after_event=args.after_event, after_message=args.after_message, **look
    )
    deadline = anyio.current_time() + args.timeout_seconds
    try:
        while not wake.woke:
            left = deadline - anyio.current_time()
            if left <= 0:
                break
            await anyio.sleep(min(POLL, left))
            if watch.moved():
                agent_store.fresh()
                wake = agent_store.thread_wait_step(after_event=wake.next_event_id, **look)
    except anyio.get_cancelled_exc_class():
        # By the client, or by the end of its input once the grace ran out.
        print(f"gc mcp: {WAIT_TOOL} was cancelled before a reply came", file=sys.stderr, flush=True)
        raise
    return {
        "woke": wake.woke,
        "next_event_id": wake.next_event_id,
        "message": wake.message.to_json() if wake.message else None,
        "origin": agent_store.thread_origin(wake.message),
    }


def _listed(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=schema(tool),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only, destructive_hint=False, open_world_hint=False
        ),
    )


def _result(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))], structured_content=body
    )


def _failure(command: str, error: GcError) -> types.CallToolResult:
    body = {"ok": False, "command": command, "error": error.to_json()}
    result = _result(body)
    result.is_error = True
    return result


def _as_gc_error(exc: Exception) -> GcError:
    """The error object a failure shows, as the CLI words it: gc's own errors as they are,
    a full disk or an unwritable store as a storage error, anything else as an internal
    error in one line."""
    if isinstance(exc, GcError):
        return exc
    import sqlite3

    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return StorageError(f"{exc.strerror or exc}{where}")
    if isinstance(exc, sqlite3.Error):
        return StorageError(f"index error: {exc}")
    return GcError(f"internal error: {type(exc).__name__}: {exc}")


def serve(agent_store: AgentStore) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes stdin and every
    request read from it is answered, or until it stops reading stdout (`BrokenPipeError`)."""
    from mcp.server.stdio import stdio_server

    if sys.stdout is None:  # started with stdout closed (`gc mcp >&-`): no answer can be given
        raise BrokenPipeError(errno.EPIPE, "no stdout to answer on")
    server = build_server(agent_store)
    # The wire is read from a descriptor of its own; fd 0 becomes the null device, as the
    # SDK's own reader leaves it, so a program the server runs reads nothing of the client's.
    wire = os.dup(0)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)

    # The client's end of stdout, written and watched from a descriptor of its own; fd 1
    # points at stderr while the server serves, so stray output (a program the server runs)
    # misses the wire, as the SDK's own writer arranges it.
    answers_out = os.dup(1)
    gone = False

    async def main() -> None:
        nonlocal gone
        lines = CheckedLines(wire_lines(wire), grace=_grace())
        async with anyio.create_task_group() as session:

            async def watch() -> None:
                nonlocal gone
                await reader_gone(answers_out)
                gone = True
                session.cancel_scope.cancel()  # the server and its reading of stdin

            session.start_soon(watch)
            try:
                out = WireWriter(answers_out)
                async with stdio_server(stdin=lines, stdout=out) as (read, write):  # type: ignore[arg-type]
                    answers = lines.answer_with(write)
                    await server.run(read, answers, server.create_initialization_options())
            except* BrokenPipeError:  # the SDK's writer, the client's end of stdout closed
                gone = True
            session.cancel_scope.cancel()  # the session is over: nothing more to watch

    try:
        _divert_stdout()
        anyio.run(main)
    finally:
        os.dup2(answers_out, 1)
        os.close(answers_out)
        os.close(wire)
    if gone:
        # As any command's reader that went away (`gc bead list | head`): not our error, and
        # nothing left to tell it: the CLI's handler ends quietly with exit 0.
        raise BrokenPipeError(errno.EPIPE, "the client stopped reading")


def _divert_stdout() -> None:
    """Point fd 1 at stderr (at the null device when there is none)."""
    try:
        os.dup2(2, 1)
    except OSError:
        nothing = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nothing, 1)
        os.close(nothing)


class WireWriter:
    """Where the SDK's writer puts each answer (its `stdout`): written to `fd`, the client's end
    of stdout, on the event loop. The SDK's own writer hands each write and each flush to a
    worker thread, two hand-offs per answer that a busy machine makes slow. A write never
    holds the loop: an answer that fits in the client's pipe, found empty (the client read
    all before), goes in one write; any other in pieces of at most `PIPE_BUF` bytes, each once
    `fd` has room (a pipe or socket with room takes such a piece whole), waited for on the
    event loop. A file always has room. A reader that went away makes the write raise
    BrokenPipeError."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.room = select.poll()
        self.room.register(fd, select.POLLOUT)
        self.pipe_size = 0  # what a pipe holds; 0 for anything else
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            with contextlib.suppress(OSError):
                self.pipe_size = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)

    async def write(self, text: str) -> None:
        """Write `text` (a line of JSON) whole."""
        data = memoryview(text.encode("utf-8"))
        if len(data) <= self.pipe_size and self._unread() == 0:
            data = data[os.write(self.fd, data) :]  # all of it: the pipe has room for it
        while data:
            if not self.room.poll(0):  # full, not gone: POLLERR and POLLHUP come unasked
                await anyio.wait_writable(self.fd)
            data = data[os.write(self.fd, data[: select.PIPE_BUF]) :]

    async def flush(self) -> None:
        """Nothing is held back: each write went out whole."""

    def _unread(self) -> int:
        """The bytes in the pipe the client has not read yet (-1 when that cannot be told)."""
        try:
            held = fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4)
        except OSError:
            return -1
        return int.from_bytes(held, sys.byteorder, signed=True)


async def wire_lines(fd: int) -> AsyncIterator[bytes]:
    """The lines read from `fd` (stdin), each with its newline but the last when it has none,
    until its end. A pipe, socket or terminal is waited on on the event loop, so a cancel
    ends the reading at once though the client sends nothing (a read in a thread, the SDK's
    way, cannot be ended); a file is read as it is (it never keeps a read waiting)."""
    waits = True
    buffer = bytearray()
    while True:
        if waits:
            try:
                await anyio.wait_readable(fd)
            except PermissionError:  # a file or the null device: nothing to wait on
                waits = False
        if not waits:
            await checkpoint()
        chunk = os.read(fd, READ_SIZE)
        if not chunk:
            break
        start, searched = 0, len(buffer)  # a line starts at 0; no newline before `searched`
        buffer += chunk
        while (end := buffer.find(b"\n", searched)) != -1:
            yield bytes(buffer[start : end + 1])
            start = searched = end + 1
        del buffer[:start]
    if buffer:
        yield bytes(buffer)


async def reader_gone(fd: int) -> None:
    """Return once what is written to `fd` (stdout) can reach no one: a pipe whose reading
    end is closed (`POLLERR`), a socket or terminal hung up (`POLLHUP`). Looks every
    `READER_CHECK` seconds; never returns for a file."""
    poll = select.poll()
    poll.register(fd, 0)  # no events asked for: only those always told (error, hang-up)
    while not any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0)):
        await anyio.sleep(READER_CHECK)


def _grace() -> float:
    """The seconds of `GRACE`, or those $GC_MCP_GRACE names (a test's)."""
    try:
        return max(0.0, float(os.environ[GRACE_ENV]))
    except (KeyError, ValueError):
        return GRACE


class CheckedLines:
    """The client's lines for the SDK's reader, each checked first. A line the SDK would drop
    without a word (not UTF-8, not JSON, a lone surrogate such as `\\ud800`, not a JSON-RPC
    message, an id that is neither a string nor an integer) or that it would read as another
    (an object giving a key twice, of which it would keep the last) is answered here with JSON-RPC's
    error (`-32700` parse error, `-32600` invalid request; the request's id when it has a
    usable one, else null), so a client never waits for an answer that cannot come.

    The end of the input is held back until every request passed on has been answered or
    cancelled by the client, for at most `grace` seconds: at that end the SDK ends its
    session, cancelling each request still being served (one not started yet is never
    answered at all), so a client that pipes its requests and closes its end would lose
    answers, and not know whether a write it asked for was made. A request the client cancels
    (`notifications/cancelled`) is not waited for: MCP sends no answer to it. What still runs
    after the grace (a long wait) is left to the SDK's cancellation: its client went away."""

    def __init__(self, source: AsyncIterator[bytes], grace: float = GRACE) -> None:
        self.source = source
        self.grace = grace
        self.write: Any = None
        self.ready = anyio.Event()
        # Requests passed on and not yet answered, by id as the SDK correlates them ("7" is
        # 7); a count, as a client may reuse an id while its first request is served.
        self.unanswered: Counter[types.RequestId] = Counter()
        self.drained = anyio.Event()

    def answer_with(self, write: Any) -> Answers:
        """Where refusals go: the stream the SDK writes to stdout. Returns that stream for the
        server, noting each answer it carries."""
        self.write = write
        self.ready.set()
        return Answers(write, self)

    def settled(self, ident: types.RequestId) -> None:
        """The request `ident` was answered, or cancelled by the client: one fewer to wait
        for (none when it is no request passed on or already settled)."""
        key = coerce_request_id(ident)
        if self.unanswered[key] > 1:
            self.unanswered[key] -= 1
            return
        self.unanswered.pop(key, None)
        if not self.unanswered:
            self.drained.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in self.source:
            if not raw.strip():
                continue  # a blank line says nothing
            outcome = checked(raw)
            if isinstance(outcome, tuple):
                text, message = outcome
                self._passing_on(message)
                yield text
                continue
            await self.ready.wait()
            await self.write.send(SessionMessage(outcome))
        self.drained = anyio.Event()  # set by the answer that leaves none unanswered
        if self.unanswered:
            with anyio.move_on_after(self.grace):
                await self.drained.wait()

    def _passing_on(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self.unanswered[coerce_request_id(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled":
                ident = cancelled_request_id_from_params(message.params)
                if ident is not None:
                    self.settled(ident)


class Answers:
    """The stream the server writes to stdout through, telling `CheckedLines` of each answer
    once the SDK's writer has taken it (that writer writes all it took before it ends)."""

    def __init__(self, stream: Any, lines: CheckedLines) -> None:
        self.stream = stream
        self.lines = lines

    async def send(self, item: SessionMessage) -> None:
        """Hand `item` to the writer; an answer settles its request."""
        await self.stream.send(item)
        message = item.message
        answer = isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
        if answer and message.id is not None:
            self.lines.settled(message.id)

    async def aclose(self) -> None:
        """Close the stream: the writer ends once it has written what it took."""
        await self.stream.aclose()

    async def __aenter__(self) -> Answers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# Every object of a message as a dict, refusing one that gives a key twice (the SDK's parser
# would keep the last, so `"method":"ping","method":"tools/list"` would be served as the latter).
_UNIQUE = unique_keys("the message")


def checked(raw: bytes) -> tuple[str, types.JSONRPCMessage] | types.JSONRPCError:
    """One line of the client's: as text with the message it is (as the SDK reads it), or
    the JSON-RPC error that answers it when it is no message the server can take."""
    from pydantic import ValidationError

    try:
        text = raw.decode("utf-8")
        try:
            data = json.loads(text, object_pairs_hook=_UNIQUE)
        except InvalidInput as twice:  # which of the key's values is meant cannot be told
            # Read again to the end (a line that is no JSON past the key is a parse error).
            members = json.loads(text, object_pairs_hook=_Pairs)
            said = f"Invalid Request: {twice}"
            return _refusal(_sole_id(members), types.INVALID_REQUEST, said)
    except UnicodeDecodeError:
        return _refusal(None, types.PARSE_ERROR, "Parse error: the line is not UTF-8")
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
        return _refusal(None, types.PARSE_ERROR, f"Parse error: {reason}")
    if not isinstance(data, dict):
        return _refusal(None, types.INVALID_REQUEST, "Invalid Request: not a JSON object")
    ident = data.get("id")
    usable = type(ident) is int or isinstance(ident, str)
    if "id" in data and not usable:
        said = "Invalid Request: an id is a string or an integer"
        return _refusal(None, types.INVALID_REQUEST, said)
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":  # what Python's parser lets through
            said = f"Parse error: {first['msg'].removeprefix('Invalid JSON: ')}"
            if _lone_surrogate(data):
                said = "Parse error: a string holds a lone surrogate (\\ud800 without its pair)"
            return _refusal(ident, types.PARSE_ERROR, said)
        said = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
        return _refusal(ident, types.INVALID_REQUEST, said)
    return text, message


class _Pairs(list):  # type: ignore[type-arg]
    """An object's members in order, keys repeated and all (what `_sole_id` reads)."""


def _sole_id(message: Any) -> Any:
    """The id of a message read as `_Pairs` when it gives one usable id (the client waits for
    an answer to it), else None."""
    if not isinstance(message, _Pairs):
        return None
    ids = [value for key, value in message if key == "id"]
    usable = len(ids) == 1 and (type(ids[0]) is int or isinstance(ids[0], str))
    return ids[0] if usable else None


def _lone_surrogate(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refusal(ident: Any, code: int, message: str) -> types.JSONRPCError:
    error = types.ErrorData(code=code, message=message)
    try:
        return types.JSONRPCError(jsonrpc="2.0", id=ident, error=error)
    except ValueError:  # an id the SDK cannot write back (an integer past 64 bits)
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
