"""The exec provider: a user's program speaking the exec mail protocol of Gas City's `gc`.

The program runs directly (no shell, no word splitting) once per operation as
`<program> <op> [arg]`. Stdin is empty except for `send <to>` and `reply <id>`, which get
exactly `{"from","subject","body"}`. `ensure-running` runs once per provider, its result
ignored. Stdout holds one JSON message (send, reply, get, read), a JSON array or nothing
(inbox, check, all, thread), `{"total":N,"unread":N}` (count), or nothing. Exit 0 is success,
exit 2 "operation not supported" (a no-op where the operation returns nothing, an error where
a result is needed), anything else an error carrying the program's stderr, in which
`already archived` and `gc-mail-error:not-found` mean AlreadyArchived and MessageNotFound.
A call that outlives its timeout (30 s) is killed with everything it started.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

from beads.errors import InvalidInput
from mail.message import AlreadyArchived, Message, MessageNotFound, ProviderError
from mail.provider import Counts, Provider

DEFAULT_TIMEOUT = 30.0
MAX_OUTPUT = 16 * 1024 * 1024  # a mailbox listing larger than this is a misbehaving program
UNSUPPORTED = 2
# After the program exits, output still held open by a child it left running (a server
# started by ensure-running) is not waited for longer than this.
DRAIN_AFTER_EXIT = 0.2


class ExecMail(Provider):
    """Mail through a user's program."""

    name = "exec"
    carries_priority = False

    def __init__(self, program: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not program:
            raise InvalidInput("exec mail provider needs a program: GC_MAIL=exec:<program>")
        self.program = program
        self.timeout = timeout
        self._started = False

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
        sent = self._message("send", to, payload)
        # The protocol carries no cc: each cc recipient gets a copy of their own.
        for other in dict.fromkeys(cc):
            if other != to:
                self._message("send", other, payload)
        return sent

    def reply(self, message_id: str, sender: str, subject: str, body: str) -> Message:
        return self._message(
            "reply", message_id, {"from": sender, "subject": subject, "body": body}
        )

    def inbox(self, recipient: str) -> list[Message]:
        return self._messages("inbox", recipient)

    def check(self, recipient: str) -> list[Message]:
        return self._messages("check", recipient)

    def all(self, recipient: str) -> list[Message]:
        return self._messages("all", recipient)

    def thread(self, thread_id: str) -> list[Message]:
        return self._messages("thread", thread_id)

    def get(self, message_id: str) -> Message:
        return self._message("get", message_id)

    def read(self, message_id: str) -> Message:
        return self._message("read", message_id)

    def mark_read(self, message_id: str) -> None:
        self._call("mark-read", message_id)

    def mark_unread(self, message_id: str) -> None:
        self._call("mark-unread", message_id)

    def archive(self, message_id: str) -> None:
        self._call("archive", message_id)

    def delete(self, message_id: str) -> None:
        self._call("delete", message_id)

    def count(self, recipient: str) -> Counts:
        out = self._call("count", recipient)
        if out is None:
            return super().count(recipient)  # not supported: count the mailbox ourselves
        data = _json(out, self.program, "count")
        if data is None:
            return Counts(0, 0)
        try:
            return Counts(int(data["total"]), int(data["unread"]))
        except (TypeError, KeyError, ValueError):
            raise ProviderError(
                f'{self.program} count printed {_preview(out)}, not {{"total":N,"unread":N}}'
            ) from None

    # -- running the program -----------------------------------------------------------------

    def _message(self, op: str, arg: str, payload: dict[str, str] | None = None) -> Message:
        out = self._call(op, arg, payload)
        if out is None:
            raise ProviderError(f"{self.program} does not support '{op}' (exit 2)")
        data = _json(out, self.program, op)
        if data is None:
            raise ProviderError(f"{self.program} {op} printed no message")
        try:
            return Message.from_json(data)
        except ProviderError as exc:
            raise ProviderError(f"{self.program} {op}: {exc.message}") from None

    def _messages(self, op: str, arg: str) -> list[Message]:
        out = self._call(op, arg)
        data = _json(out, self.program, op) if out is not None else None
        if data is None:
            return []
        if not isinstance(data, list):
            raise ProviderError(f"{self.program} {op} printed {_preview(out)}, not a JSON array")
        try:
            return [Message.from_json(item) for item in data]
        except ProviderError as exc:
            raise ProviderError(f"{self.program} {op}: {exc.message}") from None

    def _call(self, op: str, arg: str | None = None, payload: Any = None) -> bytes | None:
        """Run one operation; its stdout, or None when the program says "not supported"."""
        if not self._started:
            self._started = True
            try:
                self._run("ensure-running", None, None)
            except ProviderError:
                pass  # its result is ignored by the protocol; the real call will report
        code, out, err = self._run(op, arg, payload)
        if code == 0:
            return out
        if code == UNSUPPORTED:
            return None
        detail = " ".join(err.decode("utf-8", "replace").split())
        if "gc-mail-error:not-found" in detail:
            raise MessageNotFound(f"no message {arg}")
        if "already archived" in detail.lower():
            raise AlreadyArchived(f"Already archived {arg}", id=arg)
        raise ProviderError(
            f"{self.program} {op} failed (exit {code}): {detail[:300] or 'no error output'}"
        )

    def _run(self, op: str, arg: str | None, payload: Any) -> tuple[int, bytes, bytes]:
        argv = [self.program, op] + ([arg] if arg is not None else [])
        stdin = go_json(payload) if payload is not None else b""
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, so a timeout kills it all
            )
        except FileNotFoundError:
            raise ProviderError(f"mail program not found: {self.program}") from None
        except PermissionError:
            raise ProviderError(f"mail program is not executable: {self.program}") from None
        except OSError as exc:
            raise ProviderError(f"cannot run mail program {self.program}: {exc}") from None
        writer = threading.Thread(target=_feed, args=(proc, stdin), daemon=True)
        writer.start()
        try:
            out, err = self._collect(proc, op)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        return proc.returncode, out, err

    def _collect(self, proc: subprocess.Popen[bytes], op: str) -> tuple[bytes, bytes]:
        assert proc.stdout is not None and proc.stderr is not None
        chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
        sizes = dict.fromkeys(chunks, 0)
        deadline = time.monotonic() + self.timeout
        exited_at: float | None = None
        with selectors.DefaultSelector() as selector:
            for pipe in (proc.stdout, proc.stderr):
                os.set_blocking(pipe.fileno(), False)
                selector.register(pipe.fileno(), selectors.EVENT_READ)
            while selector.get_map():
                now = time.monotonic()
                if now > deadline:
                    _kill_group(proc)
                    raise ProviderError(
                        f"{self.program} {op} timed out after {self.timeout:g}s and was killed"
                    )
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > DRAIN_AFTER_EXIT:
                    break
                for key, _ in selector.select(timeout=0.05):
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fd)
                        continue
                    chunks[key.fd].append(data)
                    sizes[key.fd] += len(data)
                    if sizes[key.fd] > MAX_OUTPUT:
                        _kill_group(proc)
                        raise ProviderError(
                            f"{self.program} {op} printed more than {MAX_OUTPUT >> 20} MiB; killed"
                        )
        return b"".join(chunks[proc.stdout.fileno()]), b"".join(chunks[proc.stderr.fileno()])


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


def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
    # In a thread: a program that never reads its stdin must not block us.
    assert proc.stdin is not None
    try:
        if data:
            proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _json(out: bytes, program: str, op: str) -> Any:
    if not out.strip():
        return None
    try:
        return json.loads(out)
    except (ValueError, UnicodeDecodeError):
        raise ProviderError(f"{program} {op} printed invalid JSON: {_preview(out)}") from None


def _preview(out: bytes, width: int = 80) -> str:
    text = " ".join(out.decode("utf-8", "replace").split())
    return repr(text if len(text) <= width else text[: width - 3] + "...")
