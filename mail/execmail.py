"""The exec provider: a user's program speaking the exec mail protocol of Gas City's `gc`.

The program runs directly (no shell, no word splitting) once per operation as
`<program> <op> [arg]`. Stdin is empty except for `send <to>` and `reply <id>`, which get
exactly `{"from","subject","body"}`. `ensure-running` runs once per provider, its result
ignored. Stdout holds one JSON message (send, reply, get, read), a JSON array or nothing
(inbox, check, all, thread), `{"total":N,"unread":N}` (count), or nothing. Exit 0 is success,
exit 2 "operation not supported" (a no-op where the operation returns nothing, an error where
a result is needed), anything else an error carrying the program's stderr, in which
`already archived` and `gc-mail-error:not-found` mean AlreadyArchived and MessageNotFound.
Each call runs in a process group of its own, killed with everything in it only when the call
runs out of time: a server `ensure-running` starts (`server &`) outlives the call, as under
gc, and output is read until the program exits, never until a child lets go of the pipes. A
command has one time budget
(30 s): `ensure-running` and the operation share it. Output that breaks the protocol (invalid
JSON, a malformed message, a number like 1e400, another message than the one `get` or `read`
asked for) is invalid input (exit 30); in a list, only the malformed message is skipped,
with a warning (so is one nested deeper than Python's JSON reader recurses: a listing's
elements are then read one by one).
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from beads.errors import InvalidInput, NotFound
from beads.process import OutputTooLarge, not_started, run_bounded
from beads.records.record import shown
from mail.message import (
    AlreadyArchived,
    Message,
    MessageNotFound,
    OutOfRange,
    ProviderError,
    TimedOut,
)
from mail.provider import Counts, Provider

DEFAULT_TIMEOUT = 30.0
MAX_OUTPUT = 16 * 1024 * 1024  # a mailbox listing larger than this is a misbehaving program
UNSUPPORTED = 2
log = logging.getLogger("gc.mail")


class BadOutput(ProviderError):
    """The program's output breaks the protocol (invalid JSON, a malformed message): invalid
    input to gc (exit 30), not a failure of gc's own."""

    code = "invalid_input"
    exit_code = 30


