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
changes of one commit range to items, found in the Delivery's `ProducerSet`
(inbox/producers.py: with none given and none installed, nothing is followed). A producer is
imported only when a change of its bead type is to be derived, and the default set is looked
up only then too, so a hook that finds the watermark at the branch pays two cheap reads.

`Follower` does this for one delivery database; a producer's own commit goes through
`inbox.commits.followed_batch`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from beads.errors import GcError, InvalidInput
from beads.faults import fault
from beads.index.index import Index
from beads.index.reader import branch_head
from beads.records.record import Bead
from inbox.producers import Change, ProducerSet

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Protocol

    from inbox.items import Item, ItemTable

    class Following(Protocol):
        """What has a `Follower` (a `Delivery`)."""

        follower: Follower


__all__ = ["Change", "Follower", "committed", "derive", "reconciled", "record", "watermark"]


def derive(
    changes: Sequence[Change], producers: ProducerSet, log: Callable[[str], None]
) -> list[Item]:
    """The items `producers` make of these changes (each producer loaded on first need).

    A bead no item can be made of (say, a waiter's name edited into something invalid) is
    logged and skipped, change by change: it must never stop the watermark, or every later
    drain would stumble on it again."""
    types = dict.fromkeys(c.new.type for c in changes if c.new is not None)  # in order
    derived = producers.derived_types()
    items: list[Item] = []
    for bead_type in (t for t in types if t in derived):
        deriver = producers.deriver(bead_type)
        if deriver is None:  # declared, and its loader added none: nothing to make
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


