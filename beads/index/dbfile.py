"""What gc's sqlite files (the index, the delivery databases) share: how to read sqlite's
error codes, a file's identity, switching a new file to WAL beside another process, a
rollback that never hides an error, and opening a file this process may not write.

On the hook path: stdlib only, no `typing`.
"""

from __future__ import annotations

import os
import sqlite3

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

# sqlite's primary result codes (an extended code keeps its primary one in the low byte).
DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
READ_ONLY = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_CANTOPEN)


def error_code(exc: sqlite3.Error) -> int:
    """The primary result code of a sqlite error (0 when it carries none)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def out_of_space(exc: sqlite3.Error, path: Path | str) -> bool:
    """Whether `exc`, met on the database at `path`, is its disk being full: sqlite says
    so (FULL; SHMSIZE, a WAL's shared memory that could not grow), or meets an I/O error on
    a file system with no block left, as a full disk ends some writes."""
    if error_code(exc) == sqlite3.SQLITE_FULL:
        return True
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_IOERR_SHMSIZE:
        return True
    if error_code(exc) != sqlite3.SQLITE_IOERR:
        return False
    try:
        return os.statvfs(os.path.dirname(os.path.abspath(path))).f_bavail == 0
    except OSError:
        return False


def file_id(path: Path | str) -> tuple[int, int] | None:
    """`(device, inode)` of the file at `path`, or None: tells a file another process remade
    from the one found damaged."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def use_wal(db: sqlite3.Connection, schema: str = "main", patience: float = 30.0) -> None:
    """Put the database `schema` of `db` (the main file, or an attached one) in WAL mode
    (kept in the file: set once). Switching needs the file to itself, and sqlite answers
    "database is locked" at once rather than wait for it: a process making the same new
    database at the same moment is waited for, up to `patience` seconds."""
    import time

    deadline = time.monotonic() + patience
    while True:
        try:
            if db.execute(f"PRAGMA {schema}.journal_mode").fetchone()[0] != "wal":
                db.execute(f"PRAGMA {schema}.journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if error_code(exc) != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            # A random pause: processes that met at the same moment must not retry in step.
            time.sleep(0.002 + os.urandom(1)[0] / 255 * 0.02)


def rollback(db: sqlite3.Connection) -> None:
    """End a failed transaction. SQLite ends it itself on some errors (a full disk, an I/O
    error): a ROLLBACK then, or one that fails, must not hide the error being raised."""
    if db.in_transaction:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def open_read_only(
    path: Path, usable: Callable[[sqlite3.Connection], bool], **connect: object
) -> sqlite3.Connection | None:
    """A read-only connection to `path` that `usable` accepts, or None.

    WAL needs its `-shm` file: where that cannot be made, the file is read as immutable
    (without locks: a write by its owner meanwhile may show up as a damaged page).
    `usable` may raise to refuse the file outright; the connection is then closed.
    """
    import stat
    from urllib.parse import quote  # lazy: only this rare path needs it

    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # a directory: no use trying to read it
        from beads.files import not_a_regular_file

        raise not_a_regular_file(str(path))
    for options in ("mode=ro", "immutable=1"):
        db = sqlite3.connect(
            f"file:{quote(str(path))}?{options}",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            **connect,  # type: ignore[arg-type]
        )
        try:
            if usable(db):
                return db
        except sqlite3.Error:
            pass
        except BaseException:
            db.close()
            raise
        db.close()
    return None
