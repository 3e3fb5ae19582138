"""Walks of the store's history: what one commit has that another lacks, and where two
histories meet."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from beads.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from beads.git.repo import GitRepo

# Seconds of clock difference between machines a history walk allows for (`only_in`): one
# machine's commits are never older than their parents, and 1 s covers commits of a second.
SKEW_SLACK = 5


def only_in(git: GitRepo, new: bytes, known: bytes | None) -> list[bytes]:
    """The commits reachable from `new` and not from `known`, newest first.

    Both histories are walked together, newest commit first, painting what `known` reaches;
    the walk stops once every commit left to visit is painted and is older, by `SKEW_SLACK`,
    than the oldest unpainted one found: its cost follows the divergence and the last few
    seconds of history, not the whole history.
    (A clock skewed past that slack can make it list a commit `known` reaches as well:
    sending an object twice, or one needless merge commit, is harmless.)"""
    import heapq

    new_flag, known_flag = 1, 2
    flags: dict[bytes, int] = {}
    times: dict[bytes, int] = {}
    parents: dict[bytes, list[bytes]] = {}  # each commit read once
    heap: list[tuple[int, int, bytes]] = []

    def mark(sha: bytes, flag: int) -> None:
        had = flags.get(sha, 0)
        if had | flag != had:
            flags[sha] = had | flag
            if sha not in times:
                commit = git.commit_of(sha)
                if commit is None:
                    what = "is not a commit" if git.has_object(sha) else "is missing"
                    named = sha.decode()
                    raise StorageError(f"the history names {named} as a commit, which {what}")
                times[sha], parents[sha] = commit.commit_time, commit.parents
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


def objects_since(
    git: GitRepo, new: bytes, known: bytes | None, working: Callable[[], None] = lambda: None
) -> list[Any]:
    """The objects a holder of `known` lacks to have `new`: each commit `known` does not
    reach, with the trees and blobs its tree holds that none of its parents hold at the same
    path (read only along the paths that changed). `working()` is called once per 1,000
    trees read (a push's deadline counts silence; a large first push is work)."""
    from dulwich.objects import Tree

    out: dict[bytes, Any] = {}
    trees = [0]

    def walk(tree_id: bytes, olds: list[bytes]) -> None:
        if tree_id in out or tree_id in olds:
            return
        tree = git.objects[tree_id]
        out[tree_id] = tree
        trees[0] += 1
        if trees[0] % 1000 == 0:
            working()
        old_trees = [git.objects[old] for old in olds]
        for entry in tree.iteritems():
            before = [t[entry.path][1] for t in old_trees if entry.path in t]
            if entry.sha in before:
                continue
            if entry.mode & 0o170000 == 0o040000:
                walk(entry.sha, [b for b in before if isinstance(git.objects[b], Tree)])
            elif entry.sha not in out:
                out[entry.sha] = git.objects[entry.sha]

    for sha in only_in(git, new, known):
        commit = git.commit_of(sha)
        assert commit is not None
        out[sha] = commit
        walk(commit.tree, [git.tree_of(parent) for parent in commit.parents])  # type: ignore[misc]
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
    git: GitRepo, head: bytes, stop: bytes | None = None, *, limit: int | None = None
) -> Iterator[Any]:
    """The commits reachable from `head` and not from `stop`, newest first, at most `limit`
    of them (dulwich's commit objects: `parents`, `committer`, `commit_time`, `message`)."""
    from dulwich.walk import Walker

    exclude = [stop] if stop else None
    for entry in Walker(git.objects, include=[head], exclude=exclude, max_entries=limit):
        yield entry.commit
