"""What a fetch receives is kept apart until it is accepted: git's quarantine.

A fetch writes the objects it received into a directory of its own inside the store's
objects directory, `objects/incoming-<pid>-<random>/` (one filesystem: moving them in is
renames), through `Incoming`, a `GitRepo` that writes there and reads there and, as an
alternate, from the store's own objects: the checks of the new history see both. Only
`Incoming.admit`, the one door by which fetched objects enter the store, moves them in;
any other end of the fetch (a refusal by a limit or by the gate, an error) removes the
directory with everything in it.

A killed process leaves its directory behind. The store never reads it; the next fetch and
`gc doctor` remove every one whose process is gone (`remove_dead`), as a killed `gc init`'s
half-built repository is removed (`beads.initstore.remove_dead_builds`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from beads.errors import StorageError
from beads.faults import fault
from beads.git.repair import process_alive
from beads.git.repo import ADD_ATTEMPTS, GitRepo

if TYPE_CHECKING:
    from dulwich.objects import ShaFile

PREFIX = "incoming-"


class Incoming(GitRepo):
    """The store's repository with its writes going to a quarantine directory (`path`),
    each remembered in the order it was made: a pack's path, or a loose object's id."""

    def __init__(self, store: GitRepo, path: Path) -> None:
        super().__init__(store.git_dir, objects_dir=path)
        self.store = store
        self.path = path
        self.written: list[tuple[str, str]] = []  # ("pack", base path) or ("loose", hex id)

    def add_loose(self, obj: ShaFile) -> None:
        """Write one object as a loose file of the quarantine (see `GitRepo.add_loose`)."""
        super().add_loose(obj)
        self.written.append(("loose", obj.id.decode("ascii")))

    def write_pack(self, objects: Sequence[ShaFile], *, points: tuple[str, str]) -> str | None:
        """Write `objects` as one pack of the quarantine (see `GitRepo.write_pack`)."""
        base = super().write_pack(objects, points=points)
        if base is not None:
            self.written.append(("pack", base))
        return base

    def maintain(self, *, loose: bool = False) -> None:
        """Nothing: the store's packs are kept few once the objects are in (`admit`)."""

    def admit(self) -> None:
        """Move what was written into the store's objects, in the order it was written (a
        caller writes what an object names before it: a kill midway leaves no commit in
        the store without its tree or its parents); a pack by its `.pack`, then its `.idx`
        (a pack counts once its `.idx` is there). An object the store got meanwhile is
        kept as it is. Call it under the store's write lock (`gc doctor`, which removes a
        pack without its `.idx`, runs under it)."""
        objects = self.store.git_dir / "objects"
        packs = 0
        try:
            for number, (kind, name) in enumerate(self.written):
                if number == len(self.written) // 2:
                    fault("fetch-half-admitted")
                if kind == "pack":
                    packs += _move_pack(name, objects / "pack")
                else:
                    _move_loose(self.path, objects, name)
        except OSError as exc:  # a full disk, say: what was moved is complete, and harmless
            raise StorageError(
                f"cannot move fetched objects into the store: {exc.strerror or exc}; "
                "nothing was merged"
            ) from None
        self.written = []
        if packs:
            self.store.maintain()


@contextlib.contextmanager
def receiving(store: GitRepo) -> Iterator[Incoming]:
    """A quarantine for the objects of one fetch into `store`: yields the `Incoming` that
    writes them; the directory is removed when the block ends, admitted or not. The
    directories of killed fetches are removed first."""
    remove_dead(store.git_dir)
    try:
        path = Path(
            tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=store.git_dir / "objects")
        )
    except OSError as exc:
        raise StorageError(
            f"cannot write git objects: {exc.strerror or exc}; nothing was changed"
        ) from None
    try:
        (path / "pack").mkdir()
        incoming = Incoming(store, path)
        try:
            yield incoming
        finally:
            incoming.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)


def remove_dead(git_dir: Path) -> list[Path]:
    """Remove the quarantine directories whose fetch's process is gone (killed); returns
    them. A live fetch's is never touched."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(git_dir / "objects"):
            if not entry.name.startswith(PREFIX):
                continue
            pid = entry.name[len(PREFIX) :].partition("-")[0]
            if pid.isdigit() and process_alive(int(pid)):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _move_pack(base: str, pack_dir: Path) -> int:
    """Move the pack at `base` (its path without a suffix) into `pack_dir`: 1 when it was
    moved, 0 when the store holds that pack already."""
    name = os.path.basename(base)
    target = pack_dir / name
    if os.path.exists(f"{target}.idx"):
        return 0
    pack_dir.mkdir(exist_ok=True)
    os.rename(f"{base}.pack", f"{target}.pack")
    os.rename(f"{base}.idx", f"{target}.idx")
    return 1


def _move_loose(source: Path, objects: Path, hex_id: str) -> None:
    """Move loose object `hex_id` from the objects directory `source` into `objects`,
    unless `objects` holds it (then its time is refreshed, as `GitRepo.add_loose` does)."""
    fan_out = objects / hex_id[:2]
    target = fan_out / hex_id[2:]
    try:
        os.utime(target, None)
    except (FileNotFoundError, PermissionError):  # absent; or another member's, left stale
        pass
    else:
        return
    for attempt in range(ADD_ATTEMPTS):
        with contextlib.suppress(FileExistsError):
            os.mkdir(fan_out)
        try:
            os.rename(source / hex_id[:2] / hex_id[2:], target)
            return
        except FileNotFoundError:
            # `git repack` (its prune-packed) removes a fan-out directory it emptied: made
            # again and retried, as `GitRepo.add_loose` does.
            if attempt == ADD_ATTEMPTS - 1:
                raise
