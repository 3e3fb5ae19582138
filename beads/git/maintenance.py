"""Keeping the store's packs few: geometric repacking in the background, full repacks for doctor.

Every object lookup probes the packs one by one, so their number must not grow with the
store's age. The packs sorted by object count must form a geometric progression, each at
least `FACTOR` times the one before, as `git repack --geometric=2` keeps them: the number of
packs then stays below log2 of the object count, and each object is rewritten about log2
times over the store's life.

No write waits for a repack. A writer that added a pack out of progression, or crossed the
loose-object threshold, starts a detached background process (`python -m
beads.git.repacker --asked GIT_DIR`) and goes on. That process runs `git repack -d --geometric=2`
where git is installed (git packs the loose objects too and deletes them once packed), and
otherwise does the same with dulwich's public API: the loose objects, each checked against
its name, written as one pack (`add_pack_data`), then the smallest packs that break the
progression merged into one. One repack runs at a time per store, under the `gc-repack` lock
in the git directory (an OS lock: a killed holder releases it); `gc doctor --gc` takes the
same lock, so no background repack runs while it compacts.

Crash safety: a pack counts once its `.idx` exists, and git and dulwich write it last; the
packs (and loose copies) a repack replaces are removed only once the new pack is in place. A
crash leaves the old objects alone, or both copies (duplicates are harmless). A reader whose
cached list misses an object looks again (`GitRepo.objects`, `GitRepo.get_raw`).

`gc doctor --gc` repacks everything into one pack with deltas: `git repack -a -d -f -k` where
git is installed (unreachable objects kept: doctor finds lost commits among them), else
dulwich's writer with its delta search, holding the objects in memory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from beads.errors import Conflict, StorageError, telling_line
from beads.faults import fault
from beads.git.objects import loose_ids, read_loose, umask_for

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from dulwich.object_store import DiskObjectStore
    from dulwich.objects import ShaFile

    class GitRepo(Protocol):
        """What packing needs of a repository (`beads.git.repo.GitRepo` is one): this
        module never imports it, as the repository calls in here after each write."""

        git_dir: Path
        objects: DiskObjectStore

        def write_pack(self, objects: Sequence[ShaFile], *, points: tuple[str, str]) -> str | None:
            """Write `objects` as one pack; the pack's base path."""

        def give_mode(self, *paths: str) -> None:
            """Give files written into the repository the mode of an object file."""

        def close(self) -> None:
            """Let go of the object store's files."""


# Each pack holds at least this many times the objects of all smaller packs together.
FACTOR = 2
# The background repack waits this long for the lock before leaving the work to its holder.
BACKGROUND_LOCK_WAIT = 30.0
# Loose objects the background repack leaves at its end (fewer are not worth a pack).
LOOSE_LEFT_OVER = 500
# Rounds of one background run at most (writers may keep adding loose objects meanwhile).
BACKGROUND_ROUNDS = 4
# The background repack's niceness (0-19): it runs beside the writers it keeps fast.
BACKGROUND_NICE = 10
LOCK_NAME = "gc-repack"
# Left by a writer that found a repack running and wanted more packed than it will see.
MORE_NAME = "gc-repack-more"
# Without git, `gc doctor --gc` searches deltas (in Python) up to this many objects; past it
# the pack holds whole objects.
DELTIFY_AT_MOST = 50_000
# A folder of recycled loose-object files that earlier builds kept beside `objects/`:
# nothing reads it, so packing deletes it.
OLD_SPARE_DIR = "spare-objects"
# Files that travel with a pack (git writes some of them); removed with it, `.idx` first.
PACK_SIDECARS = (".idx", ".rev", ".bitmap", ".mtimes", ".promisor", ".pack")
_IDX_V2 = b"\xfftOc\x00\x00\x00\x02"


def rollup(counts: list[int], factor: int = FACTOR) -> int:
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


class PackFile(NamedTuple):
    """One complete pack of the store: its path without the suffix, and its object count."""

    base: str
    count: int


def packs_of(git_dir: Path) -> list[PackFile]:
    """The complete packs (those with an `.idx`), but not those a `.keep` pins or whose
    index does not read, sorted by object count (read from each index's header)."""
    pack_dir = git_dir / "objects" / "pack"
    try:
        names = set(os.listdir(pack_dir))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        stem = name[: -len(".pack")]
        if name.endswith(".pack") and stem + ".idx" in names and stem + ".keep" not in names:
            try:
                with open(pack_dir / (stem + ".idx"), "rb") as handle:
                    header = handle.read(8 + 256 * 4)
            except OSError:
                continue
            if len(header) == 8 + 256 * 4 and header[:8] == _IDX_V2:
                found.append(PackFile(str(pack_dir / stem), int.from_bytes(header[-4:], "big")))
    found.sort(key=lambda pack: (pack.count, pack.base))
    return found


