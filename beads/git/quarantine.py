"""What a fetch receives is kept apart until it is accepted: git's quarantine.

A fetch hands the objects it received to `Incoming`, a `GitRepo` that reads them, and through
them the store's own objects: the checks of the new history see both. It holds them in
memory up to `SPILL_BYTES` (a fetch's last batch and its commits, as the stream held them
before); past that it writes them into a directory of its own inside the store's objects
directory, `objects/incoming-<pid>-<random>/` (one filesystem: moving them in is renames);
a read looks there, then in the store. Only `Incoming.admit`, the one door by
which fetched objects enter the store, moves them in; any other end of the fetch (a refusal
by a limit or by the gate, an error) drops them and removes the directory.

A killed process leaves its directory behind. The store never reads it; the next fetch that
writes one and `gc doctor` remove every one whose process is gone (`remove_dead`), as a
killed `gc init`'s half-built repository is removed (`beads.initstore.remove_dead_builds`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from beads.errors import StorageError
from beads.faults import fault
from beads.git.repair import process_alive
from beads.git.repo import GitRepo
from beads.git.writing import ADD_ATTEMPTS, PACK_OBJECTS_AT, refreshed

if TYPE_CHECKING:
    from dulwich.objects import ShaFile

PREFIX = "incoming-"
# Objects held in memory up to this many bytes: past it they are written to the quarantine
# directory (a fetch hands over its blobs and trees in batches of about this size).
SPILL_BYTES = 8 * 1024 * 1024


class Incoming(GitRepo):
    """The store's repository as a fetch's objects would make it: the objects handed to
    `store_objects` are read with the store's (`get_raw`, `has_object`, `commit_of`,
    `read_path`...), and enter the store only through `admit`. What reads dulwich's
    `objects` directly (`files`, `log`, `beads.git.history.objects_since`) sees only what was
    spilled, neither what is held in memory nor the store's: the checks of a fetch read
    through `get_raw`."""

    def __init__(self, store: GitRepo, path: Path) -> None:
        super().__init__(store.git_dir, objects_dir=path)
        self.store = store
        self.path = path  # made on the first spill
        self.held: dict[bytes, ShaFile] = {}  # by id, in the order handed over
        self.held_bytes = 0
        self.spilled = False
        self.written: list[tuple[str, str]] = []  # ("pack", base path) or ("loose", hex id)

    def store_objects(self, objects: Sequence[ShaFile]) -> None:
        """Keep `objects` for `admit`: in memory, written to the quarantine directory once
        more than `SPILL_BYTES` are held."""
        for obj in objects:
            if obj.id not in self.held:
                self.held[obj.id] = obj
                self.held_bytes += obj.raw_length()
        if self.held_bytes >= SPILL_BYTES:
            self._spill()

    def _spill(self) -> None:
        """Write the objects held into the quarantine directory (made on the first spill)."""
        if not self.spilled:
            remove_dead(self.git_dir)
            try:
                os.mkdir(self.path)
                os.mkdir(self.path / "pack")
            except OSError as exc:
                raise StorageError(
                    f"cannot write git objects: {exc.strerror or exc}; nothing was changed"
                ) from None
            self.spilled = True
        # No longer held once handed over: a write that failed must not find them here
        # (`GitRepo.write_pack` takes objects it can still read as written).
        objects = list(self.held.values())
        self.held, self.held_bytes = {}, 0
        super().store_objects(objects)
        fault("fetch-spilled")

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

    def get_raw(self, sha: bytes) -> tuple[int, bytes]:
        """The type and bytes of object `sha`, held, spilled or the store's; KeyError when
        it is in none."""
        obj = self.held.get(sha)
        if obj is not None:
            return obj.type_num, obj.as_raw_string()
        if self.spilled:
            with contextlib.suppress(KeyError):
                return self.objects.get_raw(sha)
        return self.store.get_raw(sha)

    def has_object(self, sha: bytes) -> bool:
        """Whether object `sha` is held, spilled or the store's."""
        if sha in self.held or (self.spilled and sha in self.objects):
            return True
        return self.store.has_object(sha)

    def admit(self) -> None:
        """Move the objects into the store, in the order they were handed over (a fetch hands
        over what an object names before it: a kill midway leaves no commit in the store
        without its tree or its parents). Those spilled are moved (a pack by its `.pack`,
        then its `.idx`: a pack counts once its `.idx` is there); those held are written by
        `GitRepo.store_objects`. An object the store got meanwhile is kept as it is. Call it
        under the store's write lock (`gc doctor`, which removes a pack without its `.idx`,
        runs under it)."""
        objects = self.store.git_dir / "objects"
        packs = 0
        try:
            for kind, name in self.written:
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
        held = list(self.held.values())
        self.held, self.held_bytes = {}, 0
        if len(held) >= PACK_OBJECTS_AT:
            self.store.store_objects(held)  # one pack, its index last: all or nothing
            return
        half = len(held) // 2  # loose, one by one: a kill can fall between any two
        self.store.store_objects(held[:half])
        fault("fetch-half-stored")
        self.store.store_objects(held[half:])


@contextlib.contextmanager
def receiving(store: GitRepo) -> Iterator[Incoming]:
    """A quarantine for the objects of one fetch into `store`: yields the `Incoming` they
    are handed to. Whatever was not admitted is dropped when the block ends."""
    name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    incoming = Incoming(store, store.git_dir / "objects" / name)
    try:
        yield incoming
    finally:
        incoming.held = {}
        incoming.close()
        if incoming.spilled:
            shutil.rmtree(incoming.path, ignore_errors=True)


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
    if refreshed(str(target)):
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
