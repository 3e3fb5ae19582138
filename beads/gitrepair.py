"""What would brick the store, repaired by every `gc doctor` run under the write lock: git
lock files and temporary files of dead writers, half-made repositories of a killed `gc init`,
a missing `.git/HEAD`, garbled packed refs, loose objects cut short by a full disk or a power
cut, and a lost or garbled branch ref (restored to the last good commit).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from beads import files
from beads.git.objects import loose_ids, loose_path, read_loose
from beads.git.refs import GC_LOCK_MTIME, lock_age
from beads.initstore import remove_dead_builds
from beads.problems import Problem, Report, remove_file, shown_path
from beads.reader import BRANCH, branch_problem, is_sha
from beads.store import Store
from beads.view import git_blob_sha

# Temporary files of git and dulwich (`tmp_pack_*`, `tmp_obj_*`): a push may write one for a
# while, so only one untouched this long is a dead writer's.
TEMP_STALE_SECONDS = 3600.0
HEAD_SYMREF = f"ref: {BRANCH}\n".encode()


def clear_stale_files(store: Store, report: Report) -> None:
    """Remove git lock files, temporary files and half-built repositories of dead writers.

    We hold the write lock, so no gc process owns any of them; a git process (a push into
    the store) holds a lock for milliseconds, so a lock is waited for until it is either
    released or `store.stale_lock_seconds` old."""
    git_dir = store.root / ".git"
    stale_after = store.config["store"]["stale_lock_seconds"]
    for lock in sorted(git_dir.rglob("*.lock")):
        age = _age_once_stale(lock, stale_after)
        if age is None:
            continue
        dated_by_gc = time.time() - age < GC_LOCK_MTIME + 1  # see beads.git.refs.GC_LOCK_MTIME
        writer = "a killed gc writer" if dated_by_gc else f"a writer gone for {age:.0f}s"
        if remove_file(lock):
            report.problems.append(
                Problem(
                    "stale_lock", shown_path(store, lock), f"a lock left by {writer}; removed", True
                )
            )
    # git's `tmp_obj_*` and `tmp_pack_*`, dulwich's `tmp*.pack` (a pack it had not finished).
    _clear_old_temp_files(store, report, git_dir.glob("objects/**/tmp*"))
    for pack in sorted(git_dir.glob("objects/pack/pack-*.pack")):
        # A pack counts once its `.idx` exists, and the `.idx` is written last: one without
        # it is a dead writer's, unless a push is between the two (milliseconds).
        age = lock_age(pack)
        if age is not None and age >= stale_after and not pack.with_suffix(".idx").exists():
            if remove_file(pack):
                report.problems.append(
                    Problem(
                        "stale_file",
                        shown_path(store, pack),
                        "a pack without its .idx, left by a writer killed while writing it; "
                        "removed (its objects were never part of a commit)",
                        True,
                    )
                )
    for building in remove_dead_builds(store.root):
        report.problems.append(
            Problem(
                "stale_file",
                building.name,
                "a repository half built by a killed 'gc init'; removed",
                True,
            )
        )
    _clear_view_temp_files(store, report)


def _clear_view_temp_files(store: Store, report: Report) -> None:
    """Remove the view's temporary files (`.runtime/tmp/*.tmp`, random names) that a writer
    killed between writing and renaming left; one this young may still be renamed."""
    tmp_dir = store.root / ".runtime" / "tmp"
    if not files.real_dir(str(store.root), str(tmp_dir)):
        return  # none, or behind a link (reported by the link check): nothing of ours
    _clear_old_temp_files(store, report, tmp_dir.glob("*.tmp"))


def _clear_old_temp_files(store: Store, report: Report, found: Iterable[Path]) -> None:
    """Remove temporary files untouched for `TEMP_STALE_SECONDS`: a dead writer's."""
    for temp in sorted(found):
        age = lock_age(temp)
        if age is not None and age >= TEMP_STALE_SECONDS and temp.is_file() and remove_file(temp):
            report.problems.append(
                Problem(
                    "stale_file",
                    shown_path(store, temp),
                    "a temporary file of a dead writer; removed",
                    True,
                )
            )


def _age_once_stale(lock: Path, stale_after: float) -> float | None:
    """Wait until `lock` is gone (None) or `stale_after` old (its age)."""
    while True:
        age = lock_age(lock)
        if age is None or age >= stale_after:
            return age
        time.sleep(min(stale_after - age, 0.05))


