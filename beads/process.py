"""Running a user's program: never through a shell, bounded in time, children included.

The program gets a process group of its own. By default the whole group is killed when the
call ends: on time out, and also after a normal exit, so a child it left behind (holding our
pipes or not) never outlives the call; after the program exits, output still held open by
such a child is read for at most `DRAIN_AFTER_EXIT` seconds. With `leave_children` (an exec
mail program, whose `ensure-running` may start a server with a plain `server &`, as under Gas
City) the group is killed only when the call runs out of time, and output is read until the
program itself exits: what it wrote is then in the pipes, and a child still holding them is
never waited for.

A SIGTERM that would end gc while a program runs ends that program's group first (as git's
cleanup of its children does), then gc, by the same signal: a `timeout` or a supervisor that
stops gc never leaves the program it ran behind. In a command that waits
(`beads.waiting.terminable`: `gc gate watch` runs checks), gc then ends as the wait does
(`Termination`: `gc: terminated`, exit 143).

A command that runs several programs (a check per session gate, a `gh` per bead gate) runs
them inside `budget(seconds)`: they share that time, so ten hanging checks cost one timeout.
A program whose turn comes once that time is spent is not started (`BudgetSpent`).

A program run inside `reaping()` leaves nothing behind, not even what escaped its group
with `setsid`: on Linux this process is made a child subreaper for the block, so whatever
the program left running comes back to it as a child, and is killed with all it started.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from contextvars import ContextVar
from pathlib import Path

from beads import files

TYPE_CHECKING = False  # the Stop hook imports this module, and never typing
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

DRAIN_AFTER_EXIT = 0.2
# While the program runs, how often to look whether it exited with its pipes held by a child.
_POLL = 0.05


_deadline: ContextVar[float | None] = ContextVar("gc_process_deadline", default=None)


class BudgetSpent(subprocess.TimeoutExpired):
    """The program was not started: the `budget` it shares was spent before its turn."""


class OutputTooLarge(Exception):
    """The program printed more than the caller allows (it has been killed)."""


class _Terminated(BaseException):
    """SIGTERM arrived while a program ran: its group is killed on the way out."""


class _Termination:
    """SIGTERM while this process runs a program. It unwinds the caller only once the
    caller's cleanup is in place (`arm`, the first step inside its `try`): a signal that
    comes earlier (right after the program started, the process not yet scheduled again) is
    kept, and raised by `arm`."""

    def __init__(self) -> None:
        self.asked = False
        self.armed = False

    def handle(self, _signum: int, _frame: object) -> None:
        self.asked = True
        if self.armed:
            raise _Terminated

    def arm(self) -> None:
        self.armed = True
        if self.asked:
            raise _Terminated


@contextlib.contextmanager
def _group_ends_with_us() -> Iterator[_Termination]:
    """While the caller runs a program: a SIGTERM that would end this process (nobody else
    handles it) unwinds it instead, so the caller's cleanup kills the program's group; then
    this process ends by SIGTERM after all, as it would have."""
    termination = _Termination()
    before = None  # the handler taken over: the default, or a wait's
    try:
        found = signal.getsignal(signal.SIGTERM)
        if found == signal.SIG_DFL or _ends_a_wait(found):
            signal.signal(signal.SIGTERM, termination.handle)
            before = found
    except ValueError:  # not the main thread: signals are the main thread's to handle
        pass
    try:
        yield termination
    except _Terminated:
        pass
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)
    if termination.asked:  # the program's group is gone: end as SIGTERM would have
        if before is not None and before != signal.SIG_DFL:
            from beads.errors import Termination

            raise Termination  # a wait's: it ends the command in one line
        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM)  # (if it was not delivered yet)


def _ends_a_wait(handler: object) -> bool:
    """Whether `handler` is the SIGTERM handler of a wait (`beads.waiting.terminable`)."""
    import sys

    waiting = sys.modules.get("beads.waiting")  # not loaded: no wait installed a handler
    return waiting is not None and isinstance(handler, waiting.Terminable)


def run_bounded(
    argv: list[str],
    timeout: float,
    cwd: Path | None = None,
    *,
    stdin: bytes = b"",
    max_output: int | None = None,
    leave_children: bool = False,
) -> tuple[int, bytes, bytes]:
    """Run `argv` with `stdin` as its input; returns `(exit code, stdout, stderr)`.

    Past `timeout` the program's group is killed and TimeoutExpired raised (BudgetSpent, one
    of them, when the `budget` was spent before it started: it never ran); past `max_output`
    bytes on either stream, OutputTooLarge. OSError (missing, not executable) propagates for
    the caller to word. With `leave_children`, what the program started outlives a call that
    ends in time (see the module's docstring).
    """
    deadline = _deadline.get()
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BudgetSpent(argv, 0)
        timeout = min(timeout, left)
    if timeout <= 0:
        raise subprocess.TimeoutExpired(argv, 0)
    with _group_ends_with_us() as termination:
        return _run_in_group(argv, timeout, cwd, stdin, max_output, leave_children, termination)


def _run_in_group(
    argv: list[str],
    timeout: float,
    cwd: Path | None,
    stdin: bytes,
    max_output: int | None,
    leave_children: bool,
    termination: _Termination,
) -> tuple[int, bytes, bytes]:
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        umask=files.started_umask(),
    )
    finished = False
    try:
        termination.arm()  # a SIGTERM from here on kills the group first (`finally`)
        out, err, finished = _collect(
            process, stdin, time.monotonic() + timeout, max_output, 0.0 if leave_children else None
        )
    finally:
        # Killed while the program's pid (running, or exited but not yet reaped) still names
        # the group, so the signal can never reach another process that reused the number.
        if not (leave_children and finished):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    if not finished:
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
    return process.returncode, out, err


def not_started(program: str, exc: OSError) -> str:
    """Why `program` could not be started (`exc`, from starting it), worded to end the
    sentence "PROGRAM ...": `was not found`; `names an interpreter that was not found: /x`
    (its #! line; the OS says only "No such file or directory"); `is a directory, not a
    program` (the OS says "Permission denied"); `is not executable`; `cannot be run here (a
    script needs a #! line)` (the OS's "Exec format error")."""
    import errno
    import shutil

    path = program if os.sep in program else shutil.which(program)
    if isinstance(exc, FileNotFoundError):
        interpreter = _interpreter(path) if path else None
        if interpreter:
            return f"names an interpreter that was not found: {interpreter} (its #! line)"
        return "was not found"
    if path and os.path.isdir(path):
        return "is a directory, not a program"
    if isinstance(exc, PermissionError):
        return "is not executable"
    if exc.errno == errno.ENOEXEC:
        return "cannot be run here (a script needs a #! line)"
    return f"cannot be run: {exc.strerror or exc}"


def _interpreter(path: str) -> str | None:
    """The program a script's #! line names, if `path` is a readable file that has one."""
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return None
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    return words[0].decode("utf-8", "replace") if words else None


# prctl(2) options: make this process the reaper of its orphaned descendants, and ask.
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
REAP_WAIT = 2.0  # seconds to wait for what was killed to be gone


@contextlib.contextmanager
def reaping() -> Iterator[None]:
    """Every process that becomes a child of this one during the block (what a program run in
    it left running, reparented here) is killed at its end, with everything it started.

    On Linux this process is a child subreaper for the block (`PR_SET_CHILD_SUBREAPER`), so a
    program's leftovers come back to it even from a session of their own (`setsid`) rather
    than to init. Where that is not available (another system, no libc), nothing is done."""
    prctl = _prctl()
    was = _subreaper(prctl, None)
    if was is None or not _subreaper(prctl, True):
        yield
        return
    me = os.getpid()
    before = {pid: start for pid, (parent, start) in _processes().items() if parent == me}
    try:
        yield
    finally:
        try:
            _end_leftovers(me, before)
        finally:
            _subreaper(prctl, was)


def _prctl() -> Any:
    """libc's prctl, or None."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        import ctypes  # lazy: only a program run to be reaped needs it

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def _subreaper(prctl: Any, on: bool | None) -> bool | None:
    """Set this process's child-subreaper flag to `on` (True: done), or with None read it;
    None when prctl refuses or is missing."""
    if prctl is None:
        return None
    import ctypes

    if on is None:
        flag = ctypes.c_int(0)
        if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return None
        return bool(flag.value)
    return prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0 or None


def _processes() -> dict[int, tuple[int, int]]:
    """Every process: pid -> (parent pid, start time), from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = (
                    stat.read().rpartition(b")")[2].split()
                )  # after the name, which may hold anything
            table[int(name)] = (int(fields[1]), int(fields[19]))  # ppid, starttime (stat(5))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return table


def _end_leftovers(me: int, before: dict[int, int]) -> None:
    """Kill and reap the children of `me` not in `before` (pid -> start time), and all they
    started; what a killed one left is reparented here, so until none is left."""
    until = time.monotonic() + REAP_WAIT
    while time.monotonic() < until:
        table = _processes()
        leftovers = [
            pid
            for pid, (parent, start) in table.items()
            if parent == me and before.get(pid) != start
        ]
        if not leftovers:
            return
        children: dict[int, list[int]] = {}
        for pid, (parent, _start) in table.items():
            children.setdefault(parent, []).append(pid)
        doomed = list(leftovers)
        for pid in doomed:  # grows as it goes: each one's children, theirs, ...
            doomed += children.get(pid, [])
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in leftovers:
            _reap(pid, until)


def _reap(pid: int, until: float) -> None:
    """Wait for child `pid` (killed) to end, until `until` at most."""
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= until:
            return
        time.sleep(0.005)


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[None]:
    """Every `run_bounded` in the block ends within `seconds` from now, all of them together
    (each still within its own timeout); an inner budget never outlasts an outer one."""
    outer = _deadline.get()
    deadline = time.monotonic() + seconds
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield
    finally:
        _deadline.reset(token)


def _collect(
    process: subprocess.Popen[bytes],
    data: bytes,
    deadline: float,
    max_output: int | None,
    drain: float | None = None,
) -> tuple[bytes, bytes, bool]:
    """Feed stdin and read both outputs until the program exited and its pipes are done (or
    `drain` seconds, default DRAIN_AFTER_EXIT, passed since it exited: with 0, what is in the
    pipes when it exits is read and nothing more is waited for); `(stdout, stderr, finished
    before deadline)`."""
    drain = DRAIN_AFTER_EXIT if drain is None else drain
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(chunks, 0)
    pending = memoryview(data)
    exited_at: float | None = None
    finished = False
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if process.stdin is not None:
            os.set_blocking(process.stdin.fileno(), False)
            selector.register(process.stdin.fileno(), selectors.EVENT_WRITE)
        while True:
            now = time.monotonic()
            if exited_at is None and _exited(process):
                exited_at = now
            reading = any(fd in chunks for fd in selector.get_map())
            if exited_at is not None and (not reading or now - exited_at >= drain):
                if reading and not drain:
                    _read_ready(selector, chunks, sizes, max_output)
                finished = True
                break
            if now >= deadline:
                break
            if not selector.get_map():  # pipes done, the program not yet gone: it is exiting
                time.sleep(min(0.002, deadline - now))
                continue
            for key, _ in selector.select(timeout=min(_POLL, deadline - now)):
                if key.events & selectors.EVENT_WRITE:
                    pending = _feed(process, selector, pending)
                    continue
                _read(selector, key.fd, chunks, sizes, max_output)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), finished


def _read(
    selector: selectors.BaseSelector,
    fd: int,
    chunks: dict[int, list[bytes]],
    sizes: dict[int, int],
    max_output: int | None,
) -> bool:
    """Read one chunk of `fd` into `chunks`; False when nothing more is there now (at its
    end, unregistered, or none written yet)."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return False
    if not chunk:
        selector.unregister(fd)
        return False
    chunks[fd].append(chunk)
    sizes[fd] += len(chunk)
    if max_output is not None and sizes[fd] > max_output:
        raise OutputTooLarge(f"more than {max_output} bytes of output")
    return True


def _read_ready(
    selector: selectors.BaseSelector,
    chunks: dict[int, list[bytes]],
    sizes: dict[int, int],
    max_output: int | None,
) -> None:
    """Read what the outputs hold now, without waiting for more (the program has exited: all
    it wrote is there; a child of it may hold the pipes open for as long as it lives)."""
    for fd in [fd for fd in chunks if fd in selector.get_map()]:
        while _read(selector, fd, chunks, sizes, max_output):
            pass


def _feed(
    process: subprocess.Popen[bytes], selector: selectors.BaseSelector, pending: memoryview
) -> memoryview:
    # Written as the program reads it: one that never reads its stdin cannot block us.
    assert process.stdin is not None
    fd = process.stdin.fileno()
    try:
        pending = pending[os.write(fd, pending[:65536]) :]
    except BlockingIOError:
        return pending
    except OSError:  # it closed its stdin (or exited): the rest is not wanted
        pending = pending[:0]
    if not pending:
        selector.unregister(fd)
        process.stdin.close()
    return pending


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """True once the program exited, without reaping it (its pid keeps naming the group)."""
    if not hasattr(os, "waitid"):  # macOS before Python 3.13: reaped, the group killed at once
        return process.poll() is not None
    try:
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, process.pid, flags) is not None
    except ChildProcessError:
        return True
