"""The store's history as people read it: each commit with a field-level diff of its beads.

Built from git alone: a commit's changed files come from the tree diff against its first
parent (identical subtrees are skipped unread), and only the changed blobs are parsed, each
once (blobs are immutable, so parsed ones are kept by their id). A commit that changed more
beads than a page shows (a batch) stops the diff there and says so.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from beads.errors import InvalidInput, NotFound
from beads.git.history import resolve_commit
from beads.records.codec import load_bead
from beads.records.ids import parse_bead_path
from beads.records.record import FIELD_ORDER

if TYPE_CHECKING:
    from beads.git import LogEntry
    from beads.store import Store

# Beads diffed per commit; a batch's other changes are counted as "more", not read.
BEADS_PER_COMMIT = 20


class Kept(MutableMapping[bytes, Any]):
    """At most `size` things by the id of their git object, the least recently used dropped
    first; safe to share between threads. Git objects never change, so nothing kept is stale:
    a history page diffs neighbouring commits, which share most of their trees, and a bead's
    new blob in one commit is its old blob in the next."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, key: bytes) -> Any:
        with self._lock:
            self._items.move_to_end(key)  # KeyError when absent, as a mapping's
            return self._items[key]

    def __setitem__(self, key: bytes, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def __delitem__(self, key: bytes) -> None:
        with self._lock:
            del self._items[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)


# Parsed beads, by blob id (None: a blob that is not a bead). The trees the diffs read are
# kept by the repository (`GitRepo.trees`).
_parsed = Kept(4096)
_UNREAD = object()


def forget() -> None:
    """Drop the parsed beads (a benchmark's cold start; the trees go with the store)."""
    _parsed.clear()


def commit_id(store: Store, text: str) -> bytes:
    """The whole id of the commit a page's `from` names: a whole id, or an unambiguous prefix
    of 4 or more hex digits (the 10 `gc log` prints) of a commit of the branch, as
    `gc doctor --reset-to` takes one. InvalidInput for no commit id or an ambiguous prefix,
    NotFound for no such commit."""
    return resolve_commit(store.git, text)


def history(
    store: Store, *, start: bytes | None = None, limit: int = 20, bead: str | None = None
) -> dict[str, Any]:
    """`limit` commits from `start` (default: the branch), newest first, each with its diff;
    with `bead`, only the commits that changed that bead, diffed for it alone. `next` is the
    cursor of the following page (None on the last)."""
    path = None
    if bead is not None:
        location = store.index.location(store.resolve(bead))
        assert location is not None
        path = location[0]
    if start is not None and store.git.commit_of(start) is None:
        raise NotFound(f"no commit {start.decode()}")
    entries = store.log(bead, limit + 1, start=start)
    shown, more = entries[:limit], entries[limit:]
    return {
        "commits": [commit_json(store, entry, only=path) for entry in shown],
        "next": more[0].commit if more else None,
    }


def commit_json(store: Store, entry: LogEntry, *, only: str | None = None) -> dict[str, Any]:
    """A commit as `gc log --json` shows it, with `changes`: each changed bead's field-level
    diff (only the file `only`, when given), and `more` when the commit changed more beads
    than BEADS_PER_COMMIT."""
    git = store.git
    commit = git.commit_of(entry.commit.encode())
    assert commit is not None  # the log just walked it
    parent = commit.parents[0] if commit.parents else None
    changes: list[dict[str, Any]] = []
    more = False
    for change in git.changes(parent, commit.id):
        if only is not None and change.path != only:
            continue
        located = parse_bead_path(change.path)
        if located is None:  # config.yaml and other files: named, not diffed
            changes.append({"path": change.path, "action": _action(change), "fields": []})
            continue
        if len(changes) >= BEADS_PER_COMMIT:
            more = True
            break
        old, new = _parse(store, change.old_sha), _parse(store, change.new_sha)
        shown = new or old or {}
        changes.append(
            {
                "path": change.path,
                "id": located[1],
                "type": located[0],
                "title": shown.get("title", ""),
                "action": _action(change),
                "fields": field_diff(old or {}, new or {}),
            }
        )
    return {**entry.to_json(), "changes": changes, "more": more}


def _action(change: Any) -> str:
    if change.old_sha is None:
        return "created"
    return "deleted" if change.new_sha is None else "changed"


def field_diff(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The fields that differ between two versions of a bead (as mappings), in the bead's
    field order but for its id and type (a change names them): `{"field", "old", "new"}`, a
    meta key as `meta.<key>`; a side without the field (or the bead) holds None."""
    out = []
    for field in FIELD_ORDER:
        if field in ("id", "type", "meta"):  # the change names the bead; meta comes by key
            continue
        before, after = old.get(field), new.get(field)
        if before != after and (before or after):  # [] and None alike are "empty"
            out.append({"field": field, "old": before, "new": after})
    old_meta, new_meta = old.get("meta") or {}, new.get("meta") or {}
    for key in [*old_meta, *(k for k in new_meta if k not in old_meta)]:
        before, after = old_meta.get(key), new_meta.get(key)
        if before != after or (key in old_meta) != (key in new_meta):
            out.append({"field": f"meta.{key}", "old": before, "new": after})
    return out


def _parse(store: Store, sha: bytes | None) -> dict[str, Any] | None:
    """The bead a blob holds, as a mapping (None for no blob, or one that is not a bead)."""
    if sha is None:
        return None
    found = _parsed.get(sha, _UNREAD)
    if found is not _UNREAD:
        return found
    try:
        found = load_bead(store.git.read(sha), max_body=1 << 62).to_dict()
    except InvalidInput:  # a file gc did not write: named in the diff, its fields unknown
        found = None
    _parsed[sha] = found
    return found
