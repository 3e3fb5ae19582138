"""Walks of the store's history: what one commit has that another lacks, and where two
histories meet."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING, Any

from beads.errors import GcError, InvalidInput, NotFound, StorageError
from beads.git.objects import DamagedObject, MissingCommit

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterator

    from beads.git.repo import GitRepo

# A tree entry's mode for a submodule's commit: never an object of the repository holding it.
GITLINK = 0o160000

# Seconds of clock difference between machines a history walk allows for (`only_in`): one
# machine's commits are never older than their parents, and 1 s covers commits of a second.
SKEW_SLACK = 5


def only_in(
    git: GitRepo, new: bytes, known: bytes | None, absent: set[bytes] | None = None
) -> list[bytes]:
    """The commits reachable from `new` and not from `known`, newest first.

    Both histories are walked together, newest commit first, painting what `known` reaches;
    the walk stops once every commit left to visit is painted and is older, by `SKEW_SLACK`,
    than the oldest unpainted one found: its cost follows the divergence and the last few
    seconds of history, not the whole history.
    (A clock skewed past that slack can make it list a commit `known` reaches as well:
    sending an object twice, or one needless merge commit, is harmless.)

    A commit met from `new` alone whose object is not in the store raises, unless `absent`
    is given: it is added there and its line is not followed (its parents are unknown)."""
    import heapq

    new_flag, known_flag = 1, 2
    flags: dict[bytes, int] = {}
    times: dict[bytes, int] = {}
    parents: dict[bytes, list[bytes]] = {}  # each commit read once
    heap: list[tuple[int, int, bytes]] = []

    def mark(sha: bytes, flag: int) -> None:
        had = flags.get(sha, 0)
        if had | flag != had:
            if sha not in times:
                commit = git.commit_of(sha)
                if commit is None:
                    present = git.has_object(sha)
                    if not present and flag & known_flag:  # this store's own history
                        raise MissingCommit(sha)  # names gc doctor, which fetches it again
                    if not present and absent is not None:
                        absent.add(sha)
                        return
                    what = "is not a commit" if present else "is missing"
                    named = sha.decode()
                    raise StorageError(f"the history names {named} as a commit, which {what}")
                times[sha], parents[sha] = commit.commit_time, commit.parents
            flags[sha] = had | flag
            # Painted commits first among equal times: a second's commits stay in order.
            heapq.heappush(heap, (-times[sha], -flags[sha], sha))

    mark(new, new_flag)
    if known is not None and git.commit_of(known) is not None:
        mark(known, known_flag)
    oldest = times[new]
    while heap:
        if (
            all(flags[sha] & known_flag for _t, _f, sha in heap)
            and -heap[0][0] < oldest - SKEW_SLACK
        ):
            break
        _time, _flag, sha = heapq.heappop(heap)
        if flags[sha] == new_flag:
            oldest = min(oldest, times[sha])
        for parent in parents[sha]:
            mark(parent, flags[sha])
    only = [sha for sha, flag in flags.items() if flag == new_flag]
    return sorted(only, key=lambda sha: -times[sha])


def changed_entries(
    read: Callable[[bytes], Any], tree: Any, olds: list[Any], seen: Container[bytes]
) -> Iterator[tuple[Any, list[bytes], Any]]:
    """The entries under `tree` (dulwich's Tree), at any depth, whose id none of the trees
    `olds` holds at the same path and that are not in `seen`: each with the ids the olds
    hold there, and for a directory its tree as `read` returns it (else None). Directories
    are entered only where they changed, so the read follows the change, not the tree. The
    caller adds each yielded id to `seen` before the next. A stack, not recursion: a
    stranger's trees may nest deeper than Python recurses; an object read where a tree
    belongs that is none is not entered."""
    from dulwich.objects import Tree, TreeEntry

    todo = [(tree, olds)]
    while todo:
        tree, olds = todo.pop()
        if not isinstance(tree, Tree):
            continue
        # By name, in the tree's own order: `Tree.iteritems` sorts the entries at each call,
        # and most entries of a tree are its parent's, passed over at once.
        for name in tree:
            mode, sha = tree[name]
            before = [old[name][1] for old in olds if name in old]
            if sha in before or sha in seen or stat.S_IFMT(mode) == GITLINK:
                continue
            entry = TreeEntry(name, mode, sha)
            if not stat.S_ISDIR(mode):
                yield entry, before, None
                continue
            subtree = read(entry.sha)
            yield entry, before, subtree
            older = [read(sha) for sha in before]
            todo.append((subtree, [old for old in older if isinstance(old, Tree)]))


def objects_since(
    git: GitRepo, new: bytes, known: bytes | None, working: Callable[[], None] = lambda: None
) -> list[Any]:
    """The objects a holder of `known` lacks to have `new`: each commit `known` does not
    reach, with the trees and blobs its tree holds that none of its parents hold at the same
    path (`changed_entries`). `working()` is called once per 1,000 objects found (a push's
    deadline counts silence; a large first push is work)."""
    out: dict[bytes, Any] = {}

    def add(sha: bytes, obj: Any) -> None:
        out[sha] = obj
        if len(out) % 1000 == 0:
            working()

    for sha in only_in(git, new, known):
        commit = git.commit_of(sha)
        assert commit is not None
        add(sha, commit)
        olds = [git.objects[git.tree_of(parent)] for parent in commit.parents]  # type: ignore[index]
        if commit.tree in out or any(old.id == commit.tree for old in olds):
            continue
        add(commit.tree, git.objects[commit.tree])
        changed = changed_entries(git.objects.__getitem__, out[commit.tree], olds, out)
        for entry, _before, subtree in changed:
            add(entry.sha, subtree if subtree is not None else git.objects[entry.sha])
    return list(out.values())


def merge_base(git: GitRepo, ours: bytes, theirs: bytes) -> bytes | None:
    """The best common ancestor of two commits (None: unrelated histories)."""
    from dulwich.graph import find_merge_base
    from dulwich.repo import ParentsProvider

    class _Graph:  # what find_merge_base reads of a repository
        object_store = git.objects

        def parents_provider(self) -> ParentsProvider:
            return ParentsProvider(git.objects)

    found = find_merge_base(_Graph(), [ours, theirs])  # type: ignore[arg-type]
    return found[0] if found else None


def walk(
    git: GitRepo,
    head: bytes,
    stop: bytes | None = None,
    *,
    limit: int | None = None,
    children_first: bool = False,
) -> Iterator[Any]:
    """The commits reachable from `head` and not from `stop`, newest first, at most `limit`
    of them (dulwich's commit objects: `parents`, `committer`, `commit_time`, `message`).
    With `children_first`, every commit comes before its parents whatever their times say
    (commits made in the same second, or a clock set back, order by time as they please).

    A commit the history names whose object is absent ends the walk with MissingCommit, one
    that cannot be read with DamagedObject: both name `gc doctor`, which restores them."""
    from dulwich.errors import MissingCommitError
    from dulwich.walk import ORDER_DATE, ORDER_TOPO, Walker

    exclude = [stop] if stop else None
    order = ORDER_TOPO if children_first else ORDER_DATE
    walker = Walker(git.objects, include=[head], exclude=exclude, max_entries=limit, order=order)
    last: bytes | None = None
    try:
        for entry in walker:
            last = entry.commit.id
            yield entry.commit
    except MissingCommitError as exc:
        missing: bytes | None = exc.sha
    except GcError:
        raise
    except Exception:  # a damaged object: dulwich raises several kinds
        missing = None
    else:
        return
    # Raised once dulwich's exception is dropped (see `GitRepo._stored_raw`).
    if missing is not None and not git.has_object(missing):
        raise MissingCommit(missing)
    after = f" past commit {last.decode()}" if last is not None else ""
    raise DamagedObject(f"the history cannot be read{after}: a git object is damaged")


def missing_commits(git: GitRepo, head: bytes) -> set[bytes]:
    """The commits `head`'s history names whose objects are not in the store (a loose file
    deleted, a disk fault), each read once: the walk goes through every commit it can read,
    and a commit that cannot be read stops it on that line (its own parents are unknown)."""
    missing: set[bytes] = set()
    seen = {head}
    todo = [head]
    while todo:
        sha = todo.pop()
        commit = git.commit_of(sha)
        if commit is None:
            if not git.has_object(sha):
                missing.add(sha)
            continue  # present but unreadable: the check of the objects reports it
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return missing


def missing_since(git: GitRepo, head: bytes, known: bytes) -> set[bytes]:
    """The commits `head`'s history names and `known`'s does not whose objects are not in
    the store (as `missing_commits` finds them, reading only the commits made since
    `known`); a commit of `known`'s own history found missing raises MissingCommit."""
    if head == known:
        return set()
    if git.commit_of(head) is None:
        return set() if git.has_object(head) else {head}
    absent: set[bytes] = set()
    only_in(git, head, known, absent)
    return absent


def resolve_commit(git: GitRepo, target: str) -> bytes:
    """The commit `target` names: a full id, or an unambiguous prefix of 4 or more hex digits
    (as `gc log` prints them) of a commit in the branch's history. Raises InvalidInput for
    text that is no commit id or an ambiguous prefix, NotFound for no such commit."""
    text = target.lower()  # nothing stripped: a newline or a space makes it no commit id
    if not 4 <= len(text) <= 40 or any(c not in "0123456789abcdef" for c in text):
        raise InvalidInput(f"invalid commit {target!r}: expected a commit id (4 to 40 hex digits)")
    if len(text) == 40:
        sha = text.encode()
        if git.commit_of(sha) is None:
            raise NotFound(f"no commit {target} in the store")
        return sha
    head = git.head()
    history = only_in(git, head, None) if head is not None else []
    matches = [c for c in history if c.decode().startswith(text)]
    if not matches:
        raise NotFound(f"no commit {target} in the branch's history")
    if len(matches) > 1:
        raise InvalidInput(f"commit prefix {target!r} is ambiguous; give more digits")
    return matches[0]
