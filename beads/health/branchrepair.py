"""`gc doctor` and a lost, garbled or dangling branch ref: pointed back at the last good
commit (the newest of what the reflog, the index and the view recorded, else the newest tip
among the objects), or, when its newest commit's object was lost and the index recorded its
files, that commit made again (`beads.health.lostcommit`).
"""

from __future__ import annotations

from beads.branch import BRANCH, branch_problem
from beads.git import repair
from beads.health.lostcommit import keep_view_files, lost_commit, redo
from beads.health.problems import Problem, Report
from beads.store import Store


def restore_branch(store: Store, report: Report) -> bool:
    """Point a lost, garbled or dangling branch ref back at the last good commit; returns
    False when the branch is broken and no commit was found for it."""
    git = store.git
    head = git.head()
    if head is not None and git.commit_of(head) is not None:
        return True
    if head is None:
        problem = branch_problem(store.root)
    else:
        problem = f"{BRANCH} names {head.decode()}, which is not a commit of the store"
    lost = lost_commit(store, head)
    if lost is not None:
        if head is None:
            problem += f"; its last commit {lost.decode()} is lost too"
        redone = redo(store, lost)
        if redone is not None:
            report.problems.append(
                Problem(
                    "branch",
                    f".git/{BRANCH}",
                    f"{problem}; that commit was made again from the index's record of its "
                    f"files as {redone.sha.decode()} on its parent {redone.parent.decode()} "
                    "('git -C .beads log' shows it: gc doctor: redo lost commit)",
                    True,
                )
            )
            return True
    found = _last_good_commit(store)
    if found is None:
        report.problems.append(
            Problem("branch", f".git/{BRANCH}", f"{problem}; no commit found to restore")
        )
        return False
    sha, source = found
    if lost is None and sha == head:
        # It reads now: dulwich checks a pack's checksum at its first read only, so a pack
        # cut short (reported by `check_packs`) failed that one read. The branch is right.
        return True
    left = ""
    if lost is not None:
        folder, kept = keep_view_files(store, lost, sha)
        left = (
            f"; the changes of the lost commit {lost.decode()} are not in it (the index "
            "and the view do not hold all its files)"
        )
        if kept:
            left += (
                f": the view's {kept} file(s) that differ are kept in {folder}; make their "
                "changes again (gc bead show ID compares) and remove the folder"
            )
    git.swap_head(None, sha, f"gc doctor: restore the branch ({source})", store.agent, force=True)
    report.problems.append(
        Problem(
            "branch",
            f".git/{BRANCH}",
            f"{problem}; restored to {sha.decode()} ({source}); "
            f"'git -C .beads reflog' lists where it has been{left}",
            lost is None,
        )
    )
    return True


def _last_good_commit(store: Store) -> tuple[bytes, str] | None:
    """The commit the branch last held: the newest of those the reflog, the index and the
    view recorded; when none of them is a commit of the store, the newest commit that no
    other commit descends from."""
    git = store.git
    candidates: list[tuple[bytes, str]] = []
    last = repair.last_reflog_entry(git.git_dir)
    for sha, source in (
        (last, "the reflog's last entry"),
        (store.index.head(), "the commit the index recorded"),
        (store.view.applied(), "the commit the view recorded"),
    ):
        if sha is not None and git.commit_of(sha) is not None:
            candidates.append((sha, source))
    if candidates:
        for sha, source in candidates:
            others = {other for other, _ in candidates if other != sha}
            if not any(sha in _ancestors(store, other) for other in others):
                return sha, source
        return candidates[0]
    return _newest_tip(store)


def _ancestors(store: Store, sha: bytes, limit: int = 100_000) -> set[bytes]:
    """Commits reachable from `sha` through its parents (at most `limit`)."""
    seen: set[bytes] = set()
    todo = [sha]
    while todo and len(seen) < limit:
        commit = store.git.commit_of(todo.pop())
        if commit is None:
            continue
        for parent in commit.parents:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def _newest_tip(store: Store) -> tuple[bytes, str] | None:
    """The newest commit among the objects that is no other commit's parent."""
    commits = {}
    for sha in store.git.objects:
        commit = store.git.commit_of(sha)
        if commit is not None:
            commits[sha] = commit
    parents = {parent for commit in commits.values() for parent in commit.parents}
    tips = [commit for sha, commit in commits.items() if sha not in parents]
    if not tips:
        return None
    tips.sort(key=lambda commit: commit.commit_time, reverse=True)
    # A writer killed before its ref moved leaves a commit no one was told of: a person may
    # prefer another tip, so they are named.
    others = ", ".join(f"{c.id.decode()[:12]} ({_subject(c.message)})" for c in tips[1:6])
    more = (
        f"; other tips: {others} (git -C .beads update-ref {BRANCH} <commit> picks one)"
        if others
        else ""
    )
    return tips[0].id, f"the newest commit in the objects{more}"


def _subject(message: bytes) -> str:
    return message.decode("utf-8", "replace").partition("\n")[0][:40]
