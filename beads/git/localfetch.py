"""Fetching from a remote that is a repository on this machine (a path or `file://`).

dulwich serves such a fetch in this process, reading the other repository's objects. Two
things make it need care:

- Once real git wrote a `.bitmap` beside one pack there (`git gc`, `git repack -b`),
  dulwich's bitmap reachability asks every pack of that repository for its bitmap, and a
  pack without one (any pack pushed since) makes it fail with FileNotFoundError: the sync
  was cut off with "no git repository at ...pack-....bitmap". The walk here uses dulwich's
  graph traversal instead (what git does without a bitmap; cost follows the new history).
- Every object sent, and every commit and tree the walk reads, is read whole in this
  process: each one's size is first read from its headers, its delta chain's included
  (`beads.git.strangerobjects.stored_size`), and one over the limit refused before it is
  inflated. Every read then goes through `beads.git.strangerobjects.StrangerObjects`, never
  dulwich's own: each entry it inflates is refused over the limit before it is inflated
  and inflated no further than its header says, so what the other repository's files say or
  become meanwhile (a pack added under an object's id, a loose file lying about its size,
  a small delta on a large base, an alternate) never makes this process hold more.
- The walk is this process's work on a stranger's history, before anything is sent: it
  counts as the remote's progress for the exchange's deadline (`sync.timeout`) every
  `WORKING_EVERY` objects, and ends (InvalidInput) past as many objects as a pack of
  `sync.max_fetch_bytes` can hold. A deep history that keeps being read is fetched; a
  read that stalls is cut by the deadline, one that never ends by the count.

What to send is found by `new_objects`, a walk of the new history that stops at the commits
the receiving store holds (it asks the store itself: a store holds each of its commits with
everything it names), and reads of each new commit only the paths its parents did not have.
dulwich's own finder first walks the whole history of the receiver's commits and the whole
tree of each one the new history meets: a sync's cost would follow the store's size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput, StorageError
from beads.git.history import changed_entries
from beads.git.packcheck import too_large
from beads.git.refs import BRANCH, is_sha
from beads.git.strangerobjects import StrangerObjects, stored_size

# Objects found (or sized) between two calls of the walk's `working`.
WORKING_EVERY = 100
# The fewest bytes an object takes in a pack: a 1-byte header and the shortest zlib stream.
MIN_PACK_ENTRY = 9
# A pack's own header and trailer.
PACK_OVERHEAD = 12 + 20
# The tree entries a local fetch's walk keeps read trees for (`_RecentTrees`): a store's
# trees hold up to 256 entries, and a commit changes a few of them.
RECENT_TREE_ENTRIES = 64 * 1024


class _GraphWalkStore:
    """An object store that walks history by its commits, never by bitmaps, and reads every
    object through `objects` (`StrangerObjects`): dulwich's store, wrapped (not subclassed),
    with its reachability provider and its reads replaced."""

    def __init__(self, store: Any, objects: StrangerObjects) -> None:
        self.store = store
        self.objects = objects
        # Objects the receiver holds that a thin pack may name as a delta's base.
        self.receiver_has: set[bytes] = set()

    def get_reachability_provider(self, prefer_bitmaps: bool = True) -> Any:
        from dulwich.object_store import GraphTraversalReachability

        return GraphTraversalReachability(self.store)

    def iter_unpacked_subset(
        self, shas: Any, *, allow_missing: bool = False, convert_ofs_delta: bool = True
    ) -> Iterator[Any]:
        """The deltas among `shas` (hex ids) that a pack holds and that dulwich reuses, as
        stored, read at their offsets: those on a base among `shas` or the receiver's objects
        (`receiver_has`), named by id. Every other object is left for dulwich to send whole
        (read through `__getitem__`). dulwich's own reads every object of every pack to find
        them, a cost of the repository's size.

        A delta on a base at an offset of its pack (git's usual kind) names its base by id
        when the base is among `shas` or the receiver's objects. (dulwich's own lookup of the
        id at an offset reads the whole index, once per delta: a clone's cost grew with the
        square of its history.)"""
        from dulwich.objects import hex_to_sha, sha_to_hex
        from dulwich.pack import OFS_DELTA, REF_DELTA, UnpackedObject

        # Where each object sent, and each the receiver holds, is: the first pack holding it
        # and its offset there; and per pack, the id at each of those offsets.
        where: dict[bytes, tuple[Any, int]] = {}
        at: dict[tuple[Any, int], bytes] = {}
        wanted = list(shas)
        for sha in [*wanted, *self.receiver_has]:
            found = self.objects.located(sha)
            if found is not None:
                where[sha] = found
                at[found] = hex_to_sha(sha)
        named = {*wanted, *self.receiver_has}
        for sha in wanted:
            if sha not in where:
                if not allow_missing:
                    raise KeyError(sha)
                continue
            pack, offset = where[sha]
            try:
                type_num, _size, base = self.objects.entry(pack, offset)
                if type_num == OFS_DELTA and convert_ofs_delta:
                    base = at.get((pack, offset - base))
                if not isinstance(base, bytes) or sha_to_hex(base) not in named:
                    continue  # no delta dulwich reuses: sent whole
                _base, data = self.objects.delta_data(pack, offset)
            except FileNotFoundError:  # the pack went (the remote repacked): sent whole
                continue
            yield UnpackedObject(  # with its id, which a delta alone does not give
                REF_DELTA,
                delta_base=base,
                decomp_len=len(data),
                sha=hex_to_sha(sha),
                decomp_chunks=[data],
                offset=offset,
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __getitem__(self, sha: bytes) -> Any:
        from dulwich.objects import ShaFile

        type_num, raw = self.objects.get_raw(sha)
        return ShaFile.from_raw_string(type_num, raw, sha)

    def __contains__(self, sha: object) -> bool:
        return isinstance(sha, bytes) and sha in self.objects

    def __iter__(self) -> Any:
        return iter(self.store)


class _Sized:
    """An object store whose reads (`store[sha]`) first pass each id to `check`."""

    def __init__(self, store: Any, check: Callable[[bytes], None]) -> None:
        self.store = store
        self.check = check

    def __getitem__(self, sha: bytes) -> Any:
        self.check(sha)
        return self.store[sha]


def _graph_store(path: str, config: Any, objects: StrangerObjects) -> Any:
    """The object store at `path`, walking history by its commits, never by bitmaps, and
    reading its objects through `objects`."""
    from dulwich.object_store import DiskObjectStore

    return _GraphWalkStore(DiskObjectStore.from_config(path, config), objects)


def fetch_pack(
    path: str,
    determine_wants: Callable[..., list[bytes]],
    held: Callable[[bytes], bool],
    write: Callable[[bytes], Any],
    limit: int,
    what: str,
    *,
    working: Callable[[], None],
    max_fetch: int,
) -> dict[bytes, bytes]:
    """Send to `write` a pack of what `determine_wants` asks of the repository at `path`,
    less the history of the commits `held` says the receiver holds; returns its refs. An
    object over `limit` bytes is refused (InvalidInput) before it is read. The walk that
    finds the objects calls `working()` every `WORKING_EVERY` objects (the exchange's
    deadline, `sync.timeout`, then restarts), and is refused (InvalidInput) once it found
    more objects than a pack of `max_fetch` bytes can hold: the history walked is a
    stranger's."""
    from dulwich.pack import write_pack_from_container
    from dulwich.repo import Repo

    with closing(Repo(path)) as repo:
        objects = StrangerObjects(Path(repo.object_store.path), limit, what, repo.object_format)
        store = _graph_store(repo.object_store.path, repo.get_config(), objects)
        try:
            listed = repo.get_refs()
            # Each commit looked up once: a flood of tags on one commit (refused by count
            # in `determine_wants`) costs one lookup, not one a tag.
            present = {sha: is_sha(sha) and sha in store for sha in set(listed.values())}
            branch = listed.get(BRANCH.encode())
            if branch is None:  # a symbolic ref that resolves to nothing is left out too
                branch = repo.refs.read_ref(BRANCH.encode())
                present[branch] = False
            if branch is not None and not present[branch]:
                # Left out as git leaves out a broken ref, the branch would read as an empty
                # remote, and every push to it be refused as if the remote kept moving.
                raise StorageError(
                    f"{what} is damaged: its branch main names "
                    f"{branch[:40].decode(errors='replace')!r}, which is no object it "
                    "holds (git fsck there); nothing was merged"
                )
            refs = {ref: sha for ref, sha in listed.items() if present[sha]}
            wants = determine_wants(refs)
            if not wants:
                return refs
            checked: set[bytes] = set()
            most = max(0, max_fetch - PACK_OVERHEAD) // MIN_PACK_ENTRY

            def walked(count: int) -> None:
                if count > most:
                    raise InvalidInput(
                        f"{what} has more than {most} objects to send, more than "
                        f"{max_fetch} bytes can carry in one fetch "
                        "(sync.max_fetch_bytes); nothing was merged"
                    )
                if count % WORKING_EVERY == 0:
                    working()

            def sized(sha: bytes) -> None:
                if sha in checked:
                    return
                # None: nowhere, which the read says (dulwich's KeyError, with its id).
                size = stored_size(objects, sha)
                if size is not None and size > limit:
                    raise too_large(what, size, limit)
                checked.add(sha)

            # The walk reads commits and trees: each is sized before it is read.
            object_ids, receiver_has = new_objects(_Sized(store, sized), wants, held, walked)
            for count, (sha, _hint) in enumerate(object_ids, 1):
                sized(sha)
                if count % WORKING_EVERY == 0:
                    working()
            store.receiver_has = receiver_has
            write_pack_from_container(
                write,
                store,
                object_ids,
                repo.object_format,
                other_haves=receiver_has,
            )
            return refs
        finally:
            objects.close()
            store.close()


