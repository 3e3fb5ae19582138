"""A producer's commit and its items: `followed_batch` commits, then records what the commit
means for the inbox and moves the delivery database's watermark past it (inbox/follow.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from inbox.delivery import Delivery
from inbox.producers import Change

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from beads.store import Batch, Store
    from inbox.producers import ProducerSet


def open_delivery(store: Store, producers: ProducerSet | None = None) -> Delivery | None:
    """The store's delivery database for a producer's writes (deriving with `producers`, or
    the program's default set), or None when it cannot be opened (a full disk, a read-only
    file): a write never fails for it, since the next drain derives the same items from
    git."""
    try:
        return Delivery(store.root, producers, config=lambda: store.config)
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
                delivery.follower.committed(batch.base, batch.commit_id, changes)
            except Exception as exc:  # noqa: BLE001 - see above
                commit = batch.commit_id.decode()
                delivery.note_fault(f"items of commit {commit} not recorded: {exc}")
    finally:
        if own and delivery is not None:
            delivery.close()
