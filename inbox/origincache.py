"""The reading commands' origins (`inbox.origin`, `ever`), kept for the next command in
`.runtime/origins.sqlite3`: this machine's alone (never synced), a cache that may be deleted
at any time. This module is the file; what it holds is decided in `inbox.origin`.

It holds, for every file that a commit made elsewhere changed in the branch's history, the
origin of the newest such change; and the commit (head) those answers hold at, with the
machine id and the record of claimed commits (`beads.sync.claimed`) they were found under.
A lookup at the branch's head H' with the file at H:
- H' is H: the answers are read, no commit is walked.
- H is behind H' (an ancestor): only the commits since H are walked (`foreign_origins`,
  children first, at every path, by the same rules: a merge's, the claimed commits'), a
  newer change made elsewhere replacing a file's answer; the file then holds H'.
- anything else (no file yet, a branch reset or rewritten, another machine id or claimed
  record, a file damaged or not this module's): one walk of the whole history, with no
  `MAX_WALK`, whose answers the file then holds.
So a message whose last change made elsewhere is any number of commits back still says where
it came from, and a command walks only what was committed since the last one looked.

Each write is one transaction, made only if the file still holds what the lookup read: of two
processes looking up at once, the second to write keeps its answers and writes nothing (a
lost race costs a later walk, never a wrong answer). A file that sqlite finds damaged, that
is no origins file of this version (`PRAGMA application_id`, `user_version`), whose rows are
not of the kinds written here, or an empty directory in its place, is removed and made again;
where none can be made or used (a read-only store, a link, a directory holding files), each
lookup walks the whole history, and its answers are the same: `gc doctor` reports what
stands in its place (`check`), and `gc doctor --rebuild-index` removes it (`remove`).
"""

from __future__ import annotations

import os
import sqlite3
import stat

TYPE_CHECKING = False  # inbox.origin is on the hooks' path, which never imports typing
if TYPE_CHECKING:
    from pathlib import Path

    from beads.health.problems import Problem

    State = tuple[str, str, str]  # head (hex), machine id, digest of the claimed commits
    Row = tuple[str, str, str, bool]  # a path's origin: author, machine, machine id, claimed

NAME = "origins.sqlite3"  # under the store's `.runtime/`
APPLICATION_ID = 0x67634F72  # "gcOr": this file's, told from any other sqlite file
VERSION = 1
SCHEMA = """
CREATE TABLE state(one INTEGER PRIMARY KEY CHECK (one = 1),
    head TEXT NOT NULL, here TEXT NOT NULL, claimed TEXT NOT NULL);
CREATE TABLE origins(path TEXT PRIMARY KEY, author TEXT NOT NULL, machine TEXT NOT NULL,
    machine_id TEXT NOT NULL, claimed INTEGER NOT NULL) WITHOUT ROWID;
"""
# How long a lookup waits for another process's write (a write is short: the walk is done
# before it begins); past it, the lookup answers without writing.
BUSY_SECONDS = 5.0
# Paths asked for in one statement (under sqlite's limit of bound parameters).
CHUNK = 500
_HEX = frozenset("0123456789abcdef")


class Unusable(Exception):
    """The file is none this module wrote: damaged, another program's or version's, rows of
    other kinds, a directory in its place."""


def load(
    root: Path, wanted: set[str]
) -> tuple[sqlite3.Connection | None, State | None, dict[str, Row]]:
    """The file of the store at `root` (its `.beads/`) opened (None where none can be used:
    the caller walks the whole history), the state it holds (None: none yet) and its rows
    for `wanted`, read together. A file found unusable is removed and made again once; the
    file's faults are never raised. The caller closes the connection."""
    from beads.errors import GcError
    from inbox.database import DatabaseDamaged

    path = root / ".runtime" / NAME
    for attempt in (1, 2):
        db = None
        try:
            db = _connect(root, path)
            state, known = _read(db, wanted)
            return db, state, known
        except (Unusable, DatabaseDamaged):
            if db is not None:
                db.close()
            if attempt == 2 or not _discard(path):
                return None, None, {}
        except (GcError, OSError, sqlite3.Error):  # busy, read-only, a link: done without
            if db is not None:
                db.close()
            return None, None, {}
    return None, None, {}


def check(root: Path) -> list[Problem]:
    """What `gc doctor` finds at the file's place in the store `root` (its `.beads/`):
    something no lookup can use or remove (a directory holding files, a FIFO), so that each
    reading command walks the whole history. An empty directory is no problem (the next
    lookup removes it), nor a link (reported with the links under `.runtime/`)."""
    from beads.health.problems import Problem

    path = root / ".runtime" / NAME
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return []
    if stat.S_ISLNK(mode) or stat.S_ISREG(mode):
        return []
    if stat.S_ISDIR(mode):
        try:
            if not os.listdir(path):
                return []
        except OSError:
            pass
        what = "a directory holding files"
    else:
        what = "not a regular file"
    said = (
        f"{what} where gc keeps the origins for reading commands: each of them walks the "
        "whole history instead; gc doctor --rebuild-index removes it"
    )
    return [Problem("origins", f".runtime/{NAME}", said)]


def remove(root: Path) -> list[str]:
    """Remove the file of the store at `root` (`gc doctor --rebuild-index`: it is remade by
    the next reading command), or whatever stands in its place (a directory holding files,
    which plain `gc doctor` reports first); what was done, for the report. A link in its
    place is left (doctor reports links under `.runtime/`); raises OSError when it cannot be
    removed."""
    path = root / ".runtime" / NAME
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return []
    except FileNotFoundError:
        return []
    _discard(path, strict=True)
    return [f"removed the origins kept for reading commands (.runtime/{NAME}; remade when read)"]


