"""Git objects made and written straight from bytes: the write path's trees and loose files.

A write rewrites the trees on its path (root, type, two shard levels) and writes each new
object as a loose file. dulwich's `Tree` serializes, hashes and compresses entry by entry,
so a commit's cost grew with the store (a shard tree holds up to 256 entries at 65k+ beads).
Here a tree is kept as its bytes, its entries and where each entry's id sits in the bytes:
changing the id of an existing entry (the common case: a subtree or a bead file rewritten)
patches 20 bytes of a copy, and a loose object is hashed and compressed in one call each.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import os
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dulwich.object_store import DiskObjectStore

TREE, BLOB = 2, 3
TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
TYPE_NUMBERS = {name: number for number, name in TYPE_NAMES.items()}
DIR_TYPE = 0o040000
# git's default for loose objects (core.looseCompression): fastest. A tree, mostly 20-byte
# ids, shrinks by under a fifth, and a loose object lives only until the next repack (which
# compresses it again into the pack): trees are stored uncompressed.
LOOSE_LEVEL = {TREE: 0}
LOOSE_LEVEL_DEFAULT = 1
# Trees kept per repository: the upper levels of a store of any size (1 + types x 257) fit,
# with room for the leaves read recently.
TREES_KEPT = 4096


class RawObject:
    """A git object made from its bytes, read as dulwich's objects are by the pack writer
    (`type_num`, `as_raw_chunks()`, `sha().digest()`) and by `write_loose`."""

    __slots__ = ("type_num", "raw", "id", "_sha")

    def __init__(self, type_num: int, raw: bytes) -> None:
        self.type_num = type_num
        self.raw = raw
        self._sha = hashlib.sha1(b"%s %d\0" % (TYPE_NAMES[type_num], len(raw)) + raw)
        self.id = self._sha.hexdigest().encode()

    @property
    def type_name(self) -> bytes:
        return TYPE_NAMES[self.type_num]

    def as_raw_string(self) -> bytes:
        return self.raw

    def as_raw_chunks(self) -> list[bytes]:
        return [self.raw]

    def sha(self) -> hashlib._Hash:
        return self._sha


class TreeData:
    """A tree's entries (name -> (mode, hex id)) and bytes; never changed once made (a
    changed tree is a new `TreeData`), so one can be shared by every reader."""

    __slots__ = ("entries", "raw", "_offsets")

    def __init__(
        self,
        entries: dict[bytes, tuple[int, bytes]],
        raw: bytes | None = None,
        offsets: dict[bytes, int] | None = None,
    ) -> None:
        self.entries = entries
        self.raw = _tree_bytes(entries) if raw is None else raw
        self._offsets = offsets

    @classmethod
    def parse(cls, raw: bytes) -> TreeData:
        """The tree whose bytes are `raw` (git's format: `<mode> <name>\\0<20-byte id>`...)."""
        entries: dict[bytes, tuple[int, bytes]] = {}
        offsets: dict[bytes, int] = {}
        hexlify, find, pos, end = binascii.hexlify, raw.find, 0, len(raw)
        while pos < end:
            space, nul = find(b" ", pos), find(b"\0", pos)
            if space < 0 or nul < space or nul + 21 > end:
                raise ValueError("a malformed tree")
            name = raw[space + 1 : nul]
            entries[name] = (int(raw[pos:space], 8), hexlify(raw[nul + 1 : nul + 21]))
            offsets[name] = nul + 1
            pos = nul + 21
        return cls(entries, raw, offsets)

    def changed(self, changes: dict[bytes, tuple[int, bytes] | None]) -> TreeData:
        """This tree with `changes` applied (name -> new (mode, hex id), or None to remove)."""
        entries = dict(self.entries)
        same_layout = True
        for name, entry in changes.items():
            old = entries.get(name)
            if entry is None:
                if old is not None:
                    del entries[name]
                    same_layout = False
            else:
                if old is None or old[0] != entry[0]:
                    same_layout = False
                entries[name] = entry
        if not same_layout:
            return TreeData(entries)
        # Only ids changed: each sits at a known place in the bytes, which keep their layout.
        offsets = self._entry_offsets()
        raw = bytearray(self.raw)
        for name, entry in changes.items():
            assert entry is not None
            at = offsets[name]
            raw[at : at + 20] = binascii.unhexlify(entry[1])
        return TreeData(entries, bytes(raw), offsets)

    def _entry_offsets(self) -> dict[bytes, int]:
        if self._offsets is None:
            self._offsets = TreeData.parse(self.raw)._offsets
            assert self._offsets is not None
        return self._offsets


def _git_order(item: tuple[bytes, tuple[int, bytes]]) -> bytes:
    """Git sorts a tree's entries by name, a directory's name as if it ended with '/'."""
    name, (mode, _sha) = item
    return name + b"/" if mode & 0o170000 == DIR_TYPE else name


def _tree_bytes(entries: dict[bytes, tuple[int, bytes]]) -> bytes:
    unhexlify = binascii.unhexlify
    return b"".join(
        [b"%o %s\0%s" % (mode, name, unhexlify(sha)) for name, (mode, sha) in sorted(
            entries.items(), key=_git_order
        )]
    )  # fmt: skip


class TreeCache:
    """Trees read or written lately, by id, the least recently used dropped past
    `TREES_KEPT` (a tree's id names its content: a kept tree is never stale)."""

    def __init__(self, objects: DiskObjectStore) -> None:
        self.objects = objects
        self._kept: OrderedDict[bytes, TreeData] = OrderedDict()

    def get(self, sha: bytes) -> TreeData | None:
        """The tree `sha`, or None when that object is not a tree. Raises KeyError when it
        is absent (as dulwich does)."""
        found = self._kept.get(sha)
        if found is not None:
            self._kept.move_to_end(sha)
            return found
        type_num, raw = self.objects.get_raw(sha)
        if type_num != TREE:
            return None
        found = TreeData.parse(raw)
        self.keep(sha, found)
        return found

    def keep(self, sha: bytes, tree: TreeData) -> None:
        self._kept[sha] = tree
        if len(self._kept) > TREES_KEPT:
            self._kept.popitem(last=False)

    def forget(self, sha: bytes | None) -> None:
        """Drop a tree replaced by a newer version (it is rarely read again)."""
        if sha is not None:
            self._kept.pop(sha, None)


def write_loose(objects_dir: str, objects: Iterable[RawObject]) -> None:
    """Write each object as a loose file (`objects/xx/yyyy...`), as git does: into a
    temporary file in that directory, renamed into place, so a reader or a crash never sees
    half an object (a killed writer's `tmp_obj_*` is removed by `gc doctor`). A file once in
    place is never written again (git's rule). An object already there is only freshened
    (its mtime), as dulwich and git do."""
    for obj in objects:
        hexsha = obj.id.decode()
        folder = os.path.join(objects_dir, hexsha[:2])
        path = os.path.join(folder, hexsha[2:])
        try:
            os.utime(path)
            continue
        except (FileNotFoundError, PermissionError):
            pass  # absent; or another user's, in a shared repository: written again, fresh
        raw = obj.as_raw_string()
        data = zlib.compress(
            b"%s %d\0" % (obj.type_name, len(raw)) + raw,
            LOOSE_LEVEL.get(obj.type_num, LOOSE_LEVEL_DEFAULT),
        )
        temp = os.path.join(folder, f"tmp_obj_{os.getpid()}_{hexsha[2:10]}")
        fd = _create(temp, folder)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        os.close(fd)
        try:
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise


def read_loose(objects_dir: str, hexsha: bytes) -> tuple[int, bytes] | None:
    """The type and bytes of a loose object, or None when it cannot be read whole or does
    not hash to its name (cut short by a crash, say: left for `gc doctor` to report)."""
    name = hexsha.decode()
    try:
        with open(os.path.join(objects_dir, name[:2], name[2:]), "rb") as handle:
            data = zlib.decompress(handle.read())
        header, _, raw = data.partition(b"\0")
        kind, _, size = header.partition(b" ")
        type_num = TYPE_NUMBERS[kind]
        if int(size) != len(raw):
            return None
    except (OSError, zlib.error, KeyError, ValueError):
        return None
    if hashlib.sha1(data).hexdigest().encode() != hexsha:
        return None
    return type_num, raw


def _create(temp: str, folder: str) -> int:
    """Create `temp` exclusively for writing (its folder too); one left by a killed writer
    with this name is removed first."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for _attempt in range(3):
        try:
            return os.open(temp, flags, 0o444)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    return os.open(temp, flags, 0o444)
