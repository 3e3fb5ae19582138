"""`gc doctor` and the history: commits the gate for incoming trees would refuse
(`beads.sync.treegate`) that reached the branch anyway (a ref moved by hand, a history from
before the gate), and `gc doctor --reset-to` to leave them.

Each run checks only the commits added since the last run (the commit it reached is kept in
`.runtime/history-checked`, with the bad entries found so far, whose commits are checked
again while the branch still reaches them): its cost follows what changed, as the index's
catch-up does. A store whose record is missing is checked from its first commit once. A
check that stops at its cap (`KEEP_FOUND` entries) records only the commits it read whole,
so the next run goes on with those it did not read, and says more may be wrong.

A tree or file the check finds missing under a commit is no entry to leave by a reset (which
would drop every bead made since): it is fetched again from a remote
(`beads.health.historyrepair.restore_in_history`), else named as damage at that commit.

The record also says where the objects were when it was written (`HistoryTrust`), so that
a run over a history already checked reads only what is new, yet still finds an object
that went from the part it trusts.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from beads import files
from beads.branch import is_sha
from beads.errors import InvalidInput, NotFound
from beads.git.history import resolve_commit, walk
from beads.git.objects import ObjectFiles, object_files
from beads.health.problems import Problem, Report
from beads.sync.remote import only_in
from beads.sync.treegate import BadEntry, find_bad

if TYPE_CHECKING:
    from pathlib import Path

    from beads.store import Store

MARK_FILE = "history-checked"
# How many bad entries a report keeps (a history full of them needs one reset, not a list).
KEEP_FOUND = 20
# The loose objects a record lists at most (a writer packs them at 1,500): past it, where
# the objects are is not recorded, and the next run reads every commit again.
MAX_LOOSE_RECORDED = 100_000
# What `_read_mark` gives for a record an earlier gc wrote, which says nothing of where the
# objects were: what went since is unknown, so the whole history is checked again once.
UNRECORDED = ObjectFiles(frozenset(), frozenset())


class HistoryTrust(NamedTuple):
    """What the record of the last run lets this one skip.

    `present_to`: a commit whose whole history was in the store when the last run checked
    it and whose objects cannot have gone since (None: every commit is read again); `recheck`:
    a loose object recorded then is gone from the store, so the gate's check reads the whole
    history again to find what named it; `now`: where the objects are as this run starts.

    Why the trusted part need not be read. The last run found every object that history
    names: the commits by the walk for missing ones (`restore_history`), their trees and
    files by the gate's check (`check_history`), which reads every one a commit brings. It
    recorded where the objects were once it was done, provided none had left a place while
    it ran: the names of the packs, the ids of the loose objects. An object file is never
    changed once written (git's rule), so an object leaves only with a file removed. When
    every pack recorded is still there and every loose object recorded is still in the
    store (loose, or packed since), nothing that history named has gone, and only the
    commits made since are read. A fault inside a file is other checks' (a loose object that
    does not read: `check_loose_objects`; a pack cut short: `check_packs`), run before.

    A recorded loose object gone (a hand cleaning `objects/`, a disk fault) may have been a
    commit, a tree or a file of any commit: every commit is walked again, and the gate's
    check runs over the whole history again, as on a store's first run, to name it. A
    recorded pack gone is most often a repack's (it merges packs every few hundred writes,
    the objects then in the pack that replaced them): the commits are walked again, which
    finds a pack deleted by hand or lost to the disk, as gc writes and packs a commit with
    its trees and files; the trees and files of older commits are not read again. A record
    written by an earlier gc, which does not say where the objects were, counts as a loose
    object gone: the first run after the upgrade checks the whole history once."""

    present_to: bytes | None
    recheck: bool
    now: ObjectFiles


def history_trust(store: Store) -> HistoryTrust:
    """How much of the branch's history this run may take as checked (`HistoryTrust`)."""
    git = store.git
    now = object_files(git.git_dir)
    mark, _found, seen = _read_mark(store.runtime)
    if seen is UNRECORDED:
        return HistoryTrust(None, True, now)
    if mark is None or seen is None or git.commit_of(mark) is None:
        return HistoryTrust(None, False, now)
    gone = any(not git.has_object(sha) for sha in seen.loose - now.loose)
    kept = not gone and seen.packs <= now.packs
    return HistoryTrust(mark if kept else None, gone, now)