def _connect(root: Path, path: Path) -> sqlite3.Connection:
    """The file at `path` opened, made (with its tables) when it is new or empty; Unusable
    when it is another program's, another version's, or a directory."""
    from beads import files
    from beads.index.dbfile import file_id
    from inbox.database import Connection, transaction

    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise Unusable(f"{path} is a directory")
    except FileNotFoundError:
        pass
    files.prepare_db(str(root), str(path))  # never through a link, with the store's mode
    db = sqlite3.connect(
        path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False,
        factory=Connection,
    )  # fmt: skip
    db.name, db.path, db.file_id = NAME, path, file_id(path)  # errors said as the store's
    try:
        # A rollback journal, not WAL: a file removed while a process has it open (doctor,
        # or a rebuild of a damaged one) leaves no `-wal` of the old file that closing it
        # would remove by name from under the new one.
        db.execute("PRAGMA synchronous=NORMAL")
        kind = _kind(db)
        if kind == "new":
            with transaction(db, NAME):
                kind = _kind(db)  # another process may have made it meanwhile
                if kind == "new":
                    for statement in SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version={VERSION}")
                    kind = "ours"
        if kind != "ours":
            raise Unusable(f"{path} is not an origins file of this version")
    except BaseException:
        db.close()
        raise
    return db


def _kind(db: sqlite3.Connection) -> str:
    """ "ours" (this version's, with its tables), "new" (an empty database) or "other"."""
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    if (app, version) == (APPLICATION_ID, VERSION) and {"state", "origins"} <= names:
        return "ours"
    if (app, version) == (0, 0) and not names:
        return "new"
    return "other"


def _read(db: sqlite3.Connection, wanted: set[str]) -> tuple[State | None, dict[str, Row]]:
    """The state the file holds and its answers for `wanted`, in one read transaction;
    Unusable for a row not of the kinds `save` writes."""
    from beads.index.dbfile import rollback

    db.execute("BEGIN")
    try:
        rows = db.execute("SELECT head, here, claimed FROM state").fetchall()
        if not rows:
            return None, {}
        state = rows[0]
        head = state[0]
        if not all(isinstance(part, str) for part in state) or len(head) != 40 or set(head) - _HEX:
            raise Unusable("its state is not one written here")
        known: dict[str, Row] = {}
        paths = sorted(wanted)
        for start in range(0, len(paths), CHUNK):
            part = paths[start : start + CHUNK]
            marks = ",".join("?" * len(part))
            sql = f"SELECT path, author, machine, machine_id, claimed FROM origins WHERE path IN ({marks})"  # noqa: E501
            for path, *fields in db.execute(sql, part):
                known[path] = _row(*fields)
        return state, known
    finally:
        rollback(db)  # only read


def _row(author: object, machine: object, machine_id: object, claimed: object) -> Row:
    """A row read back; Unusable for fields not of the kinds `save` writes."""
    if not (isinstance(author, str) and isinstance(machine, str) and isinstance(machine_id, str)):
        raise Unusable("a row is not one written here")
    if claimed not in (0, 1) or not isinstance(claimed, int):
        raise Unusable("a row is not one written here")
    return author, machine, machine_id, bool(claimed)


def save(
    db: sqlite3.Connection | None,
    read: State | None,
    state: State,
    found: dict[str, Row],
    *,
    whole: bool,
) -> None:
    """Store `found` (with `whole`, in place of every answer) as holding at `state`, if the
    file still holds `read`: another process's write since is left as it is. A write that
    fails (busy, a full disk, a read-only store) is given up: a later lookup walks again."""
    from beads.errors import GcError
    from inbox.database import transaction

    if db is None:
        return
    rows = [(path, *row[:3], int(row[3])) for path, row in found.items()]
    try:
        with transaction(db, NAME):
            if db.execute("SELECT head, here, claimed FROM state").fetchone() != read:
                return
            if whole:
                db.execute("DELETE FROM origins")
            db.executemany("INSERT OR REPLACE INTO origins VALUES (?, ?, ?, ?, ?)", rows)
            db.execute("INSERT OR REPLACE INTO state VALUES (1, ?, ?, ?)", state)
    except GcError:
        pass


def _discard(path: Path, *, strict: bool = False) -> bool:
    """Remove the file at `path` (an empty directory in its place) and sqlite's files beside
    it (a link among them is removed, never followed); False when something stays, or with
    `strict` (doctor's), the OSError, and a directory is removed with what it holds (links
    in it removed, never followed)."""
    for target in (str(path), *(f"{path}{suffix}" for suffix in ("-wal", "-shm", "-journal"))):
        try:
            if not stat.S_ISDIR(os.lstat(target).st_mode):
                os.unlink(target)
            elif strict:
                import shutil

                shutil.rmtree(target)
            else:
                os.rmdir(target)
        except FileNotFoundError:
            continue
        except OSError:
            if strict:
                raise
            return False
    return True


def digest(claimed: frozenset[bytes]) -> str:
    """The record of claimed commits as one short text: the file holds only while it is the
    same (a commit newly recorded may be one walked before as made here)."""
    import hashlib

    return hashlib.sha256(b"\n".join(sorted(claimed))).hexdigest()
