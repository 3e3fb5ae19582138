"""The background repack (`python -m beads.git.repacker GIT_DIR`), which a writer starts
(`beads.git.maintenance.spawn`): pack the loose objects and keep the packs geometric, under
the repack lock, by git where it is installed and by dulwich's public API where it is not."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

from beads.errors import StorageError
from beads.git import maintenance
from beads.git.maintenance import (
    BACKGROUND_LOCK_WAIT,
    BACKGROUND_NICE,
    BACKGROUND_ROUNDS,
    GEOMETRIC,
    LOOSE_LEFT_OVER,
    MORE_NAME,
    _git,
    _try_lock,
    count_loose,
    merge_packs,
    pack_loose,
    packs_of,
    rollup,
    spawn,
    take_request,
)
from beads.git.objects import umask_for
from beads.git.repo import GitRepo


def background(git_dir: Path, *, asked: bool = False) -> None:
    """Pack the loose objects and keep the packs geometric: the background step, under the
    repack lock (waiting for a running one, then leaving it the work).

    Each turn takes the writers' request, repacks and lets the lock go, then looks again: a
    writer that found the lock held left its request before trying it, so a request is
    always seen after the lock is let go, by this run or by the writer itself. The turns are
    bounded so that the lock is let go for good now and then (`gc doctor --gc` waits for
    it); a request still there after the last turn is a successor's.

    A run started by hand repacks at least once; one started for a request (`asked`: a
    writer's or a predecessor's) only while there is a request or work left, so that one
    whose request another run took changes nothing."""
    for turn in range(BACKGROUND_ROUNDS):
        lock = _try_lock(git_dir, BACKGROUND_LOCK_WAIT)
        if lock is None:  # its holder takes the request once it lets the lock go
            return
        try:
            if take_request(git_dir) or (turn == 0 and not asked) or work_left(git_dir):
                geometric(git_dir)
            left = work_left(git_dir)
        finally:
            lock.release()  # type: ignore[attr-defined]
        if not left and not (git_dir / MORE_NAME).exists():
            return
    if (git_dir / MORE_NAME).exists():
        spawn(git_dir)


def work_left(git_dir: Path) -> bool:
    """Whether the store holds loose objects worth a pack, or packs out of progression."""
    return count_loose(git_dir) >= LOOSE_LEFT_OVER or bool(
        rollup([pack.count for pack in packs_of(git_dir)])
    )


def wait_idle(git_dir: Path, timeout: float) -> bool:
    """Wait until the background repacks this process started for `git_dir` have ended,
    then finish under the repack lock what is still asked for or left (a request no run
    took, as when its run failed to start or was killed; packs a git repack left out of
    progression by packing loose objects beside them), so that no run started for a request
    changes the store afterwards; False when the lock stays held past `timeout`. For tests
    and benchmarks, which measure a settled store."""
    import subprocess
    import time

    deadline = time.monotonic() + timeout
    for where, child in list(maintenance.started):
        if where == git_dir:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(max(0.0, deadline - time.monotonic()))  # type: ignore[attr-defined]
    lock = _try_lock(git_dir, max(0.0, deadline - time.monotonic()))
    if lock is None:
        return False
    try:
        asked = take_request(git_dir)
        for _turn in range(BACKGROUND_ROUNDS):
            if not (asked or work_left(git_dir)):
                break
            geometric(git_dir)
            asked = False
    finally:
        lock.release()  # type: ignore[attr-defined]
    return True


def geometric(git_dir: Path) -> None:
    """One geometric repack: by git where it is installed, else by dulwich. A git that
    fails (too old for `--geometric`, or a damaged loose object it refuses) leaves the work
    to dulwich's way, which leaves a damaged object loose for `gc doctor`."""
    program = shutil.which("git")
    if program is not None:
        try:
            _git(program, git_dir, GEOMETRIC)
            return
        except StorageError:
            pass
    git = GitRepo(git_dir)
    try:
        pack_loose(git)
        merge_packs(git)
    finally:
        git.close()


def main(argv: list[str]) -> int:
    """`python -m beads.git.repacker [--asked] GIT_DIR`: the background step (`--asked`:
    started for a request, see `background`). Silent: a failure leaves the packs as they
    were (every step is safe to interrupt), for the next run."""
    asked = argv[:1] == ["--asked"]
    if asked:
        argv = argv[1:]
    if len(argv) != 1:
        print("usage: python -m beads.git.repacker [--asked] GIT_DIR", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):
        # Upkeep yields the CPU to the writers it serves (two cores are common for agents).
        os.nice(BACKGROUND_NICE)
    os.umask(umask_for(Path(argv[0])))  # what it writes is the store's, whoever started it
    with contextlib.suppress(Exception):
        background(Path(argv[0]), asked=asked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
