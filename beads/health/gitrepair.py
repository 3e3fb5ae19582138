"""What would brick the store, repaired by every `gc doctor` run under the write lock: git
lock files and temporary files of dead writers, the quarantines of killed fetches, half-made
repositories of a killed `gc init`, a missing `.git/HEAD`, garbled packed refs, loose objects
cut short by a full disk or a power cut, and a lost or garbled branch ref (restored to the
last good commit); a blob of HEAD whose object is missing is written again from the view
file that hashes to it; a commit of the history whose object is missing is fetched again
from a configured remote. A pack cut short is reported: gc cannot rewrite it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from beads import files
from beads.branch import BRANCH, branch_problem
from beads.errors import GcError, StorageError
from beads.git import quarantine, repair
from beads.git.refs import GC_LOCK_MTIME, lock_age
from beads.health.lostcommit import keep_view_files, lost_commit, redo
from beads.health.problems import Problem, Report, remove_file, shown_path
from beads.initstore import remove_dead_builds
from beads.store import Store

if TYPE_CHECKING:
    from beads.git import GitRepo
    from beads.sync.treegate import BadEntry

# Temporary files of git and dulwich (`tmp_pack_*`, `tmp_obj_*`): a push may write one for a
# while, so only one untouched this long is a dead writer's.
TEMP_STALE_SECONDS = 3600.0


def clear_stale_files(store: Store, report: Report) -> None:
    """Remove git lock files, temporary files, fetch quarantines and half-built repositories
    of dead writers.

    We hold the write lock, so no gc process owns any of them but a fetch's quarantine,
    removed only once its process is gone; a git process (a push into the store) holds a
    lock for milliseconds, so a lock is waited for until it is either released or
    `store.stale_lock_seconds` old."""
    git_dir = store.root / ".git"
    stale_after = store.config["store"]["stale_lock_seconds"]
    for lock in repair.lock_files(git_dir):
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
    _clear_old_temp_files(store, report, repair.temporary_files(git_dir))
    for pack in repair.packs_without_index(git_dir):
        # A pack counts once its `.idx` exists, and the `.idx` is written last: one without
        # it is a dead writer's, unless a push is between the two (milliseconds). A pack
        # that reads whole may hold the only copy of history (its `.idx` lost, not unwritten):
        # it is indexed again, and only one cut short is removed.
        age = lock_age(pack)
        if age is not None and age >= stale_after and not pack.with_suffix(".idx").exists():
            if repair.index_pack(pack) is not None:
                store.git.objects.close()  # read the packs again, this one with them
                report.problems.append(
                    Problem(
                        "stale_file",
                        shown_path(store, pack),
                        "a pack without its .idx; the pack reads whole, so its .idx was "
                        "written again",
                        True,
                    )
                )
            elif remove_file(pack):
                report.problems.append(
                    Problem(
                        "stale_file",
                        shown_path(store, pack),
                        "a pack without its .idx, left by a writer killed while writing it; "
                        "removed (its objects were never part of a commit)",
                        True,
                    )
                )
    for incoming in quarantine.remove_dead(git_dir):
        report.problems.append(
            Problem(
                "stale_file",
                shown_path(store, incoming),
                "objects a killed fetch received, never admitted into the store; removed",
                True,
            )
        )
    for building in remove_dead_builds(store.root):
        report.problems.append(
            Problem(
                "stale_file",
                building.name,
                "a repository half built by a killed 'gc init' or 'gc clone'; removed",
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
    content = repair.fix_head(store.root / ".git")
    if content is None:
        return
    what = "is missing" if not content else f"holds {content[:60]!r}"
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
    try:
        cleaned = repair.clean_packed_refs(store.root / ".git")
    except repair.RefsLocked:
        report.problems.append(
            Problem("packed_refs", ".git/packed-refs", "unreadable lines; a git process holds it")
        )
        return
    if cleaned is None:
        return
    bad, data = cleaned
    aside = store.runtime / "packed-refs.damaged"
    files.write_atomic(str(store.root), str(aside), data, str(store.runtime / "tmp"))
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
    power cut, a disk fault: one object's bytes under another's name) and restore each from
    a copy whose bytes hash right: the view file at the path HEAD's tree names it (found by
    walking the tree, never through the index, which may have been rebuilt from the damaged
    bytes), else a pack, else a configured remote."""
    git = store.git
    head = git.head()
    for damaged in repair.damaged_loose(git, head):
        shown = shown_path(store, damaged.file)
        aside = store.runtime / "corrupt-objects" / damaged.sha.decode()
        files.make_dirs(str(store.root), str(aside.parent))  # never through a link
        if not repair.set_aside(damaged, aside):
            continue  # packed meanwhile by the background repack
        source = _restore(store, damaged)
        if source is not None:
            message, fixed = f"unreadable or misnamed; {source}", True
        else:
            message, fixed = (
                f"unreadable or misnamed, and no copy found in the view, the packs or a "
                f"remote (moved to {shown_path(store, aside)}); commits that use it are "
                "damaged",
                False,
            )
        report.problems.append(Problem("corrupt_object", shown, message, fixed))


