"""An exclusive `fcntl.flock` on one file, re-entrant in the thread that holds it: the
store's write lock and the other locks every write or claim takes.

Importing the filelock library costs a command tens of milliseconds of start-up
(docs/dependencies.md), so these locks are kept to what the store needs. It is the lock
filelock's `FileLock` takes on Unix (a `flock` on the file, which stays in place), so a holder
of either kind excludes the other. The OS releases it when its holder dies; the file is
opened under the store root, never through a link, with the store's mode.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time

from beads import files

# Errors a contended non-blocking flock reports (EACCES on some network filesystems).
_BUSY = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})


class WriteLock:
    """An exclusive lock on the file `path` under the store at `root`: one holder among
    processes (the flock) and among the threads sharing this object (a re-entrant mutex)."""

    def __init__(self, root: str, path: str) -> None:
        self.root = root
        self.path = path
        self._mutex = threading.RLock()
        self._fd = -1
        self._depth = 0  # acquisitions not yet released: the lock is held while above zero

    @property
    def is_locked(self) -> bool:
        """Whether a thread of this process holds the lock through this object."""
        return self._depth > 0

    def acquire(self, timeout: float, poll: float) -> bool:
        """Take the lock (again, in the thread holding it), waiting up to `timeout` seconds,
        trying the file every `poll` seconds; False if another holder kept it all that time."""
        deadline = time.monotonic() + timeout
        if not self._mutex.acquire(timeout=max(timeout, 0)):
            return False
        if not self._depth:
            try:
                fd = self._locked_file(deadline, poll)
            except BaseException:
                self._mutex.release()
                raise
            if fd is None:
                self._mutex.release()
                return False
            self._fd = fd
        self._depth += 1
        return True

    def _locked_file(self, deadline: float, poll: float) -> int | None:
        # A descriptor of the file, flocked by it; None when the deadline passed first. Opened
        # for writing, as filelock opens it: a store this user may not write is refused here,
        # before anything is written, with the OS's reason (`store is read-only`).
        fd = files.open_file(self.root, self.path, os.O_RDWR)
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    break
                time.sleep(poll)
            else:
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def release(self) -> None:
        """Undo one `acquire` of this thread; the last one unlocks and closes the file."""
        if not self._depth:
            return
        self._depth -= 1
        if not self._depth:
            fd, self._fd = self._fd, -1
            os.close(fd)  # closing the only descriptor of the open file drops its flock
        self._mutex.release()


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True