class Follower:
    """The items of one delivery database derived from the store's commits, and its
    watermark: the last commit it derived items from (table `follow`)."""

    def __init__(
        self,
        root: Path,
        db: sqlite3.Connection,
        items: ItemTable,
        producers: Callable[[], ProducerSet | None],
        log: Callable[[str], None],
    ) -> None:
        """`root`: the store's `.beads/`; `db`: the delivery database; `items`: where items
        are recorded; `producers()`: the producer set (None: following is off); `log`: where
        a fault that must not fail the caller goes."""
        self.root = root
        self.db = db
        self.items = items
        self.producers = producers
        self.log = log

    def watermark(self) -> bytes | None:
        """The last commit the delivery database derived items from."""
        row = self.db.execute("SELECT head FROM follow").fetchone()
        return row[0].encode() if row and row[0] else None

    def record(
        self,
        items: Sequence[Item],
        *,
        advance: tuple[bytes | None, bytes | None] | None = None,
    ) -> list[tuple[Item, bool]]:
        """Store items of a producer (the one path for mail, decision and gate items) and,
        with `advance=(parent, commit)`, move the watermark to `commit` if it stands at
        `parent`, in the same transaction; returns `(item, created)` per item. Idle
        recipients are nudged. Without a producer set the watermark stays where it is: a
        later follow, which knows them all, derives what this caller could not."""
        if advance is not None and self.producers() is None:
            advance = None

        def move(db: sqlite3.Connection) -> None:
            parent, commit = advance  # type: ignore[misc]
            if commit is not None:
                db.execute(
                    "UPDATE follow SET head = ? WHERE head IS ?",
                    (commit.decode(), parent.decode() if parent else None),
                )

        return self.items.insert(items, then=move if advance else None)

    def reconciled(
        self, items: Sequence[Item], paths: Mapping[str, str]
    ) -> list[tuple[Item, bool]]:
        """A reconciler's items, recorded (`record`). Those not recorded yet are first marked
        with their origin as a follow marks what it derives (inbox/origin.py `mark_items`;
        `paths`: each bead's file by id), so an item made at start-up of a bead that came
        from another machine says so too; the recorded ones cost no walk of git."""
        from inbox.origin import mark_items

        names = self.items.names
        new = [
            item
            for item in items
            if self.db.execute(
                "SELECT 1 FROM items WHERE agent = ? AND key = ?", (names.own(item.agent), item.key)
            ).fetchone()
            is None
        ]
        mark_items(self.root, new, paths, self.log)
        return self.record(items)

    def committed(
        self, parent: bytes | None, commit: bytes | None, changes: Sequence[Change]
    ) -> list[tuple[Item, bool]]:
        """After a producer's commit: derive the items of its changes and record them."""
        producers = self.producers()
        if producers is None:
            return []  # following is off: a process that knows the producers derives them
        made = derive(changes, producers, self.log)
        return self.record(made, advance=(parent, commit))

    def refresh(self) -> int:
        """Derive the items of the commits past the watermark; returns how many were new.

        Cheap when the watermark is at the branch (the ref file and one row), or when the
        index's links show that the commits since change no bead of a type with a deriver (a
        row a commit); otherwise the index catches up and the tree diff names the beads to
        look at.
        """
        head = branch_head(self.root)
        mark = self.watermark()
        if head is None or mark == head:
            return 0
        producers = self.producers()
        if producers is None:
            return 0  # see inbox/producers.py: moving the watermark now could lose items
        if mark is None or self._derives_nothing(producers, mark, head):
            # Made before the branch had a commit, or only commits that change no bead of a
            # type with a deriver (a task created, a config set) since: nothing was missed.
            self.record([], advance=(mark, head))
            return 0
        return self._refresh_from(producers, mark)

    def _derives_nothing(self, producers: ProducerSet, mark: bytes, head: bytes) -> bool:
        """True when the index's links show that no commit from `mark` to `head` changed a
        bead of a type with a deriver: one sqlite read a commit, no git, no store."""
        path = self.root / ".runtime" / "index.sqlite3"
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

    def _refresh_from(self, producers: ProducerSet, mark: bytes) -> int:
        from beads.git import GitRepo
        from beads.index.reader import IndexReader
        from beads.records.codec import load_bead
        from beads.records.ids import parse_bead_path
        from inbox.origin import mark_items

        # The index brought to the branch (opening the store only if it is behind), and git
        # for the tree diff: the store itself, with its lock and view, is not needed.
        with IndexReader(self.root) as reader:
            head = reader.index.head()
            git = GitRepo(self.root / ".git")
            try:
                if not git.has_object(mark):
                    # The commit it stood at is gone (the branch was replaced): go on from here.
                    gone = mark.decode()
                    self.log(f"follow: watermark {gone} not in the store; now at HEAD")
                    return _created(self.record([], advance=(mark, head)))
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
                items = derive(changes, producers, self.log)
                # The origin of each item whose bead was last changed on another machine (it
                # came by sync: inbox/origin.py).
                mark_items(self.root, items, paths, self.log, git=git, head=head, stop=mark)
                fault("refresh-derived")
                made = self.record(items, advance=(mark, head))
            finally:
                git.close()
        return _created(made)


def watermark(delivery: Following) -> bytes | None:
    """The last commit `delivery`'s database derived items from."""
    return delivery.follower.watermark()


def record(
    delivery: Following,
    items: Sequence[Item],
    *,
    advance: tuple[bytes | None, bytes | None] | None = None,
) -> list[tuple[Item, bool]]:
    """`Follower.record` of `delivery`: a producer's items (a reconciler's, say)."""
    return delivery.follower.record(items, advance=advance)


def reconciled(
    delivery: Following, items: Sequence[Item], paths: Mapping[str, str]
) -> list[tuple[Item, bool]]:
    """`Follower.reconciled` of `delivery`: a reconciler's items, marked with their origin
    and recorded."""
    return delivery.follower.reconciled(items, paths)


def committed(
    delivery: Following, parent: bytes | None, commit: bytes | None, changes: Sequence[Change]
) -> list[tuple[Item, bool]]:
    """`Follower.committed` of `delivery`: the items of a producer's commit, recorded."""
    return delivery.follower.committed(parent, commit, changes)


def _created(results: list[tuple[Item, bool]]) -> int:
    return sum(1 for _, created in results if created)