# What to do about objects that are lost for good from this repository.
COPY_AGAIN = "copy the store again from a remote or a backup (gc clone URL makes a new one)"


# Where `gc doctor` moves a pack cut short, once the objects it could read are written again.
PACKS_ASIDE = "corrupt-objects"


def check_packs(store: Store, report: Report) -> None:
    """Salvage each pack cut short or overwritten (its end is not what its `.idx` records),
    which neither git nor gc reads while its checksum fails: the objects before the damage
    are written again as loose objects and the pack is moved to `.runtime/corrupt-objects/`.
    Each object past the damage comes from a configured remote, or (HEAD's trees and files)
    from the index's record of HEAD and the view; one found nowhere is lost from this
    repository, and reported by every run (from the pack set aside) until it is back."""
    git = store.git
    folder = store.runtime / PACKS_ASIDE
    aside_before = (
        sorted(folder.glob("pack-*.pack")) if files.real_dir(str(store.root), str(folder)) else []
    )
    for pack in aside_before:  # set aside by an earlier run: are its lost objects back?
        missing = {sha for sha in repair.pack_ids(pack) if not git.has_object(sha)}
        if missing:
            found = _restore_lost(store, missing)
            told = _told(missing, found, "objects still missing")
            what = f"a pack cut short or overwritten, moved here by an earlier gc doctor: {told}"
            report.problems.append(
                Problem("corrupt_object", shown_path(store, pack), what, fixed=_all(missing, found))
            )
    for pack in repair.packs_cut_short(store.root / ".git"):
        if repair.index_pack(pack) is not None:  # the pack reads whole: its `.idx` was damaged
            git.objects.close()
            report.problems.append(
                Problem(
                    "corrupt_object",
                    shown_path(store, pack.with_suffix(".idx")),
                    "a pack's .idx that does not match it; the pack reads whole, so its .idx "
                    "was written again",
                    True,
                )
            )
            continue
        salvaged = repair.salvage_pack(git, pack)
        if salvaged is None:  # its `.idx` does not read either: nothing says where objects are
            report.problems.append(
                Problem(
                    "corrupt_object",
                    shown_path(store, pack),
                    "a pack cut short or overwritten, and its .idx cannot be read: objects in "
                    f"it cannot be read; {COPY_AGAIN}",
                )
            )
            continue
        written, lost = salvaged
        files.make_dirs(str(store.root), str(folder))  # never through a link
        try:
            aside = shown_path(store, repair.move_pack_aside(pack, folder))
        except FileNotFoundError:
            continue  # removed meanwhile (a repack)
        git.objects.close()  # read the packs again, without this one
        missing = {sha for sha in lost if not git.has_object(sha)}  # another copy is there
        found = _restore_lost(store, missing)
        what = (
            f"a pack cut short or overwritten (its end is not the checksum its .idx records; "
            f"moved to {aside}): the {written} objects before the damage were written again"
        )
        if missing:
            what += f"; {_told(missing, found, 'objects past the damage')}"
        report.problems.append(
            Problem("corrupt_object", shown_path(store, pack), what, fixed=_all(missing, found))
        )


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
        found = _restore_lost(store, missing, unread)
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
    found = _restore_lost(store, set(named), unread)

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


def _told(missing: set[bytes], found: dict[str, set[bytes]], what: str) -> str:
    """What became of the objects `missing` (`what` names them): where those found came
    from, and how many are still lost, with what to do."""
    parts = [f"of the {len(missing)} {what}, {', '.join(found)}"] if found else []
    left = len(missing) - sum(len(got) for got in found.values())
    if left:
        lost = str(left) if found else f"the {left} {what}"
        verb = "is" if left == 1 and found else "are"
        parts.append(f"{lost} {verb} lost from this repository: {COPY_AGAIN}")
    return "; ".join(parts)


def _all(missing: set[bytes], found: dict[str, set[bytes]]) -> bool:
    return sum(len(got) for got in found.values()) == len(missing)


