"""`gc doctor` and the history: commits the gate for incoming trees would refuse
(`beads.sync.treegate`) that reached the branch anyway (a ref moved by hand, a history from
before the gate), and `gc doctor --reset-to` to leave them.

Each run checks only the commits added since the last run (the commit it reached is kept in
`.runtime/history-checked`, with the bad entries found so far, whose commits are checked
again while the branch still reaches them): its cost follows what changed, as the index's
catch-up does. A store whose record is missing is checked from its first commit once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from beads import files
from beads.branch import is_sha
from beads.errors import InvalidInput, NotFound
from beads.git.history import resolve_commit, walk
from beads.health.problems import Problem, Report
from beads.sync.remote import only_in
from beads.sync.treegate import BadEntry, find_bad

if TYPE_CHECKING:
    from pathlib import Path

    from beads.store import Store

MARK_FILE = "history-checked"
# How many bad entries a report keeps (a history full of them needs one reset, not a list).
KEEP_FOUND = 20


def check_history(store: Store, head: bytes, report: Report) -> None:
    """Report each entry outside the layout that the branch's history holds, naming its
    commit and `gc doctor --reset-to <the commit before the first bad one>`."""
    git = store.git
    mark, known = _read_mark(store.runtime)
    if mark is not None and not git.has_object(mark):
        mark, known = None, []
    commits = only_in(git, head, mark) if mark != head else []
    # The commits of the entries found before are checked again: an object missing then may
    # be back (doctor writes a blob again from the view file that hashes to it).
    again = sorted({e.commit for e in known if _reaches(store, head, e.commit)})
    found = find_bad(git.objects, [commit.encode() for commit in again])
    found += find_bad(git.objects, commits)
    found = found[:KEEP_FOUND]
    _write_mark(store, head, found)
    if not found:
        return
    repair = _repair(store, _first_in_history(store, head, {e.commit for e in found}))
    for entry in found:
        report.problems.append(
            Problem(
                "history",
                entry.path,
                f"commit {entry.commit[:12]} holds it: {entry.reason}; gc reads past it, "
                f"but its history is one the gate for incoming trees refuses; {repair}",
            )
        )


def _first_in_history(store: Store, head: bytes, commits: set[str]) -> str:
    """Which of `commits` (of `head`'s history) comes first in it: the one whose own history
    holds none of the others. By the parents, never the commit times, which commits made in
    the same second or under a clock set back give in any order. (A walk in that order reads
    the whole history first: only a history holding bad entries pays it.)"""
    first, left = "", set(commits)
    try:
        for commit in walk(store.git, head, children_first=True):  # each before its parents
            sha = commit.id.decode()
            if sha in left:
                first = sha
                left.discard(sha)
                if not left:
                    break
    except Exception:  # noqa: BLE001 - a commit that cannot be read: the times must do
        first = ""
    if not first or left:
        return min(commits, key=lambda c: (store.git.commit_of(c.encode()) or _Undated).commit_time)
    return first


class _Undated:
    commit_time = 0


def _repair(store: Store, bad: str) -> str:
    commit = store.git.commit_of(bad.encode())
    if commit is None or not commit.parents:
        return "no commit before it to go back to; a person with git must rewrite the history"
    return (
        f"run 'gc doctor --reset-to {commit.parents[0].decode()[:12]}' to move the branch back "
        "to the last commit before it"
    )


def _reaches(store: Store, head: bytes, commit: str) -> bool:
    """Whether `head`'s history holds `commit`."""
    sha = commit.encode()
    return store.git.has_object(sha) and not only_in(store.git, sha, head)


def reset_to(store: Store, target: str) -> dict[str, Any]:
    """Move the branch back to `target` (a commit id or an unambiguous prefix of one), an
    ancestor of the branch whose history holds no bad entry. A ref move, not a new commit:
    the commits it leaves stay in the reflog and the objects (`git -C .beads log <old>`),
    and a commit on top would keep the bad one in the history (and push it to the remotes).
    Returns the old and new heads and the commits left."""
    git = store.git
    with store.locked():
        head = git.head()
        if head is None:
            raise NotFound("the store has no branch to reset; run 'gc doctor' first")
        sha = resolve_commit(git, target)
        leaving = only_in(git, head, sha)
        if only_in(git, sha, head):
            raise InvalidInput(
                f"commit {target} is not in the branch's history: nothing was changed"
            )
        bad = find_bad(git.objects, only_in(git, sha, None), limit=1)
        if bad:
            raise InvalidInput(
                f"commit {target}'s history holds a bad entry too ({bad[0].describe()}); "
                "reset to a commit before it"
            )
        if sha != head:
            message = f"doctor: reset to {sha.decode()[:12]}, leaving {len(leaving)} commits"
            git.swap_head(head, sha, message, store.agent)
            store.refresh()
        _write_mark(store, sha, [])
    return {
        "from": head.decode(),
        "to": sha.decode(),
        "left": [c.decode() for c in leaving],
    }


def _read_mark(runtime: Path) -> tuple[bytes | None, list[BadEntry]]:
    try:
        data = json.loads((runtime / MARK_FILE).read_text())
        mark = data["head"].encode()
        found = [BadEntry(e["commit"], e["path"], e["reason"]) for e in data["found"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, []
    return (mark, found) if is_sha(mark) else (None, [])


def _write_mark(store: Store, head: bytes, found: list[BadEntry]) -> None:
    data = json.dumps({"head": head.decode(), "found": [e.to_json() for e in found]})
    path = str(store.runtime / MARK_FILE)
    files.write_atomic(str(store.root), path, data.encode(), str(store.runtime / "tmp"))
