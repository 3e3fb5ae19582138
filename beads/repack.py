"""Keeping the store's packs few: geometric repacking after writes, full repacks for doctor.

Every object lookup probes the packs one by one, so their number must not grow with the
store's age. After a write that adds a pack (a large commit, or loose objects packed), the
packs sorted by object count must form a geometric progression, each at least `FACTOR` times
the one before, as `git repack --geometric=2` keeps them; where they do not, the smallest
ones are merged into one (`rollup`). The number of packs then stays below log2 of the
object count, and each object is rewritten about log2 times over the store's life.

No write waits for a big repack: a merge of at most `INLINE_OBJECTS` objects runs at once
under the write lock (a few ms: entries are copied as they are, never decompressed), and
anything larger, and the packing of loose objects, runs in a detached background process
(`python -m beads.repack GIT_DIR`). One repack runs at a time, under the `gc-repack` lock
in the git directory; a writer that finds it held leaves the work to the running one, which
plans again before it ends.

Crash safety: a merge (`beads/packmerge.py`) removes the packs it replaces only once the new
one and its `.idx` are written; a crash leaves the old packs alone or both. A reader holding
an old pack keeps reading it (unlinked files stay mapped); one whose cached list misses an
object rescans the pack directory (dulwich does, and `GitRepo` retries a miss once more, for
a loose object packed between the two looks).

`gc doctor --gc` repacks everything into one pack with deltas: with the `git` program where
it is installed (`git repack -a -d -f`, unreachable objects kept), else by the same streaming
merge (existing deltas kept, memory a few dozen bytes per object, never the objects).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from beads.packmerge import ObjectsDir, merge, packs_of

if TYPE_CHECKING:
    from beads.gitrepo import GitRepo

# Each pack holds at least this many times the objects of all smaller packs together.
FACTOR = 2
# A merge of at most this many objects runs under the write lock; a larger one in the
# background. Copying an entry costs a few microseconds, so this is a few ms.
INLINE_OBJECTS = 2_000
# The background repack waits this long for the lock before leaving the work to its holder.
BACKGROUND_LOCK_WAIT = 30.0
# Loose objects the background repack leaves at its end (fewer are not worth a pack).
LOOSE_LEFT_OVER = 500
# The background repack's niceness (0-19): it runs beside the writers it keeps fast.
BACKGROUND_NICE = 10
LOCK_NAME = "gc-repack"


def rollup(counts: Sequence[int], factor: int = FACTOR) -> int:
    """How many of the smallest packs (`counts` ascending) to merge into one so that the
    packs form a geometric progression again: git's `--geometric` split."""
    split = 0
    for i in range(len(counts) - 1, 0, -1):
        if counts[i] < factor * counts[i - 1]:
            split = i + 1
            break
    total = sum(counts[:split])
    for count in counts[split:]:
        if count < factor * total:
            split += 1
            total += count
        else:
            break
    return split if split >= 2 else 0


# -- when to repack, and where -------------------------------------------------------------


def after_write(git: GitRepo, *, loose: bool = False) -> None:
    """Keep the packs geometric after a write that added a pack, or pack the loose objects
    (`loose`, past the writers' threshold). Called under the write lock: a small merge runs
    here, anything larger in the background; a running repack is left to finish the work."""
    lock = _try_lock(git.git_dir, 0)
    if lock is None:
        return  # a repack runs: it plans again before it ends
    try:
        if not loose:
            packs = packs_of(git.objects)
            try:
                split = rollup([pack.count for pack in packs])
                if not split:
                    return
                if sum(pack.count for pack in packs[:split]) <= INLINE_OBJECTS:
                    merge(git.objects, packs[:split])
                    return
            finally:
                for pack in packs:
                    pack.close()
    finally:
        lock.release()
    spawn(git.git_dir)


# The background repacks this process started, by repository.
_children: dict[Path, object] = {}