def _restore_lost(
    store: Store, missing: set[bytes], unread: dict[str, str] | None = None
) -> dict[str, set[bytes]]:
    """Write again what can be found of the objects `missing`: HEAD's trees from the index's
    record of HEAD's files, each file of HEAD from the view file that hashes to it, the
    others from the configured remotes in turn; returns how many came from where (as the
    report says it) and which. A remote that cannot be read (down, moved) is added to
    `unread` with why."""
    from beads.settings.localconfig import remotes
    from beads.sync.remote import restore_objects

    found: dict[str, set[bytes]] = {}
    left = set(missing)
    head = store.git.head()
    trees = _remake_head_trees(store, head, left) if head is not None and left else set()
    if trees:
        found[f"{len(trees)} trees of HEAD made again from the index's record of its files"] = trees
        left -= trees
    paths = repair.paths_in_tree(store.git, head, left) if head is not None and left else {}
    from_view = {sha for sha, path in paths.items() if _restore_from_view(store, sha, path)}
    if from_view:
        found[f"{len(from_view)} rewritten from the view files that hash to them"] = from_view
        left -= from_view
    try:
        known = remotes(store.git.git_dir) if left else {}
    except GcError:
        known = {}
    for name, url in known.items():
        try:
            fetched = restore_objects(store.git, url, left, store.max_body) if left else set()
        except GcError as exc:
            if unread is not None:
                unread[name] = exc.message
            continue
        if fetched:
            found[f"{len(fetched)} fetched from the remote {name}"] = fetched
            left -= fetched
    return found


def _remake_head_trees(store: Store, head: bytes, missing: set[bytes]) -> set[bytes]:
    """Write again HEAD's trees among `missing`, made from the index's record of HEAD's
    files (each bead file's blob id) and the view (the files it keeps no blob id of), when
    they come out exactly as HEAD names its tree; returns those written (none when the index
    is elsewhere or a file is not in the view)."""
    from beads.settings.config import CONFIG_PATH
    from beads.view.view import git_blob_sha

    git, index = store.git, store.index
    commit = git.commit_of(head)
    if commit is None or index.head() != head:
        return set()
    blobs: dict[str, bytes | None] = {path: blob.encode() for path, blob in index.rows(beads=False)}
    for path in [CONFIG_PATH, *index.invalid()]:
        data = store.view.read(path)
        if data is None:
            return set()
        blobs[path] = git_blob_sha(data)
    made, objects = git.build_commit(None, {}, "", store.agent, blobs=blobs)
    if made.tree != commit.tree:
        return set()
    trees = [obj for obj in objects if obj.id in missing and obj.type_name == b"tree"]
    git.store_objects(trees)
    return {tree.id for tree in trees}


def _restore(store: Store, damaged: repair.Damaged) -> str | None:
    """Put a damaged object's right bytes back; returns how (None: no copy found)."""
    if damaged.path is not None and _restore_from_view(store, damaged.sha, damaged.path):
        return f"rewritten from the view file {damaged.path}, whose bytes hash right"
    if store.git.has_object(damaged.sha):
        return "moved aside (a pack holds the object)"
    return _restore_from_remote(store, damaged.sha)


def _restore_from_view(store: Store, sha: bytes, path: str) -> bool:
    """Write blob `sha` again from the view file at `path` (where HEAD's tree names it) when
    that file's bytes hash to exactly `sha`; whether it was written."""
    data = store.view.read(path)
    return data is not None and repair.restore_blob(store.git, sha, data)


def restore_missing_blobs(
    store: Store, tree: dict[str, bytes], missing: list[str], report: Report
) -> None:
    """Report each file of HEAD's `tree` (path -> blob id) whose object is `missing` (its
    loose file deleted, not damaged), written again, and so fixed, when the view file at its
    path holds bytes that hash to exactly that id: the history that names it is whole
    again, and no reset that drops beads is ever suggested for it."""
    for path in missing:
        if _restore_from_view(store, tree[path], path):
            message, fixed = (
                "the file's object was missing; rewritten from the view file, whose bytes "
                "hash to it",
                True,
            )
        else:
            message, fixed = "the file's object is missing", False
        report.problems.append(Problem("repository", path, message, fixed))


def _restore_from_remote(store: Store, sha: bytes) -> str | None:
    """Fetch object `sha` from a configured remote (each in turn); its name if one had it."""
    from beads.settings.localconfig import remotes
    from beads.sync.remote import restore_objects

    try:
        known = remotes(store.git.git_dir)
    except GcError:
        return None
    for name, url in known.items():
        try:
            if sha in restore_objects(store.git, url, {sha}, store.max_body):
                return f"rewritten from the remote {name}"
        except GcError:
            continue
    return None


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