def new_objects(
    store: Any,
    wants: list[bytes],
    held: Callable[[bytes], bool],
    walked: Callable[[int], None] = lambda count: None,
) -> tuple[list[tuple[bytes, tuple[int, bytes | None]]], set[bytes]]:
    """The objects of the history of `wants` in `store` that a receiver lacks when it holds
    the commits `held` says it holds, each with its pack hint (type, name); and the ids of
    objects the receiver holds that those were compared with (bases a thin pack may name).

    The walk goes from `wants` down to the held commits; of each new commit it reads the
    trees along the paths where it differs from its parents (what a parent has at a path
    is the parent's: held by the receiver, or sent with the parent). A missing object
    raises dulwich's KeyError with its id. A want that is not a commit is sent alone: the
    receiver's checks refuse what is not a store's commit. `walked(count)` is called with
    the number of objects found so far, at each one found (it raises to end the walk)."""
    from dulwich.objects import Blob, Commit, Tree

    out: dict[bytes, tuple[int, bytes | None]] = {}
    bases: set[bytes] = set()
    commits: dict[bytes, Commit] = {}

    def found(sha: bytes, hint: tuple[int, bytes | None]) -> None:
        out[sha] = hint
        walked(len(out))

    stack = list(wants)
    while stack:
        sha = stack.pop()
        if sha in out or held(sha):
            continue
        obj = store[sha]
        found(sha, (obj.type_num, None))
        if isinstance(obj, Commit):
            commits[sha] = obj
            stack.extend(obj.parents)

    read = _RecentTrees(store.__getitem__)
    for commit in commits.values():
        # A parent that is no commit (a crafted history) was sent alone by the walk above,
        # for the receiver's checks to refuse; it has no tree to compare with.
        parents = [
            commits[parent] if parent in commits else store[parent] for parent in commit.parents
        ]
        roots = [read(parent.tree) for parent in parents if isinstance(parent, Commit)]
        parent_trees = [tree for tree in roots if isinstance(tree, Tree)]
        bases.update(tree.id for tree in parent_trees)
        if commit.tree in out or any(tree.id == commit.tree for tree in parent_trees):
            continue
        root = read(commit.tree)  # not a tree: sent alone, for the receiver's checks
        found(commit.tree, (root.type_num, b""))
        for entry, before, subtree in changed_entries(read, root, parent_trees, out):
            bases.update(before)
            kind = Blob.type_num if subtree is None else Tree.type_num
            found(entry.sha, (kind, entry.path))
    return list(out.items()), bases - out.keys()


class _RecentTrees:
    """Reads of objects through `read`, the trees among them kept while they total at most
    `RECENT_TREE_ENTRIES` entries, the least lately used dropped first. The walk reads each
    commit's trees and its parents' at the same paths, and meets a commit before its parent:
    a parent's trees are read again as its own."""

    def __init__(self, read: Callable[[bytes], Any]) -> None:
        self.read = read
        self.kept: OrderedDict[bytes, Any] = OrderedDict()
        self.entries = 0

    def __call__(self, sha: bytes) -> Any:
        from dulwich.objects import Tree

        tree = self.kept.get(sha)
        if tree is not None:
            self.kept.move_to_end(sha)
            return tree
        obj = self.read(sha)
        if isinstance(obj, Tree):
            self.kept[sha] = obj
            self.entries += len(obj)
            while self.entries > RECENT_TREE_ENTRIES and len(self.kept) > 1:
                _sha, dropped = self.kept.popitem(last=False)
                self.entries -= len(dropped)
        return obj
