"""What would brick the store, repaired by every `gc doctor` run under the write lock: git
lock files and temporary files of dead writers, the quarantines of killed fetches, half-made
repositories of a killed `gc init`, a missing `.git/HEAD` and garbled packed refs.

The rest of doctor's repairs of `.git` sit beside this module, each of one kind, and their
public names are importable from here too: damaged and lost objects
(`beads.health.objectrepair`: loose objects cut short, packs cut short, a blob of HEAD
written again from the view), the history (`beads.health.historyrepair`: commits, trees and
files it names that are missing, fetched again from a configured remote), and the branch
(`beads.health.branchrepair`: a lost or garbled branch ref, restored to the last good
commit).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from beads import files
from beads.branch import BRANCH
from beads.git import quarantine, repair
from beads.git.refs import GC_LOCK_MTIME, lock_age
from beads.health.branchrepair import restore_branch
from beads.health.historyrepair import restore_history, restore_in_history
from beads.health.objectrepair import (
    COPY_AGAIN,
    PACKS_ASIDE,
    check_loose_objects,
    check_packs,
    restore_missing_blobs,
)
from beads.health.problems import Problem, Report, remove_file, shown_path
from beads.initstore import remove_dead_builds
from beads.store import Store

__all__ = [
    "COPY_AGAIN",
    "PACKS_ASIDE",
    "TEMP_STALE_SECONDS",
    "check_git_head",
    "check_loose_objects",
    "check_packed_refs",
    "check_packs",
    "clear_stale_files",
    "restore_branch",
    "restore_history",
    "restore_in_history",
    "restore_missing_blobs",
]

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
