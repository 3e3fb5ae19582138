"""Per-session JSONL queues (`.runtime/inject-queue/<session>.jsonl`).

Appends take the queue's file lock and write one line in one `write` call, so concurrent
producers never interleave. `take` locks, reads and truncates. A line that does not parse is
kept in `<session>.bad.jsonl` (with the reason) and reported, never fatal.

Both also hold `flock(2)` on the `.jsonl` file itself, the seed's lock: a writer that follows
the seed (flock, `O_APPEND`, one `write` per line) appends either before a drain reads or
after it truncates, never in between.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from beads import files
from beads.errors import InvalidInput

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

# Compiled by `re` on first use: a push names no session.
SESSION = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
LOCK_TIMEOUT = 30.0


def check_session(session: str) -> str:
    """A session name is a file name: letters, digits, `.`, `_`, `:`, `-` (no paths)."""
    if not isinstance(session, str) or not re.fullmatch(SESSION, session):
        raise InvalidInput(
            f"invalid session id {session!r}: use letters, digits, '.', '_', ':' and '-' "
            "(up to 128 characters)"
        )
    return session


class SessionQueue:
    """The JSONL queue of one session."""

    def __init__(self, runtime: Path, session: str) -> None:
        directory = runtime / "inject-queue"
        self.path = directory / f"{check_session(session)}.jsonl"
        self.bad_path = directory / f"{session}.bad.jsonl"
        self.lock_path = directory / f"{session}.lock"
        self._root = str(runtime.parent)
        files.make_dirs(self._root, str(directory))

    @property
    def _lock(self) -> Any:
        import filelock  # lazy: a hook with an empty queue never needs it

        files.create(self._root, str(self.lock_path))  # filelock opens it by name
        mode = files.modes(self._root)[1]  # older filelocks chmod to their own default
        return filelock.FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT, mode=mode)

    def empty(self) -> bool:
        """True when there is nothing to take (checked without the lock: appends are atomic)."""
        try:
            return self.path.stat().st_size == 0
        except FileNotFoundError:
            return True

    def set_aside(self, line: str, why: str) -> None:
        """Keep a line that cannot be used in `<session>.bad.jsonl`, with the reason."""
        keep_aside(self._root, self.bad_path, {"line": line, "error": why})

    def append(self, record: dict[str, Any]) -> None:
        """Add one line, durably."""
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            fd = files.open_file(self._root, str(self.path))
            try:
                _flock(fd)
                size = os.fstat(fd).st_size
                try:
                    _write_all(fd, line)
                    os.fsync(fd)
                except BaseException:
                    # A line cut short (a full disk) would swallow the next append: the
                    # queue is left as it was, and the push fails.
                    os.ftruncate(fd, size)
                    raise
            finally:
                os.close(fd)

    def take(
        self, store: Callable[[list[dict[str, Any]]], list[str]]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Empty the queue into `store`: `(records, problems)`; unparsable lines are set aside.

        `store` (which must commit the records durably, returning any problems) runs under
        the queue's lock, and the file is emptied only after it returns: a crash or an error
        before that leaves every line in place for the next drain (dedup absorbs repeats).
        """
        with self._lock:
            fd = files.open_file(self._root, str(self.path), os.O_RDWR)
            with open(fd, "r+b") as handle:  # closing it releases the flock
                _flock(fd)
                raw = handle.read()
                records: list[dict[str, Any]] = []
                bad: list[bytes] = []
                for line in raw.splitlines():
                    if not line.strip():
                        continue
                    try:
                        value = json.loads(line)
                    except (ValueError, UnicodeDecodeError, RecursionError):  # nested too deep
                        bad.append(line)
                        continue
                    if isinstance(value, dict):
                        records.append(value)
                    else:
                        bad.append(line)
                problems = []
                for line in bad:
                    self.set_aside(line.decode("utf-8", "replace"), "not a JSON object")
                if bad:
                    lines = "1 line" if len(bad) == 1 else f"{len(bad)} lines"
                    problems.append(
                        f"{lines} of {self.path.name} could not be read and "
                        f"{'was' if len(bad) == 1 else 'were'} set aside in {self.bad_path.name}"
                    )
                problems += store(records)
                handle.truncate(0)
                return records, problems


def keep_aside(root: str, path: Path, record: dict[str, Any]) -> None:
    """Append `record` (what could not be used, and why) as one JSON line to `path`, a file
    of things set aside under the store `root`."""
    line = json.dumps(record, ensure_ascii=False) + "\n"
    fd = files.open_file(root, str(path))
    try:
        _write_all(fd, line.encode())
    finally:
        os.close(fd)


def _flock(fd: int) -> None:
    """Take `flock(2)` on the queue file (the seed's writers hold it for one write each); a
    holder that does not let go within LOCK_TIMEOUT is an OSError."""
    import fcntl  # lazy: only a queue with lines to take (or an append) needs it

    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise OSError(f"queue file still locked after {LOCK_TIMEOUT:.0f}s") from None
            time.sleep(0.002)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data` (os.write may write less, as on a nearly full disk)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(28, "No space left on device")
        view = view[written:]