def check_history(store: Store, head: bytes, report: Report, trust: HistoryTrust) -> None:
    """Report each entry outside the layout that the branch's history holds, naming its
    commit and `gc doctor --reset-to <the commit before the first bad one>`; and each tree
    or file found missing under a commit, fetched again from a remote when one has it."""
    from beads.health.historyrepair import restore_in_history

    git = store.git
    mark, known, _seen = _read_mark(store.runtime)
    if mark is not None and not git.has_object(mark):
        mark, known = None, []
    if trust.recheck:  # an object that went may be any commit's: all are read again
        mark = None
    commits = only_in(git, head, mark) if mark != head else []
    # The commits of the entries found before are checked again: an object missing then may
    # be back (doctor writes a blob again from the view file that hashes to it).
    listed = set(commits)
    again = sorted(
        {e.commit for e in known if _reaches(store, head, e.commit)} - {c.decode() for c in listed}
    )
    # (each of them whole: they were read whole before, and are named again in full)
    found = find_bad(git.objects, [commit.encode() for commit in again], limit=sys.maxsize)
    checked: list[bytes] = []
    new = find_bad(git.objects, commits, limit=KEEP_FOUND + 1, checked=checked)
    stopped = len(new) > KEEP_FOUND
    found += new[:KEEP_FOUND]
    lost = restore_in_history(store, head, [e for e in found if e.missing], report)
    found = [e for e in found if not e.missing or e.missing.encode() in lost]
    # A check stopped at its cap records only the commits it read whole, with their
    # history: the next run goes on from there, with what this one did not read.
    reached = _checked_to(store, mark, commits, checked) if stopped else head
    _write_mark(store, reached, found, _unchanged_since(store, trust.now))
    bad = [e for e in found if not e.missing]
    first = _first_in_history(store, head, {e.commit for e in bad}) if bad else ""
    repair = _repair(store, first) if bad else ""
    for entry in bad:
        report.problems.append(
            Problem(
                "history",
                entry.path,
                f"commit {entry.commit[:12]} holds it: {entry.reason}; gc reads past it, "
                f"but its history is one the gate for incoming trees refuses; {repair}",
            )
        )
    if stopped:
        # (a commit holding more than the cap by itself: the next run stops in it again)
        full = len(find_bad(git.objects, [new[-1].commit.encode()], limit=KEEP_FOUND + 1))
        then = "after repairing these" if full > KEEP_FOUND else "to check the commits after them"
        report.problems.append(
            Problem(
                "history",
                ".git",
                f"and more may be wrong: the history check stopped after {KEEP_FOUND} entries; "
                f"run gc doctor again {then}",
            )
        )


def _checked_to(
    store: Store, mark: bytes | None, commits: list[bytes], checked: list[bytes]
) -> bytes | None:
    """What the record may say the history is checked up to after a check that stopped at
    its cap: a commit of `checked` (those of `commits`, the commits since `mark`, read
    whole) whose history holds none of `commits` left unread; else `mark`, where the last
    run got (None: the next run reads every commit)."""
    git = store.git
    since, read = set(commits), set(checked)
    parents: dict[bytes, list[bytes]] = {}
    for sha in checked:
        commit = git.commit_of(sha)
        parents[sha] = [p for p in commit.parents if p in since] if commit is not None else []
    whole: dict[bytes, bool] = {}  # each commit: whether its history since `mark` was read
    for sha in checked:  # the parents of each first (no recursion: a history may be deep)
        stack = [sha]
        while stack:
            top = stack[-1]
            if top in whole:
                stack.pop()
                continue
            if top not in read:
                whole[top] = False
                stack.pop()
                continue
            pending = [p for p in parents[top] if p not in whole]
            if pending:
                stack.extend(pending)
                continue
            whole[top] = all(whole[p] for p in parents[top])
            stack.pop()
    done = [sha for sha in checked if whole[sha]]
    below = {p for sha in done for p in parents[sha]}
    tips = [sha for sha in done if sha not in below]  # (one, on a history without merges)
    return tips[-1] if tips else mark


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


def _unchanged_since(store: Store, before: ObjectFiles) -> ObjectFiles | None:
    """Where the objects are now, when none has left a place since `before` (every pack
    still there, every loose object still in the store); else None (nothing recorded: the
    next run reads every commit again)."""
    git = store.git
    now = object_files(git.git_dir)
    if len(now.loose) > MAX_LOOSE_RECORDED or not before.packs <= now.packs:
        return None
    if any(not git.has_object(sha) for sha in before.loose - now.loose):
        return None
    return now


def _read_mark(runtime: Path) -> tuple[bytes | None, list[BadEntry], ObjectFiles | None]:
    """The commit the last run reached, the bad entries it found, and where the objects
    were then (None when the run did not record it; UNRECORDED for a record of an earlier
    gc, which never did)."""
    try:
        data = json.loads((runtime / MARK_FILE).read_text())
        if data["head"] is None:  # a check stopped before it read any commit whole
            return None, [], None
        mark = data["head"].encode()
        found = [
            BadEntry(e["commit"], e["path"], e["reason"], e.get("missing", ""))
            for e in data["found"]
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, [], None
    if not is_sha(mark):
        return None, [], None
    if "objects" not in data:
        return mark, found, UNRECORDED
    return mark, found, _read_objects(data["objects"])


def _read_objects(data: object) -> ObjectFiles | None:
    """Where the objects were, as `_write_mark` records it; None for anything else."""
    if not isinstance(data, dict):
        return None
    packs, loose = data.get("packs"), data.get("loose")
    if not isinstance(packs, list) or not isinstance(loose, list):
        return None
    if not all(isinstance(name, str) for name in packs):
        return None
    if not all(isinstance(sha, str) and is_sha(sha.encode()) for sha in loose):
        return None
    return ObjectFiles(frozenset(packs), frozenset(sha.encode() for sha in loose))


def _write_mark(
    store: Store, head: bytes | None, found: list[BadEntry], objects: ObjectFiles | None = None
) -> None:
    """Record the commit the check reached (None: none, the next run reads every commit),
    the bad entries found, and where the objects were."""
    reached = None if head is None else head.decode()
    record: dict[str, Any] = {"head": reached, "found": [e.to_json() for e in found]}
    record["objects"] = (
        None
        if objects is None
        else {"packs": sorted(objects.packs), "loose": sorted(s.decode() for s in objects.loose)}
    )
    path = str(store.runtime / MARK_FILE)
    data = json.dumps(record).encode()
    files.write_atomic(str(store.root), path, data, str(store.runtime / "tmp"))