def pack_base(git_dir: Path, name: bytes) -> str:
    """The path, without the suffix, of the pack git names by `name` (hex)."""
    return str(git_dir / "objects" / "pack" / ("pack-" + name.decode()))


def count_loose(git_dir: Path) -> int:
    """How many loose objects the store holds."""
    return sum(1 for _ in loose_ids(str(git_dir / "objects")))


# -- when to repack ------------------------------------------------------------------------


def after_write(git: GitRepo, *, loose: bool = False) -> None:
    """Start the background repack after a write that added a pack out of progression, or
    (`loose`) crossed the writers' loose-object threshold.

    The request is left first, then the lock tried: a running repack looks for requests
    after it lets the lock go, so either it sees this one or this writer finds the lock free
    and starts a run (a run ending meanwhile may then run beside it: harmless)."""
    if not loose and not rollup([pack.count for pack in packs_of(git.git_dir)]):
        return
    with contextlib.suppress(OSError):
        (git.git_dir / MORE_NAME).touch()
    lock = _try_lock(git.git_dir, 0)
    if lock is None:  # a repack runs: it takes the request once it lets the lock go
        return
    lock.release()  # type: ignore[attr-defined]
    spawn(git.git_dir)


# The background repacks this process started, with their repositories (reaped when done).
started: list[tuple[Path, object]] = []


