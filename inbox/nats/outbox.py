"""The outbox: pushes for agents of other machines, waiting in the delivery database for the
relay to publish them (inbox/nats/relay.py).

With `delivery.nats.url` in this machine's settings, every item a push, a producer or a
broadcast stores for an agent that does not live here (not in `delivery.nats.agents`), and
every broadcast's standing item, gets an outbox row in the same transaction as the item: the
push never touches the network, and an item committed is an item the relay will publish.
The relay removes a row once JetStream has acknowledged it. No NATS client here: this module
is on the path of every push when NATS is configured.

Once a transaction that wrote rows has ended, the writer wakes the relay: one byte into the
FIFO the relay listens on (`.runtime/nats-relay.wake`, `Wakes`), a few microseconds, and
nothing at all when no relay runs. An idle relay sleeps until then; it looks on its own only
now and then (inbox/nats/relay.py), for rows whose writer died before it could wake it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from inbox.items import Item

TABLE = """CREATE TABLE IF NOT EXISTS outbox(
    id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, key TEXT NOT NULL,
    item TEXT NOT NULL, created_at REAL NOT NULL)"""
# The fields an item travels with (its row's id, state and session stay on each machine).
TRAVELS = ("agent", "key", "type", "source", "content", "priority", "created_at",
           "expires_at", "ref_bead", "moot_when", "pusher")  # fmt: skip


class Outbox:
    """The hook `insert_items` calls inside its transaction: an outbox row for each item
    whose agent does not live on this machine (`here`); `ended()`, called once the
    transaction has ended, wakes the relay listening on `fifo` if rows were written."""

    def __init__(self, here: Iterable[str], fifo: Path | None = None) -> None:
        self.here = frozenset(here)
        self.fifo = fifo
        self.written = False  # rows written in the transaction under way

    def __call__(self, db: sqlite3.Connection, items: Sequence[Item]) -> None:
        rows = [
            (item.agent, item.key, encode(item), item.created_at)
            for item in items
            if item.agent not in self.here
        ]
        if rows:
            db.execute(TABLE)  # made on first use: a store without NATS never has it
            db.executemany(
                "INSERT INTO outbox(target, key, item, created_at) VALUES (?, ?, ?, ?)", rows
            )
            self.written = True

    def ended(self) -> None:
        """The transaction that called this hook has ended: wake the relay if it wrote rows
        (rolled back, the relay wakes for nothing and looks once)."""
        if self.written:
            self.written = False
            if self.fifo is not None:
                wake(self.fifo)


def outbox_of(
    local: dict[str, str],
    spell: Callable[[str], Iterable[str]] | None = None,
    fifo: Path | None = None,
) -> Outbox | None:
    """The outbox hook of a store whose machine-local settings (its small git config, read
    without a parser: `beads.git.config.read_values`) are `local`, or None when this machine
    has no `delivery.nats.url`. `spell(agent)` gives every name a local agent goes by
    (`Delivery.spellings`), so an item for `gastown/mayor` stays here when `mayor` lives
    here; `fifo`: the FIFO the store's relay listens on (`wake_path`)."""
    if not local.get("delivery.nats.url"):
        return None
    here = [a.strip() for a in local.get("delivery.nats.agents", "").split(",") if a.strip()]
    return Outbox((n for a in here for n in (a, *(spell(a) if spell else ()))), fifo)


def encode(item: Item) -> str:
    """An item as it travels: JSON of its fields (`TRAVELS`)."""
    return json.dumps({name: getattr(item, name) for name in TRAVELS}, ensure_ascii=False)


def waiting(db: sqlite3.Connection, limit: int) -> list[tuple[int, str, str, str]]:
    """The oldest `limit` rows: `(id, target, key, item JSON)`."""
    db.execute(TABLE)
    return db.execute(
        "SELECT id, target, key, item FROM outbox ORDER BY id LIMIT ?", (limit,)
    ).fetchall()


def remove(db: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Forget rows JetStream has acknowledged."""
    db.executemany("DELETE FROM outbox WHERE id = ?", [(i,) for i in ids])


def count(db: sqlite3.Connection) -> int:
    """How many items wait to be published."""
    db.execute(TABLE)
    return db.execute("SELECT count(*) FROM outbox").fetchone()[0]


# -- waking the relay -----------------------------------------------------------------------

_FLAGS = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def wake_path(root: Path) -> Path:
    """The FIFO the relay of the store at `root` listens on for committed outbox rows."""
    return root / ".runtime" / "nats-relay.wake"


def wake(path: Path) -> None:
    """Wake the relay listening on the FIFO at `path`; nothing when no relay runs."""
    try:
        fd = os.open(path, os.O_WRONLY | _FLAGS)
    except OSError:  # no relay: none ever ran here (no FIFO) or none runs now (no reader)
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # anything else found there is left alone
            os.write(fd, b"\n")
    except OSError:  # full (the relay has wakes enough waiting), or the relay just stopped
        pass
    finally:
        os.close(fd)


class Wakes:
    """The relay's end of its FIFO (`wake_path`), made anew as the relay starts, with the
    store's file mode (a group store's members push too): readable once a writer has
    committed outbox rows. The caller holds the store's relay lock."""

    def __init__(self, root: Path) -> None:
        from beads import files

        self.path = wake_path(root)
        if not files.real_dir(str(root), str(self.path.parent)):  # never through a link
            raise OSError(f"{self.path.parent} is not a directory of the store's own")
        mode = files.modes(str(root))[1]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # an earlier relay's, or anything else found there
        os.mkfifo(self.path, mode)
        opened: list[int] = []
        try:
            opened.append(os.open(self.path, os.O_RDONLY | _FLAGS))
            made = os.fstat(opened[0])
            if not stat.S_ISFIFO(made.st_mode) or made.st_uid != os.geteuid():
                raise OSError(f"{self.path} was replaced as it was made")
            # A writer of the relay's own: the read end never reports end-of-file (readable
            # forever) once the last of the pushes' writers has closed it.
            opened.append(os.open(self.path, os.O_WRONLY | _FLAGS))
            os.fchmod(opened[0], mode)  # the umask may have taken the group's bits
        except OSError:
            for fd in opened:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise
        self.fd, self._writer = opened
        self._made = made

    def drain(self) -> None:
        """Read every wake written so far (one byte each)."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self.fd, 4096):
                pass

    def replaced(self) -> bool:
        """Whether the FIFO at `path` is no longer the one listened on (removed, or
        something else put in its place): pushes then wake no one."""
        try:
            found = os.lstat(self.path)
        except OSError:
            return True
        return (found.st_dev, found.st_ino) != (self._made.st_dev, self._made.st_ino)

    def close(self) -> None:
        """Stop listening: the FIFO is removed (if it is still this one), pushes wake no one."""
        if not self.replaced():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        os.close(self._writer)
        os.close(self.fd)