class ExecMail(Provider):
    """Mail through a user's program."""

    name = "exec"  # declares no capabilities: the protocol has no priority, archive or agents

    def __init__(
        self,
        program: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        config: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if not program:
            raise InvalidInput("exec mail provider needs a program: GC_MAIL=exec:<program>")
        self.program = program
        self.timeout = timeout
        self._config = config
        self._started = False
        self.unsupported: list[str] = []  # operations answered "not supported" (`change`)

    def settings(self) -> dict[str, Any]:
        """config.yaml, when there is a store (`mail.strict_recipients`, its agents and rigs
        hold under exec too); `{}` without one: the program alone decides."""
        if self._config is None:
            return {}
        try:
            return self._config()
        except NotFound:
            return {}

    # -- the protocol ------------------------------------------------------------------------

    def send(
        self,
        sender: str,
        to: str,
        subject: str,
        body: str,
        *,
        cc: Sequence[str] = (),
        priority: int = 2,
        dedup: str | None = None,
    ) -> Message:
        if dedup:
            raise InvalidInput("--dedup needs the beadmail provider (exec mail has no dedup keys)")
        payload = {"from": sender, "subject": subject, "body": body}
        deadline = time.monotonic() + self.timeout  # one budget for every copy
        sent = self._message("send", to, payload, deadline)
        # The protocol carries no cc: each cc recipient gets a copy of their own.
        for other in dict.fromkeys(cc):
            if other != to:
                self._message("send", other, payload, deadline)
        return sent

    def reply(self, message_id: str, sender: str, subject: str, body: str) -> Message:
        # No subject is passed on as none, as gc does: the program decides what a reply's
        # subject is (beadmail's default, `Re: <original>`, is beadmail's own).
        payload = {"from": sender, "subject": subject, "body": body}
        return self._message("reply", message_id, payload)

    def inbox(self, recipient: str) -> list[Message]:
        return self._messages("inbox", recipient)

    def check(self, recipient: str) -> list[Message]:
        return self._messages("check", recipient)

    def all(self, recipient: str) -> list[Message]:
        return self._messages("all", recipient)

    def thread(self, thread_id: str) -> list[Message]:
        return self._messages("thread", thread_id)

    def get(self, message_id: str) -> Message:
        return self._asked("get", message_id)

    def read(self, message_id: str) -> Message:
        return self._asked("read", message_id)

    def mark_read(self, message_id: str) -> None:
        self._change("mark-read", message_id)

    def mark_unread(self, message_id: str) -> None:
        self._change("mark-unread", message_id)

    def archive(self, message_id: str) -> None:
        self._change("archive", message_id)

    def delete(self, message_id: str) -> None:
        self._change("delete", message_id)

    def change(self, op: str, ids: list[str]) -> dict[str, list[str]]:
        """As `Provider.change`, with a warning for each operation the program answered
        "not supported" (exit 2): gc prints its usual line, and so do we, but nothing
        changed, and the caller is told so."""
        self.unsupported.clear()
        result = super().change(op, ids)
        result["warnings"] = [
            f"{name} is not supported by {self.program}; nothing changed"
            for name in dict.fromkeys(self.unsupported)
        ]
        return result

    def _change(self, op: str, message_id: str) -> None:
        if self._call(op, message_id) is None:
            self.unsupported.append(op)

    def count(self, recipient: str) -> Counts:
        out = self._call("count", recipient)
        data = _json(out, self.program, "count") if out is not None else None
        if data is None:  # not supported, or nothing printed: an empty mailbox, as gc reads it
            return Counts(0, 0)
        try:
            # As gc decodes it: a missing field is 0, other fields are ignored.
            total, unread = data.get("total", 0), data.get("unread", 0)
            if not (type(total) is int and type(unread) is int and total >= 0 and unread >= 0):
                raise ValueError("not counts")
            return Counts(total, unread)
        except (AttributeError, ValueError):
            raise BadOutput(
                f'{self.program} count printed {_preview(out)}, not {{"total":N,"unread":N}}'
            ) from None

    # -- running the program -----------------------------------------------------------------

    def _message(
        self, op: str, arg: str, payload: dict[str, str] | None = None, deadline: float = 0.0
    ) -> Message:
        out = self._call(op, arg, payload, deadline)
        if out is None:
            raise ProviderError(f"{self.program} does not support '{op}' (exit 2)")
        return self._parsed(op, out)

    def _asked(self, op: str, message_id: str) -> Message:
        """The message `op` (`get`, `read`) answers for `message_id`: the protocol passes the
        id whole and the answer is that message (Gas City's conformance checks its id), so
        another id is a misbehaving program (BadOutput), never shown as if asked for."""
        found = self._message(op, message_id)
        if found.id != message_id:
            asked = _named(message_id)
            raise BadOutput(
                f"{self.program} {op} {asked} printed message {_named(found.id)}, not {asked}: "
                "the program must answer with the message asked for"
            )
        return found

    def _parsed(self, op: str, out: bytes) -> Message:
        data = _json(out, self.program, op)
        if data is None:
            raise ProviderError(f"{self.program} {op} printed no message")
        try:
            return Message.from_json(data)
        except ProviderError as exc:
            raise BadOutput(f"{self.program} {op}: {exc.message}") from None

    def _messages(self, op: str, arg: str) -> list[Message]:
        out = self._call(op, arg)
        data = _json(out, self.program, op, listing=True) if out is not None else None
        if data is None:
            return []
        if not isinstance(data, list):
            raise BadOutput(f"{self.program} {op} printed {_preview(out)}, not a JSON array")
        messages = []
        for item in data:
            # One malformed message is skipped with a warning: the others are still listed
            # (and, from the hook, still announced).
            try:
                if isinstance(item, TooDeep):
                    raise ProviderError("nested too deeply to read")
                messages.append(Message.from_json(item))
            except ProviderError as exc:
                given = item.get("id") if isinstance(item, dict) else None
                if isinstance(item, TooDeep):
                    given = item.id
                which = f" {_named(given)}" if isinstance(given, str) else ""
                log.warning("gc: warning: skipped message%s, which %s %s returned malformed: %s",
                            which, self.program, op, exc.message)  # fmt: skip
        return messages

    def _call(
        self, op: str, arg: str | None = None, payload: Any = None, deadline: float = 0.0
    ) -> bytes | None:
        """Run one operation; its stdout, or None when the program says "not supported".

        `ensure-running` (first call only) and the operation share one time budget, from
        `deadline` when the caller gives one (a send to several recipients)."""
        deadline = deadline or time.monotonic() + self.timeout
        if not self._started:
            self._started = True
            try:
                self._run("ensure-running", None, None, deadline)
            except ProviderError as exc:
                if time.monotonic() >= deadline:
                    raise exc from None  # nothing left of the budget for the operation
                # otherwise its result is ignored by the protocol; the real call will report
        code, out, err = self._run(op, arg, payload, deadline)
        if code == 0:
            return out
        if code == UNSUPPORTED:
            return None
        detail = " ".join(err.decode("utf-8", "replace").split())
        if "gc-mail-error:not-found" in detail:
            if op in MESSAGE_OPS:
                raise MessageNotFound.of(arg or "")
            # a recipient's or a thread's operation: what was not found is not a message
            raise NotFound(f"{self.program} {op} {shown(arg or '')}: not found")
        if op in ("archive", "delete") and "already archived" in detail.lower():
            raise AlreadyArchived(f"Already archived {arg}", id=arg)
        raise ProviderError(
            f"{self.program} {op} failed ({_status(code)}): {detail[:300] or 'no error output'}"
        )

    def _run(
        self, op: str, arg: str | None, payload: Any, deadline: float
    ) -> tuple[int, bytes, bytes]:
        argv = [self.program, op] + ([arg] if arg is not None else [])
        stdin = go_json(payload) if payload is not None else b""
        try:
            return run_bounded(
                argv,
                deadline - time.monotonic(),
                stdin=stdin,
                max_output=MAX_OUTPUT,
                leave_children=True,  # a server `ensure-running` starts lives on, as under gc
            )
        except OSError as exc:
            why = not_started(self.program, exc)
            raise ProviderError(f"mail program {self.program} {why}") from None
        except subprocess.TimeoutExpired:
            raise TimedOut(
                f"{self.program} {op} timed out after {self.timeout:g}s and was killed"
            ) from None
        except OutputTooLarge:
            raise ProviderError(
                f"{self.program} {op} printed more than {MAX_OUTPUT >> 20} MiB; killed"
            ) from None


# The operations whose argument is a message id (the others take a recipient or a thread).
MESSAGE_OPS = frozenset({"get", "read", "reply", "mark-read", "mark-unread", "archive", "delete"})


def _named(message_id: str) -> str:
    """An id the program gave, as a warning names it: as it is when printable, else quoted
    with its control characters escaped (a warning never clears the screen); cut short."""
    if message_id.isprintable() and len(message_id) <= 80:
        return message_id
    return shown(message_id, 80)


def _status(code: int) -> str:
    """`exit 3`, or `killed by SIGKILL` for a program a signal ended (a negative code)."""
    if code >= 0:
        return f"exit {code}"
    import signal

    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def go_json(payload: dict[str, str]) -> bytes:
    """JSON as Go's encoding/json writes it, so scripts see the bytes gc would send them:
    compact, no trailing newline, UTF-8, with <, >, &, U+2028 and U+2029 escaped."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text.encode("utf-8")


def _json(out: bytes, program: str, op: str, listing: bool = False) -> Any:
    """The program's output parsed; None when it printed nothing. In a `listing`, a message
    nested deeper than the reader recurses is a `TooDeep` in its place, the others parsed."""
    out = out.rstrip(b"\n")  # as gc: only trailing newlines are trimmed
    if not out:
        return None
    try:
        try:
            return _loads(out)
        except RecursionError:  # the reader recurses once per nested array or object
            if not listing:
                raise BadOutput(
                    f"{program} {op} printed JSON nested too deeply to read: {_preview(out)}"
                ) from None
            return _elements(out.decode(json.detect_encoding(out)))
    except (ValueError, UnicodeDecodeError):
        raise BadOutput(f"{program} {op} printed invalid JSON: {_preview(out)}") from None


def _loads(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_not_a_number, parse_float=_float, parse_int=_int)


class TooDeep:
    """A listed message nested too deeply to read, in its place in the listing, with its id
    when that can be read."""

    def __init__(self, message_id: str | None) -> None:
        self.id = message_id


_SPACE = " \t\n\r"  # JSON's whitespace

# What moves the depth of JSON text: its strings (skipped whole: a bracket in one is text),
# runs of opening or of closing brackets, and commas.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+|,', re.DOTALL)


def _entries(text: str, start: int) -> tuple[list[str], int]:
    """The top-level entries, as text, of the array or object opening at `text[start]` (an
    object's as `"key": value`), and where it closes; ValueError if it never closes."""
    closing = "]" if text[start] == "[" else "}"
    depth, begin, entries = 0, start + 1, []
    for token in _TOKEN.finditer(text, start):
        run = token.group()
        if run[0] in "[{":
            depth += len(run)
        elif run[0] in "]}":
            if len(run) < depth:
                depth -= len(run)
                continue
            end = token.start() + depth  # just past the bracket that closes the container
            if text[end - 1] != closing:
                raise ValueError("closed with the wrong bracket")
            entries.append(text[begin : end - 1])
            empty = len(entries) == 1 and not entries[0].strip(_SPACE)
            return ([] if empty else entries), end
        elif run == "," and depth == 1:  # a comma between two entries
            entries.append(text[begin : token.start()])
            begin = token.end()
    raise ValueError("never closes")


def _elements(text: str) -> list[Any]:
    """A JSON array read one element at a time: an element nested too deeply to read becomes a
    `TooDeep`; ValueError when `text` is not one array of JSON values (a too-deep element's
    own insides are not checked: it is skipped either way)."""
    start = len(text) - len(text.lstrip(_SPACE))
    if not text.startswith("[", start):
        raise ValueError("not an array")
    entries, end = _entries(text, start)
    if text[end:].strip(_SPACE):
        raise ValueError("text after the array")
    elements: list[Any] = []
    for entry in entries:
        try:
            elements.append(_loads(entry))
        except RecursionError:
            elements.append(TooDeep(_deep_id(entry)))
    return elements


def _deep_id(entry: str) -> str | None:
    """The "id" of an object nested too deeply to read whole, read from its own members."""
    start = len(entry) - len(entry.lstrip(_SPACE))
    if not entry.startswith("{", start):
        return None
    try:
        members, _ = _entries(entry, start)
    except ValueError:
        return None
    for member in members:
        try:
            given = _loads("{" + member + "}").get("id")
        except (ValueError, RecursionError):
            continue
        if isinstance(given, str):
            return given
    return None


def _not_a_number(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")  # NaN, Infinity: Python's extension, not JSON


def _float(text: str) -> Any:
    # 1e400 would be inf: kept as a value no field accepts, so only its message is refused.
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text)


def _int(text: str) -> Any:
    # Past 2**63 no field means it, and a few thousand digits make int() itself raise.
    return int(text) if len(text) <= 19 else OutOfRange(text)


def _preview(out: bytes, width: int = 80) -> str:
    text = " ".join(out.decode("utf-8", "replace").split())
    return repr(text if len(text) <= width else text[: width - 3] + "...")