def spawn(git_dir: Path) -> None:
    """Start the background repack (`python -m beads.repack GIT_DIR`), detached: its own
    session, no terminal, nothing inherited that a caller waits on (a pipe of stdout). One
    this process started for the same repository and still running is left the work."""
    import subprocess

    for started, child in list(_children.items()):
        if child.poll() is not None:  # type: ignore[attr-defined]
            del _children[started]  # reaped, not left as a zombie
    if git_dir in _children or not sys.executable:
        return
    with contextlib.suppress(OSError):
        _children[git_dir] = subprocess.Popen(
            [sys.executable, "-m", "beads.repack", str(git_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def background(git_dir: Path) -> None:
    """Pack the loose objects, then merge packs until they are geometric: the background
    step, under the repack lock (waiting for a running one, then leaving it the work)."""
    lock = _try_lock(git_dir, BACKGROUND_LOCK_WAIT)
    if lock is None:
        return
    try:
        objects = ObjectsDir(str(git_dir / "objects"))
        loose = list(objects._iter_loose_objects())
        while True:
            packs = packs_of(objects)
            split = rollup([pack.count for pack in packs])
            chosen = packs[:split]
            for pack in packs[split:]:
                pack.close()
            if not chosen and not loose:
                # Writers that crossed their threshold meanwhile left the work to this run
                # (the lock was held): their loose objects are packed before it ends.
                loose = list(objects._iter_loose_objects())
                if len(loose) < LOOSE_LEFT_OVER:
                    return
            merge(objects, chosen[::-1], loose)
            loose = []
    finally:
        lock.release()


def wait_idle(git_dir: Path, timeout: float) -> bool:
    """Wait until the background repack this process started for `git_dir` has ended and
    no repack runs there; False when one still does after `timeout` seconds."""
    import subprocess

    child = _children.get(git_dir)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout)  # type: ignore[attr-defined]
    lock = _try_lock(git_dir, timeout)
    if lock is None:
        return False
    lock.release()
    return True


@contextlib.contextmanager
def locked(git_dir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the repack lock, waiting up to `timeout` seconds for a running repack."""
    from beads.errors import Conflict

    lock = _try_lock(git_dir, timeout)
    if lock is None:
        raise Conflict(f"a background repack holds {git_dir / LOCK_NAME}; retry later")
    try:
        yield
    finally:
        lock.release()  # type: ignore[attr-defined]


def _try_lock(git_dir: Path, timeout: float) -> object | None:
    """The repack lock (an OS lock: a killed holder releases it), or None when it stays
    held for `timeout` seconds."""
    import filelock

    lock = filelock.FileLock(str(git_dir / LOCK_NAME), timeout=timeout)
    try:
        lock.acquire(poll_interval=0.01)
    except filelock.Timeout:
        return None
    return lock


# -- `gc doctor --gc` ------------------------------------------------------------------------


class Repacked(NamedTuple):
    """What a full repack did: objects, packs before, the size of the pack, and how."""

    objects: int
    packs_before: int
    size: int
    method: str

    def describe(self) -> str:
        return (
            f"repacked {self.objects} objects from {self.packs_before} pack(s) and the loose "
            f"objects into one pack of {self.size / 2**20:.1f} MiB ({self.method})"
        )


def full(git: GitRepo, *, use_git: bool = True, timeout: float = 600.0) -> Repacked:
    """Repack every object (unreachable ones too: doctor finds lost commits among them) into
    one pack: with `git repack -a -d -f -k` where git is installed and `use_git`, else by
    the streaming merge. Waits for a background repack first. Call it under the write lock."""
    import shutil

    with locked(git.git_dir, timeout):
        before = packs_of(git.objects)
        packs_before = len(before)
        program = shutil.which("git") if use_git else None
        if program is not None:
            for pack in before:
                pack.close()
            _git_repack(program, git.git_dir)
            git.objects._update_pack_cache()
            after = packs_of(git.objects)
            objects = sum(pack.count for pack in after)
            size = sum(os.path.getsize(pack.base + ".pack") for pack in after)
            for pack in after:
                pack.close()
            return Repacked(objects, packs_before, size, "git repack -a -d -f")
        loose = list(git.objects._iter_loose_objects())
        if not before and not loose:
            return Repacked(0, 0, 0, "nothing to pack")
        merged = merge(git.objects, before[::-1], loose)
        return Repacked(merged.objects, packs_before, merged.size, "streaming merge, no git")


# git's own defaults for -f (window 10, depth 50); one thread and small caches and windows keep
# its peak near what its walk of the objects needs (~240 MiB at 300k beads, 600k objects, where
# the defaults take ~390); no bitmap (bare repositories write one; nothing here reads it).
GIT_REPACK = (
    "-c", "pack.threads=1", "-c", "pack.windowMemory=16m", "-c", "pack.deltaCacheSize=8m",
    "-c", "core.deltaBaseCacheLimit=8m", "-c", "core.packedGitLimit=64m",
    "-c", "core.packedGitWindowSize=8m", "-c", "repack.writeBitmaps=false", "-c", "gc.auto=0",
    "repack", "-a", "-d", "-f", "-k", "-q", "--window=10", "--depth=50",
)  # fmt: skip


def _git_repack(program: str, git_dir: Path) -> None:
    import subprocess

    from beads.errors import StorageError

    result = subprocess.run(
        [program, "-C", str(git_dir), *GIT_REPACK],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise StorageError(f"git repack failed: {result.stderr.strip()[:300]}")


def main(argv: list[str]) -> int:
    """`python -m beads.repack GIT_DIR`: the background step. Silent: a failure leaves the
    packs as they were (every step is safe to interrupt), to be done by the next run."""
    if len(argv) != 1:
        print("usage: python -m beads.repack GIT_DIR", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):
        # Upkeep yields the CPU to the writers it serves (two cores are common for agents).
        os.nice(BACKGROUND_NICE)
    with contextlib.suppress(Exception):
        background(Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
