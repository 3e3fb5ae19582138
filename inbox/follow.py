"""Notifications follow git: items derived from the commits of the store's branch.

The delivery database records the last commit it derived items from (its watermark, table
`follow`). A producer (a mail send, a decision answer, a gate check) commits, then derives its
items from the beads it changed and moves the watermark from its parent to its commit in the
same transaction. When a drain finds the branch ahead of the watermark (a producer killed
between its commit and its items, a commit by a command that derives nothing, a push into the
store, a sync), it derives the items of the beads changed in between from the tree diff, as the
index catches up. Dedup keys make a second derivation of the same change a no-op. Commits that
change no bead of a type with a deriver (a task created, a config set: most commits of an
agent) are stepped over without git: the index links each commit it applies to the one it was
applied from, with the bead types changed, and a complete chain of links from the branch back
to the watermark that names none of those types moves the watermark at once.

The rules stay with their layer: a deriver is a function of the producer's module from the
changes of one commit range to items, registered with `inbox.producers` (which see: nothing
is followed until the producers are declared). A producer is imported only when a change of
its bead type is to be derived, so a hook that finds the watermark at the branch pays two
cheap reads.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence

from beads.errors import GcError, InvalidInput
from beads.faults import fault
from beads.index import Index
from beads.reader import branch_head
from beads.record import Bead
from inbox import producers

TYPE_CHECKING = False  # importing typing costs a hook ~7 ms
if TYPE_CHECKING:
    from beads.git import GitRepo
    from beads.store import Batch, Store
    from inbox.delivery import Delivery
    from inbox.items import Item


class Change:
    """One bead changed by a commit range: `new` (None when deleted) and `old` (None when
    created; read from git only when a deriver asks for it)."""

    __slots__ = ("new", "created", "_old", "_load")

    def __init__(
        self,
        new: Bead | None,
        old: Bead | None = None,
        load_old: Callable[[], Bead | None] | None = None,
    ) -> None:
        self.new = new
        self.created = old is None and load_old is None  # the bead is new in the range
        self._old = old
        self._load = load_old

    @property
    def old(self) -> Bead | None:
        if self._load is not None:
            self._old, self._load = self._load(), None
        return self._old


def watermark(delivery: Delivery) -> bytes | None:
    """The last commit the delivery database derived items from."""
    row = delivery.db.execute("SELECT head FROM follow").fetchone()
    return row[0].encode() if row and row[0] else None


def derive(changes: Sequence[Change], log: Callable[[str], None]) -> list[Item]:
    """The items the producers make of these changes (each producer imported on first need).

    A bead no item can be made of (say, a waiter's name edited into something invalid) is
    logged and skipped, change by change: it must never stop the watermark, or every later
    drain would stumble on it again."""
    types = dict.fromkeys(c.new.type for c in changes if c.new is not None)  # in order
    derived = producers.derived_types()
    items: list[Item] = []
    for bead_type in (t for t in types if t in derived):
        deriver = producers.deriver(bead_type)
        if deriver is None:  # declared, and its loader registered none: nothing to make
            continue
        try:
            items += deriver(changes)
        except InvalidInput:
            for change in changes:
                try:
                    items += deriver([change])
                except InvalidInput as exc:
                    bead = change.new.id if change.new else "?"
                    log(f"no item made of {bead}: {exc}")
    return items


def record(
    delivery: Delivery,
    items: Sequence[Item],
    *,
    advance: tuple[bytes | None, bytes | None] | None = None,
) -> list[tuple[Item, bool]]:
    """Store items of a producer (the one path for mail, decision and gate items) and, with
    `advance=(parent, commit)`, move the watermark to `commit` if it stands at `parent`, in
    the same transaction; returns `(item, created)` per item. Idle recipients are nudged.
    The watermark stays where it is until the producers are declared (`inbox.producers`):
    a later follow, which knows them all, derives what this caller could not."""
    if not producers.declared():
        advance = None

    def move(db: sqlite3.Connection) -> None:
        parent, commit = advance  # type: ignore[misc]
        if commit is not None:
            db.execute(
                "UPDATE follow SET head = ? WHERE head IS ?",
                (commit.decode(), parent.decode() if parent else None),
            )

    return delivery.insert_items(items, then=move if advance else None)


def committed(
    delivery: Delivery, parent: bytes | None, commit: bytes | None, changes: Sequence[Change]
) -> list[tuple[Item, bool]]:
    """After a producer's commit: derive the items of its changes and record them."""
    return record(delivery, derive(changes, delivery.note_fault), advance=(parent, commit))


def open_delivery(store: Store) -> Delivery | None:
    """The store's delivery database for a producer's writes, or None when it cannot be
    opened (a full disk, a read-only file): a write never fails for it, since the next drain
    derives the same items from git."""
    from inbox.delivery import Delivery

    try:
        return Delivery(store.root, config=lambda: store.config)
    except Exception:  # noqa: BLE001 - see above
        return None


@contextlib.contextmanager
def followed_batch(
    store: Store, delivery: Delivery | None = None, message: str | None = None
) -> Iterator[tuple[Batch, list[Change]]]:
    """`store.batch()` for a producer: append a `Change` for each bead the batch changes, and
    once the commit is in, its items are recorded and the watermark moves past it.

    The delivery database is opened before the commit, so one made now starts following at
    the parent: even the first commit is announced if the process dies before its items are
    written. A delivery fault never undoes the commit: it is logged, and the next drain
    derives the same items from git.
    """
    own = delivery is None
    if delivery is None:
        delivery = open_delivery(store)
    changes: list[Change] = []
    try:
        with store.batch(message) as batch:
            yield batch, changes
        if delivery is not None and batch.commit_id is not None:
            try:
                committed(delivery, batch.base, batch.commit_id, changes)
            except Exception as exc:  # noqa: BLE001 - see above
                commit = batch.commit_id.decode()
                delivery.note_fault(f"items of commit {commit} not recorded: {exc}")
    finally:
        if own and delivery is not None:
            delivery.close()


def follow(delivery: Delivery) -> int:
    """Derive the items of the commits past the watermark; returns how many were new.

    Cheap when the watermark is at the branch (the ref file and one row), or when the
    index's links show that the commits since change no bead of a type with a deriver (a
    row a commit); otherwise the index catches up and the tree diff names the beads to look
    at.
    """
    if not producers.declared():
        return 0  # see inbox/producers.py: moving the watermark now could lose items
    head = branch_head(delivery.root)
    mark = watermark(delivery)
    if head is None or mark == head:
        return 0
    if mark is None or _derives_nothing(delivery, mark, head):
        # Made before the branch had a commit, or only commits that change no bead of a type
        # with a deriver (a task created, a config set) since: nothing was missed.
        record(delivery, [], advance=(mark, head))
        return 0
    return _catch_up(delivery, mark)


def _derives_nothing(delivery: Delivery, mark: bytes, head: bytes) -> bool:
    """True when the index's links show that no commit from `mark` to `head` changed a bead
    of a type with a deriver: one sqlite read a commit, no git, no store."""
    path = delivery.root / ".runtime" / "index.sqlite3"
    if not path.exists():  # never made here: the slow path builds it
        return False
    try:
        index = Index(path)  # no recover: a damaged file takes the slow path, which rebuilds
        try:
            types = index.types_changed(mark, head)
        finally:
            index.close()
    except (GcError, sqlite3.Error):
        return False
    return types is not None and not types.intersection(producers.derived_types())


def _catch_up(delivery: Delivery, mark: bytes) -> int:
    from beads.codec import load_bead
    from beads.git import GitRepo
    from beads.ids import parse_bead_path
    from beads.reader import IndexReader

    # The index brought to the branch (opening the store only if it is behind), and git for
    # the tree diff: the store itself, with its lock and view, is not needed.
    with IndexReader(delivery.root) as reader:
        head = reader.index.head()
        git = GitRepo(delivery.root / ".git")
        try:
            if not git.has_object(mark):
                # The commit it stood at is gone (the branch was replaced): go on from here.
                gone = mark.decode()
                delivery.note_fault(f"follow: watermark {gone} not in the store; now at HEAD")
                return _created(record(delivery, [], advance=(mark, head)))
            changes = []
            paths: dict[str, str] = {}  # bead id -> its path, to find where it was changed
            derived = producers.derived_types()
            for change in git.changes(mark, head):
                located = parse_bead_path(change.path)
                if located is None or located[0] not in derived or change.new_sha is None:
                    continue
                paths[located[1]] = change.path
                new = reader.get(located[1])  # the bead at `head` (None if unreadable)
                if new is None:
                    continue

                def load_old(
                    sha: bytes | None = change.old_sha, path: str = change.path
                ) -> Bead | None:
                    try:
                        return load_bead(git.read(sha), what=path, max_body=1 << 62)
                    except InvalidInput:
                        return None

                changes.append(Change(new, load_old=load_old if change.old_sha else None))
            items = derive(changes, delivery.note_fault)
            _mark_foreign(delivery, git, head, mark, items, paths)
            fault("follow-derived")
            made = record(delivery, items, advance=(mark, head))
        finally:
            git.close()
    return _created(made)


def _mark_foreign(
    delivery: Delivery,
    git: GitRepo,
    head: bytes,
    mark: bytes,
    items: Sequence[Item],
    paths: dict[str, str],
) -> None:
    """Put the origin in front of each item whose bead was last changed on another machine
    (it came by sync: inbox/origin.py). An origin informs: a fault reading one is logged."""
    if not items:
        return
    from beads.localconfig import machine_id
    from inbox.origin import foreign_origins
    from inbox.origin import mark as mark_origin

    try:
        here = machine_id(delivery.root / ".git")
        origins = foreign_origins(git, head, mark, paths.values(), here)
    except (GcError, OSError, KeyError) as exc:
        delivery.note_fault(f"origin of followed items not read: {exc}")
        return
    for item in items:
        bead_id = item.key.split(":")[1] if item.key.count(":") else ""
        origin = origins.get(paths.get(bead_id, ""))
        if origin is not None:
            mark_origin(item, origin)


def _created(results: list[tuple[Item, bool]]) -> int:
    return sum(1 for _, created in results if created)