def spawn(git_dir: Path) -> None:
    """Start the background repack (`python -m beads.git.repacker --asked GIT_DIR`), detached:
    its own session, no terminal, nothing inherited that a caller waits on (a pipe of
    stdout)."""
    import subprocess

    started[:] = [(where, child) for where, child in started if child.poll() is None]  # type: ignore[attr-defined]
    if not sys.executable:
        return
    with contextlib.suppress(OSError):
        child = subprocess.Popen(
            [sys.executable, "-m", "beads.git.repacker", "--asked", str(git_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        started.append((git_dir, child))


def take_request(git_dir: Path) -> bool:
    """Whether a writer asked for a repack (and the request, now taken). Call it under the
    repack lock, before the repack it asks for."""
    try:
        (git_dir / MORE_NAME).unlink()
    except OSError:
        return False
    return True


def pack_loose(git: GitRepo) -> int:
    """Write the loose objects as one pack, then delete them; returns how many were packed.
    Each is read whole and checked against its name first: one cut short, or holding
    another object's bytes, stays loose for `gc doctor`. Call it under the repack lock."""
    from dulwich.objects import ShaFile

    objects_dir = str(git.git_dir / "objects")
    _remove_old_spares(git.git_dir)
    found = []
    for sha in loose_ids(objects_dir):
        read = read_loose(objects_dir, sha)
        if read is not None:
            found.append(ShaFile.from_raw_string(read[0], read[1], sha))
    if not found:
        return 0
    git.write_pack(found, points=("repack-mid", "repack-before-idx"))
    fault("repack-written")
    fault("loose-packed")
    for obj in found:
        with contextlib.suppress(OSError):
            git.objects.delete_loose_object(obj.id)
    return len(found)


def merge_packs(git: GitRepo) -> int:
    """Merge the smallest packs that break the progression into one (dulwich's writer, the
    objects of those packs held in memory); returns how many packs were merged."""
    from dulwich.pack import Pack

    packs = packs_of(git.git_dir)
    chosen = packs[: rollup([pack.count for pack in packs])]
    if not chosen:
        return 0
    found = []
    for pack in chosen:
        opened = Pack(pack.base, object_format=git.objects.object_format)
        try:
            found.extend(opened.iterobjects())
        finally:
            opened.close()
    new = git.write_pack(found, points=("repack-mid", "repack-before-idx"))
    fault("repack-written")
    for number, pack in enumerate(chosen):
        if pack.base != new:  # the same objects again get the same name: that one stays
            remove_pack(pack.base)
        if number == 0:
            fault("repack-mid-remove")
    git.objects.close()  # forget the removed packs
    return len(chosen)


def remove_pack(base: str) -> None:
    """Remove a pack: its `.idx` first (no new reader opens it), the data last."""
    for suffix in PACK_SIDECARS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base + suffix)


def _remove_old_spares(git_dir: Path) -> None:
    old = git_dir / OLD_SPARE_DIR
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def locked(git_dir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the repack lock, waiting up to `timeout` seconds for a running repack."""
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
        """One line for doctor's report."""
        return (
            f"repacked {self.objects} objects from {self.packs_before} pack(s) and the loose "
            f"objects into one pack of {self.size / 2**20:.1f} MiB ({self.method})"
        )


def full(git: GitRepo, *, use_git: bool = True, timeout: float = 600.0) -> Repacked:
    """Repack every object (unreachable ones too: doctor finds lost commits among them) into
    one pack: with `git repack -a -d -f -k` where git is installed and `use_git`, else by
    dulwich. Waits for a background repack first. Call it under the write lock."""
    with locked(git.git_dir, timeout):
        take_request(git.git_dir)  # everything is repacked: what a writer asked for too
        packs_before = len(packs_of(git.git_dir))
        program = shutil.which("git") if use_git else None
        if program is not None:
            git.objects.close()  # git replaces the packs: nothing of them held open here
            _git(program, git.git_dir, FULL)
            method = "git repack -a -d -f"
        else:
            if not packs_before and not count_loose(git.git_dir):
                return Repacked(0, 0, 0, "nothing to pack")
            _dulwich_full(git)
            method = "dulwich, no git"
        git.objects.close()
        after = packs_of(git.git_dir)
        size = sum(os.path.getsize(pack.base + ".pack") for pack in after)
        return Repacked(sum(pack.count for pack in after), packs_before, size, method)


def _dulwich_full(git: GitRepo) -> None:
    """Every object of the packs and the (readable) loose objects in one new pack, with
    deltas searched by dulwich when the objects are few enough; then the old ones removed."""
    from dulwich.objects import ShaFile
    from dulwich.pack import Pack, pack_objects_to_data

    objects_dir = str(git.git_dir / "objects")
    before = packs_of(git.git_dir)
    found: dict[bytes, ShaFile] = {}
    for pack in before:
        opened = Pack(pack.base, object_format=git.objects.object_format)
        try:
            for obj in opened.iterobjects():
                found[obj.id] = obj
        finally:
            opened.close()
    loose = []
    for sha in loose_ids(objects_dir):
        read = read_loose(objects_dir, sha)
        if read is not None:
            loose.append(sha)
            found.setdefault(sha, ShaFile.from_raw_string(read[0], read[1], sha))
    objects = list(found.values())
    count, records = pack_objects_to_data(objects, deltify=len(objects) <= DELTIFY_AT_MOST)
    written = git.objects.add_pack_data(count, records)
    fault("repack-written")
    new = None if written is None else pack_base(git.git_dir, written.name())
    if new is not None:
        git.give_mode(new + ".pack", new + ".idx", str(git.git_dir / "objects" / "info" / "packs"))
    for pack in before:
        if pack.base != new:  # the same objects again get the same name: that one stays
            remove_pack(pack.base)
    for sha in loose:
        with contextlib.suppress(OSError):
            git.objects.delete_loose_object(sha)


# git's own defaults for -f (window 10, depth 50); one thread and small caches and windows keep
# its peak near what its walk of the objects needs (~240 MiB at 300k beads, 600k objects, where
# the defaults take ~390); no bitmap (bare repositories write one; nothing here reads it).
GIT_LIMITS = (
    "-c", "pack.threads=1", "-c", "pack.windowMemory=16m", "-c", "pack.deltaCacheSize=8m",
    "-c", "core.deltaBaseCacheLimit=8m", "-c", "core.packedGitLimit=64m",
    "-c", "core.packedGitWindowSize=8m", "-c", "repack.writeBitmaps=false", "-c", "gc.auto=0",
)  # fmt: skip
FULL = (*GIT_LIMITS, "repack", "-a", "-d", "-f", "-k", "-q", "--window=10", "--depth=50")
GEOMETRIC = (*GIT_LIMITS, "repack", "-d", "-q", "--geometric=2")


def _git(program: str, git_dir: Path, args: tuple[str, ...]) -> None:
    """Run git on the store's repository; StorageError naming what git said when it fails."""
    import subprocess

    result = subprocess.run(
        [program, "-C", str(git_dir), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        umask=umask_for(git_dir),  # its packs and their list: no wider than an object file
    )
    if result.returncode != 0:
        raise StorageError(f"git repack failed: {telling_line(result.stderr)}")