def check_git_head(store: Store, report: Report) -> None:
    """`.git/HEAD` names our branch; without it git commands cannot read the store. A lost
    `refs/` directory is remade, for `_restore_branch` to put the branch back into."""
    (store.root / ".git" / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    head_file = store.root / ".git" / "HEAD"
    try:
        content: bytes | None = head_file.read_bytes()
    except FileNotFoundError:
        content = None
    if content is not None and content.strip() == HEAD_SYMREF.strip():
        return
    what = "is missing" if content is None else f"holds {content[:60]!r}"
    temp = head_file.with_name("HEAD.gc-doctor")
    temp.write_bytes(HEAD_SYMREF)
    os.replace(temp, head_file)
    report.problems.append(
        Problem(
            "git_head",
            ".git/HEAD",
            f"{what} (git commands cannot read the store); rewritten to name {BRANCH}",
            True,
        )
    )


def check_packed_refs(store: Store, report: Report) -> None:
    """Drop lines of `.git/packed-refs` that git cannot parse (a power cut mid-write): git
    refuses the whole repository for one of them. The original is kept in `.runtime/`."""
    path = store.root / ".git" / "packed-refs"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    kept: list[bytes] = []
    bad = 0
    for number, line in enumerate(data.splitlines()):
        sha, _, name = line.partition(b" ")
        if number == 0 and line.startswith(b"# pack-refs"):
            kept.append(line)
        elif is_sha(sha) and name.startswith(b"refs/") and b" " not in name:
            kept.append(line)
        elif line[:1] == b"^" and is_sha(line[1:]) and kept and not kept[-1].startswith(b"^"):
            kept.append(line)
        else:
            bad += 1
    if not bad and (not data or data.endswith(b"\n")):
        return
    from dulwich.file import FileLocked, GitFile

    aside = store.runtime / "packed-refs.damaged"
    files.write_atomic(str(store.root), str(aside), data, str(store.runtime / "tmp"))
    try:
        with GitFile(path, "wb") as handle:  # git's own lock: never under a git process
            handle.write(b"".join(line + b"\n" for line in kept))
    except FileLocked:
        report.problems.append(
            Problem("packed_refs", ".git/packed-refs", "unreadable lines; a git process holds it")
        )
        return
    report.problems.append(
        Problem(
            "packed_refs",
            ".git/packed-refs",
            f"{bad} line(s) git cannot read (git refuses the repository); rewritten without "
            f"them, the original kept as {shown_path(store, aside)}",
            True,
        )
    )


def check_loose_objects(store: Store, report: Report) -> None:
    """Find loose objects that cannot be read or do not hash to their name (a full disk, a
    power cut, a disk fault) and
    repair those whose content exists elsewhere: in a pack, or as a view file."""
    git = store.git
    objects_dir = str(git.git_dir / "objects")
    for sha in list(loose_ids(objects_dir)):
        if read_loose(objects_dir, sha) is not None:
            continue
        path = Path(loose_path(objects_dir, sha))
        shown = shown_path(store, path)
        # Moved aside: an unreadable file hides any good copy and blocks rewriting it.
        aside = store.runtime / "corrupt-objects" / sha.decode()
        files.make_dirs(str(store.root), str(aside.parent))  # never through a link
        try:
            os.replace(path, aside)
        except FileNotFoundError:
            continue  # packed meanwhile by the background repack
        if git.has_object(sha):
            message, fixed = "unreadable; moved aside (a pack holds the object)", True
        else:
            fixed = _restore_blob_from_view(store, sha)
            message = (
                "unreadable; rewritten from the view file with the same content"
                if fixed
                else f"unreadable and no copy found (moved to {shown_path(store, aside)}); "
                "commits that use it are damaged"
            )
        report.problems.append(Problem("corrupt_object", shown, message, fixed))


def _restore_blob_from_view(store: Store, sha: bytes) -> bool:
    from dulwich.objects import Blob

    path = next((path for path, blob, _ in store.index.rows() if blob == sha.decode()), None)
    data = store.view.read(path) if path is not None else None
    if data is None or git_blob_sha(data) != sha:
        return False
    store.git.add_loose(Blob.from_string(data))
    return True


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
    found = _last_good_commit(store)
    if found is None:
        report.problems.append(
            Problem("branch", f".git/{BRANCH}", f"{problem}; no commit found to restore")
        )
        return False
    sha, source = found
    git.swap_head(None, sha, f"gc doctor: restore the branch ({source})", store.agent, force=True)
    report.problems.append(
        Problem(
            "branch",
            f".git/{BRANCH}",
            f"{problem}; restored to {sha.decode()} ({source}); "
            "'git -C .beads reflog' lists where it has been",
            True,
        )
    )
    return True


def _last_good_commit(store: Store) -> tuple[bytes, str] | None:
    """The commit the branch last held: the newest of those the reflog, the index and the
    view recorded; when none of them is a commit of the store, the newest commit that no
    other commit descends from."""
    git = store.git
    candidates: list[tuple[bytes, str]] = []
    last = _last_reflog_entry(git.reflog_path)
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


def _last_reflog_entry(path: Path) -> bytes | None:
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        fields = line.split(b" ", 2)
        if len(fields) == 3 and is_sha(fields[1]) and fields[1] != b"0" * 40:
            return fields[1]
    return None


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
