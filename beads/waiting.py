"""Blocking until something shows up in the store, from any process, without a busy loop.

A waiter checks something cheap between short sleeps: the branch ref file (a few
microseconds to read) and, only when it moved, one indexed query. Every commit moves the ref,
so a waiter wakes within one poll interval of the commit, whoever made it, at a negligible
cost while nothing happens (`gc inbox wait`, `gc thread watch` and `wait-reply` use it).
"""

from __future__ import annotations

import time
from pathlib import Path

from beads.branch import branch_head
from beads.runtime import runs_long

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

POLL = 0.05  # seconds between checks: wake latency about half of it, on average


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
        time.sleep(min(poll, left))


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
