"""`sync.timeout`: how long a remote may stay silent before an exchange with it fails.

A remote that accepts the connection and then says nothing would hold `gc sync` (and a claim,
which syncs) for ever. Sockets made during the exchange (git://, http(s)://) get the timeout
on every read and write, which is a deadline without progress. Where no socket of ours
carries the exchange (ssh runs a program; a local path reads files), a timer in the main
thread ends it once nothing arrived for that long; each piece that arrives restarts it (for
a local path, so does each batch of objects its walk reads: `beads.git.localfetch`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

from beads.errors import StorageError


class TimedOut(Exception):
    """Nothing arrived from the remote for `sync.timeout` seconds."""


def timed_out(url: str, seconds: float) -> StorageError:
    """The one line for a remote that stayed silent."""
    return StorageError(
        f"the remote {url} timed out: nothing arrived for {seconds:g}s (sync.timeout); "
        "nothing was changed by it"
    )


def is_timeout(exc: BaseException) -> bool:
    """Whether a failed exchange was a timeout: a socket's, urllib3's or our timer's (dulwich
    and urllib3 wrap it in errors of their own, which name it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TimeoutError | TimedOut):  # socket.timeout is TimeoutError
            return True
        if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


@contextlib.contextmanager
def deadline(seconds: float, *, timer: bool) -> Iterator[Callable[..., None]]:
    """Bound an exchange by `seconds` without progress; yields the function to call when a
    piece arrives. `timer`: also arm the main thread's timer (ssh, local paths)."""
    import socket  # only an exchange with a remote needs it

    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    armed = timer and threading.current_thread() is threading.main_thread()
    old_handler = None
    if armed:

        def fire(_signum: int, _frame: object) -> None:
            raise TimedOut()

        old_handler = signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def progress(*_args: object) -> None:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, seconds)

    try:
        yield progress
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        socket.setdefaulttimeout(previous)
