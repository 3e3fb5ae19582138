"""Blocking until something shows up in the store, from any process, without a busy loop.

A waiter checks something cheap between short sleeps: the branch ref file (a few
microseconds to read) and, only when it moved, one indexed query. Every commit moves the ref,
so a waiter wakes within one poll interval of the commit, whoever made it, at a negligible
cost while nothing happens (`gc inbox wait`, `gc thread watch` and `wait-reply` use it).

A command that waits does so under `terminable()`: a SIGTERM (a supervisor, `timeout`) ends
it as Ctrl-C does, in one line (`gc: terminated`, exit 143). It ends at once while the wait
sleeps between checks (`pause`), which is nearly all of the time; one that comes during a
check ends the wait as that check is done, so a check's writes (items derived from git, a
gate resolved) are never left half made. A program a check runs is ended first
(`beads.process`).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from beads.branch import branch_head
from beads.errors import Termination
from beads.runtime import runs_long

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TypeVar

    T = TypeVar("T")

POLL = 0.05  # seconds between checks: wake latency about half of it, on average


class Terminable:
    """The SIGTERM handler of a wait (`terminable`): raises `Termination` while the wait
    sleeps, else notes the signal for the next `sleep`."""

    def __init__(self) -> None:
        self.asked = False
        self.sleeping = False

    def __call__(self, _signum: int, _frame: object) -> None:
        self.asked = True
        if self.sleeping:
            raise Termination

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, unless a SIGTERM came (or comes meanwhile): `Termination`."""
        if self.asked:
            raise Termination
        self.sleeping = True
        try:
            time.sleep(seconds)
        finally:
            self.sleeping = False


_active: Terminable | None = None  # the wait in progress under `terminable`, if any


@contextlib.contextmanager
def terminable() -> Iterator[None]:
    """While the block waits, a SIGTERM ends it with `Termination` (see the module's
    docstring), and once more as the block ends if it came during the last check. Only where
    SIGTERM is this process's default (nobody else handles it) and in the main thread;
    elsewhere the block runs as it would without."""
    import signal  # lazy: a command that only imports this module (a send) never loads it

    global _active
    waiter = Terminable()
    try:
        ours = _active is None and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        if ours:
            signal.signal(signal.SIGTERM, waiter)
    except ValueError:  # not the main thread: signals are the main thread's to handle
        ours = False
    if not ours:
        yield
        return
    _active = waiter
    try:
        yield
        if waiter.asked:  # during the last check: the wait ends before its answer is given
            raise Termination
    finally:
        _active = None
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def pause(seconds: float) -> None:
    """Sleep `seconds` between a wait's checks: under `terminable`, a SIGTERM ends it here."""
    if _active is not None:
        _active.sleep(seconds)
    else:
        time.sleep(seconds)


def wait_until(check: Callable[[], T | None], timeout: float, poll: float = POLL) -> T | None:
    """Call `check` until it returns something other than None (returned), sleeping `poll`
    seconds between calls; None once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        runs_long()  # a wait: the garbage collector's usual collections back
        pause(min(poll, left))


class BranchWatch:
    """Tells whether the store's branch moved since the last look (True the first time)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._seen: bytes | None | object = object()

    def moved(self) -> bool:
        head = branch_head(self.root)
        if head == self._seen:
            return False
        self._seen = head
        return True
