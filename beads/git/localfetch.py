"""Fetching from a remote that is a repository on this machine (a path or `file://`).

dulwich serves such a fetch in this process, reading the other repository's objects. Two
things make it need care:

- Once real git wrote a `.bitmap` beside one pack there (`git gc`, `git repack -b`),
  dulwich's bitmap reachability asks every pack of that repository for its bitmap, and a
  pack without one (any pack pushed since) makes it fail with FileNotFoundError: the sync
  was cut off with "no git repository at ...pack-....bitmap". The walk here uses dulwich's
  graph traversal instead (what git does without a bitmap; cost follows the new history).
- Every object sent is read, whole, in this process: each one's size is first read from its
  header (`beads.packcheck.stored_size`), and one over the limit refused before it is
  inflated.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from beads.git.packcheck import stored_size, too_large


class _GraphWalkStore:
    """An object store that walks history by its commits, never by bitmaps: dulwich's store,
    wrapped (not subclassed), with its reachability provider replaced."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def get_reachability_provider(self, prefer_bitmaps: bool = True) -> Any:
        from dulwich.object_store import GraphTraversalReachability

        return GraphTraversalReachability(self.store)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __getitem__(self, sha: bytes) -> Any:
        return self.store[sha]

    def __contains__(self, sha: object) -> bool:
        return sha in self.store

    def __iter__(self) -> Any:
        return iter(self.store)


def _graph_store(path: str, config: Any) -> Any:
    """The object store at `path`, walking history by its commits, never by bitmaps."""
    from dulwich.object_store import DiskObjectStore

    return _GraphWalkStore(DiskObjectStore.from_config(path, config))


def fetch_pack(
    path: str,
    determine_wants: Callable[..., list[bytes]],
    graph_walker: Any,
    write: Callable[[bytes], Any],
    limit: int,
    what: str,
) -> dict[bytes, bytes]:
    """Send to `write` a pack of what `determine_wants` asks of the repository at `path`
    (less what `graph_walker` says we hold); returns its refs. An object over `limit` bytes
    is refused (InvalidInput) before it is read."""
    from dulwich.object_store import MissingObjectFinder
    from dulwich.pack import load_pack_index, write_pack_from_container
    from dulwich.repo import Repo

    with closing(Repo(path)) as repo:
        store = _graph_store(repo.object_store.path, repo.get_config())
        try:
            listed = repo.get_refs()
            # Each commit looked up once: a flood of tags on one commit (refused by count
            # in `determine_wants`) costs one lookup, not one a tag.
            held = {sha: sha in store for sha in set(listed.values())}
            refs = {ref: sha for ref, sha in listed.items() if held[sha]}
            wants = determine_wants(refs)
            if not wants:
                return refs
            haves = store.find_common_revisions(graph_walker)
            finder = MissingObjectFinder(store, haves=haves, wants=wants)
            object_ids = list(finder)
            objects_dir = Path(store.path)
            indexes = [
                (idx.with_suffix(".pack"), load_pack_index(str(idx), repo.object_format))
                for idx in sorted((objects_dir / "pack").glob("pack-*.idx"))
            ]
            try:
                for sha, _hint in object_ids:
                    # None: in an alternate object store, which dulwich reads itself.
                    size = stored_size(objects_dir, sha, indexes)
                    if size is not None and size > limit:
                        raise too_large(what, size, limit)
            finally:
                for _pack, index in indexes:
                    index.close()
            write_pack_from_container(
                write,
                store,
                object_ids,
                repo.object_format,
                other_haves=finder.get_remote_has(),
            )
            return refs
        finally:
            store.close()
