"""`gc doctor` and the objects the branch's history names that are missing (a loose file
deleted, a disk fault): commits, and the trees and files under them, fetched again from
the configured remotes; one found nowhere is reported, with what it leaves of the beads
(HEAD's tree whole: no reset that drops beads is ever advised for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beads.errors import StorageError
from beads.git import repair
from beads.health.objectrepair import COPY_AGAIN, restore_lost
from beads.health.problems import Problem, Report
from beads.store import Store

if TYPE_CHECKING:
    from beads.git import GitRepo
    from beads.sync.treegate import BadEntry


def restore_history(store: Store, report: Report, since: bytes | None = None) -> bool:
    """Find the commits the branch's history names whose objects are missing (a loose file
    deleted, a disk fault: `gc log` and the origin of older messages stop there) and fetch
    them again from the configured remotes, with what their trees name that went with them,
    until the history reads whole or nothing more comes back; each is reported, fixed when
    it came back. Returns whether the history reads whole (the history check walks it).

    `since`: a commit whose history is known to be in the store (`HistoryTrust`): only the
    commits made since it are read; None reads every commit."""
    git = store.git
    head = git.head()
    if head is None:
        return True
    lost: set[bytes] = set()
    tried: set[bytes] = set()
    unread: dict[str, str] = {}
    # The trees of the commits fetched again, each with its commit: a fault that took a
    # commit's file often took its tree's, which the history check would call a bad entry.
    trees: dict[bytes, bytes] = {}
    while True:
        under = repair.absent_in_trees(git, trees)
        missing = (_missing_commits(git, head, since) | set(under)) - tried  # may name more
        if not missing:
            break
        tried |= missing
        found = restore_lost(store, missing, unread)
        for source, shas in found.items():
            how = source.partition(" ")[2]  # "1 fetched from the remote origin": its count off
            for sha in sorted(shas, key=lambda sha: (sha in under, sha)):
                if sha in under:
                    commit_id, kind = under[sha]
                    why = f"{kind} {sha.decode()} of commit {commit_id.decode()[:12]}"
                else:
                    why = f"commit {sha.decode()} of the branch's history"
                    commit = git.commit_of(sha)
                    if commit is not None:
                        trees[commit.tree] = sha
                report.problems.append(
                    Problem("corrupt_object", ".git", f"{why} was missing; {how}", True)
                )
        lost |= (missing - set(under)) - set().union(*found.values())
        if not found:
            break
    if lost:
        whole = _head_tree_whole(store, head)
        where, advice = _where_lost(unread)
        for sha in sorted(lost):
            why = (
                f"commit {sha.decode()} of the branch's history is missing {where}: the history "
                f"is cut there (gc log cannot read past it){whole}; {advice}"
            )
            report.problems.append(Problem("corrupt_object", ".git", why))
    return not lost


def _missing_commits(git: GitRepo, head: bytes, since: bytes | None) -> set[bytes]:
    """The missing commits of `head`'s history: those made since `since` when it is given
    (a commit of its own history found missing after all: every commit), else every one."""
    from beads.git import history

    if since is not None:
        try:
            return history.missing_since(git, head, since)
        except StorageError:
            pass
    return history.missing_commits(git, head)


def restore_in_history(
    store: Store, head: bytes, entries: list[BadEntry], report: Report
) -> set[bytes]:
    """Fetch again from the configured remotes the trees and files the history check found
    missing under commits of the branch's history (`entries`, each naming its commit and the
    missing object), reporting each: fixed when it came back; else that the history is
    damaged at that commit (the beads as it left them cannot be read) and, HEAD's tree being
    whole, that no reset is needed: a reset would drop every bead made since. Returns the
    objects still missing."""
    from beads.sync.treegate import MISSING_TREE

    named: dict[bytes, BadEntry] = {}
    for entry in entries:
        named.setdefault(entry.missing.encode(), entry)
    if not named:
        return set()
    unread: dict[str, str] = {}
    found = restore_lost(store, set(named), unread)

    def what(sha: bytes) -> str:
        entry = named[sha]
        kind = "tree" if entry.reason == MISSING_TREE else "file"
        return f"{kind} {sha.decode()} of commit {entry.commit[:12]}"

    for source, shas in found.items():
        how = source.partition(" ")[2]  # "1 fetched from the remote origin": its count off
        for sha in sorted(shas):
            report.problems.append(
                Problem("corrupt_object", ".git", f"{what(sha)} was missing; {how}", True)
            )
    lost = set(named) - set().union(*found.values())
    if lost:
        whole = _head_tree_whole(store, head)
        if whole:
            whole += ", so no reset is needed"
        where, advice = _where_lost(unread)
        for sha in sorted(lost):
            why = (
                f"{what(sha)} is missing {where}: the history is damaged at that commit (the "
                f"beads as it left them cannot be read){whole}; {advice}"
            )
            report.problems.append(Problem("corrupt_object", ".git", why))
    return lost


def _where_lost(unread: dict[str, str]) -> tuple[str, str]:
    """Where an object found nowhere was looked for (the remotes that could not be read,
    with why), and what to do."""
    if not unread:
        return "and no remote has it", COPY_AGAIN
    read = ", ".join(f"the remote {name} could not be read ({why})" for name, why in unread.items())
    return f"and {read}", f"run gc doctor again once it can be read, else {COPY_AGAIN}"


def _head_tree_whole(store: Store, head: bytes) -> str:
    """What a history cut short leaves of the beads: said when HEAD's tree and files are
    all there (else the checks of HEAD's tree that follow name what is missing)."""
    from beads.refresh import tree_files

    try:
        tree = tree_files(store.git, head)
        whole = all(store.git.has_object(sha) for sha in tree.values())
    except Exception:  # a damaged object store raises many kinds: HEAD's check names it
        whole = False
    return "; the beads themselves are intact (HEAD's tree is whole)" if whole else ""
