"""The readable part of a history cut where commits are missing (`gc doctor` found no copy
of them): what `gc log` still shows, newest first down to the cut."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from beads.git.objects import DamagedObject

if TYPE_CHECKING:
    from collections.abc import Iterator


class Reader(Protocol):
    """What the walk reads of a repository (`beads.git.repo.GitRepo` is one)."""

    def commit_of(self, sha: bytes) -> Any: ...

    def has_object(self, sha: bytes) -> bool: ...

    def get(self, sha: bytes) -> Any: ...


def readable_history(
    git: Reader, head: bytes, cut: list[bytes], path: bytes | None = None
) -> Iterator[Any]:
    """The commits of `head`'s history that can be read, newest first by commit time, only
    those that changed `path` when it is given (dulwich's commit objects), for a history cut
    where commits are missing (`gc doctor` found no copy): each missing commit met is added
    to `cut`, and what lies past it is unknown. A commit whose parent is missing is compared
    with nothing, as a first commit is. A commit present but unreadable raises
    DamagedObject."""
    import heapq

    heap: list[tuple[int, int, Any]] = []
    seen = {head}

    def push(sha: bytes) -> None:
        commit = git.commit_of(sha)
        if commit is None:
            if git.has_object(sha):
                raise DamagedObject(f"the history cannot be read: commit {sha.decode()} is damaged")
            cut.append(sha)
            return
        heapq.heappush(heap, (-commit.commit_time, len(seen), commit))

    push(head)
    while heap:
        _time, _order, commit = heapq.heappop(heap)
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                push(parent)
        if path is None or _changes_path(git, commit, path):
            yield commit


def _changes_path(git: Reader, commit: Any, path: bytes) -> bool:
    """Whether `commit` holds `path` otherwise than each of its readable parents (a merge
    counts when it differs from every one); with none readable, whether it holds it."""
    from dulwich.object_store import tree_lookup_path

    def entry(tree: bytes) -> tuple[int, bytes] | None:
        try:
            return tree_lookup_path(git.get, tree, path)
        except Exception:  # absent, or a tree that cannot be read: dulwich raises several kinds
            return None

    ours = entry(commit.tree)
    olds = [entry(parent.tree) for sha in commit.parents if (parent := git.commit_of(sha))]
    if not olds:
        return ours is not None
    return all(old != ours for old in olds)
