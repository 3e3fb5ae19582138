"""Trees kept as bytes for the write path, and loose objects listed and checked.

A write rewrites the trees on its path (root, type, two shard levels). Editing dulwich's
`Tree` entry by entry and serializing it again costs time that grows with the store (a
shard tree holds up to 256 entries at 65k+ beads). Here a tree is kept as its bytes, its
entries and where each entry's id sits in the bytes: changing the id of an existing entry
(the common case: a subtree or a bead file rewritten) patches 20 bytes of a copy. The bytes
then become a dulwich object (`ShaFile.from_raw_string`) that dulwich stores.

Loose objects are listed and read here, with their hash checked against their name, for
`gc doctor` and for packing: a file cut short by a power cut, or holding another object's
bytes, is never packed under a name that is not its own.
"""

from __future__ import annotations

import binascii
import bisect
import contextlib
import hashlib
import os
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, NamedTuple

from beads.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

COMMIT, TREE, BLOB = 1, 2, 3
TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
TYPE_NUMBERS = {name: number for number, name in TYPE_NAMES.items()}
DIR_TYPE = 0o040000
_HEX = frozenset("0123456789abcdef")
# Trees kept per repository: the upper levels of a store of any size (1 + types x 257) fit,
# with room for the leaves read recently.
TREES_KEPT = 4096


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

    def neighbour(self, raw: bytes) -> TreeData | None:
        """The tree whose bytes are `raw`, read from this one when the two differ only in
        one entry's id (a commit's tree beside its parent's: one subtree or file rewritten),
        without parsing `raw`; None otherwise. Equal bytes up to an entry's id and after it
        parse to the same entries, so only that id is read."""
        mine = self.raw
        if len(raw) != len(mine) or raw == mine:
            return None
        first, last = (
            _first_difference(mine, raw),
            len(raw) - _first_difference(mine[::-1], raw[::-1]),
        )
        offsets = self._entry_offsets()
        starts = self._starts()
        at = starts[bisect.bisect_right(starts, first) - 1] if starts and first >= starts[0] else -1
        if at < 0 or last > at + 20:
            return None
        name = self._names()[at]
        entries = dict(self.entries)
        entries[name] = (entries[name][0], binascii.hexlify(raw[at : at + 20]))
        return TreeData(entries, raw, offsets)

    def _starts(self) -> list[int]:
        """Where each entry's id starts in the bytes, in order."""
        return sorted(self._entry_offsets().values())

    def _names(self) -> dict[int, bytes]:
        return {at: name for name, at in self._entry_offsets().items()}

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


def _first_difference(one: bytes, other: bytes) -> int:
    """The first index at which two byte strings of the same length differ (their length
    for none), found by halving with whole-slice comparisons rather than byte by byte."""
    low, high = 0, len(one)  # equal before `low`; a difference before `high`
    if one == other:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if one[low:middle] == other[low:middle]:
            low = middle
        else:
            high = middle
    return low


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

    def __init__(self, get_raw: Callable[[bytes], tuple[int, bytes]]) -> None:
        self.get_raw = get_raw
        self._kept: OrderedDict[bytes, TreeData] = OrderedDict()

    def get(self, sha: bytes, near: TreeData | None = None) -> TreeData | None:
        """The tree `sha`, or None when that object is not a tree. Raises KeyError when it
        is absent (as dulwich does). `near`: a tree it likely differs from in one entry's
        id (`TreeData.neighbour`: read without parsing it whole)."""
        found = self._kept.get(sha)
        if found is not None:
            self._kept.move_to_end(sha)
            return found
        type_num, raw = self.get_raw(sha)
        if type_num != TREE:
            return None
        found = near.neighbour(raw) if near is not None else None
        if found is None:
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


DOCTOR_RESTORES = "; run 'gc doctor' to restore it"


class DamagedObject(StorageError):
    """An object whose bytes cannot be read or do not hash to its name (`gc doctor`
    restores it): the store still opens, for doctor to run. `what` says what is damaged,
    without the advice to run doctor (for doctor's own report)."""

    def __init__(self, what: str) -> None:
        super().__init__(what + DOCTOR_RESTORES)
        self.what = what


class MissingCommit(StorageError):
    """A commit the branch's history names whose object is not in the store (its loose file
    deleted, a disk fault): `gc doctor` fetches it again from a remote, or says the history
    is cut there. `sha` names it; `what` says what is wrong without the advice to run
    doctor (for doctor's own report)."""

    def __init__(self, sha: bytes, what: str | None = None) -> None:
        named = sha.decode(errors="replace")
        self.sha = sha
        self.what = what or f"the history names {named} as a commit, which is missing"
        super().__init__(self.what + DOCTOR_RESTORES)


class HistoryCut(StorageError):
    """A walk of the history (`gc log`) that read every commit it could and met commits
    whose objects are missing (`cut`, in the order met): what lies past them is unknown.
    `entries` holds what it read, newest first, for the caller to show before the error."""

    def __init__(self, cut: list[bytes], entries: list[Any]) -> None:
        named = cut[0].decode(errors="replace")
        more = f" (and {len(cut) - 1} more)" if len(cut) > 1 else ""
        super().__init__(
            f"the history is cut at commit {named}{more}: its object is missing, so older "
            "commits cannot be read (gc doctor fetches it again from a remote that has it)",
            cut=[sha.decode(errors="replace") for sha in cut],
        )
        self.cut = cut
        self.entries = entries


def damaged(sha: bytes, path: str | None = None) -> DamagedObject:
    """The error for an object whose bytes cannot be read or do not hash to its name."""
    where = f" ({path})" if path else ""
    return DamagedObject(
        f"git object {sha.decode(errors='replace')}{where} is damaged: its bytes cannot be "
        "read or do not hash to its name"
    )


def hashes_to(sha: bytes, type_num: int, raw: bytes) -> bool:
    """Whether an object of this type and these bytes is named `sha` (hex)."""
    header = TYPE_NAMES.get(type_num, b"?") + b" %d\0" % len(raw)
    return hashlib.sha1(header + raw).hexdigest().encode() == sha


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


def loose_path(objects_dir: str, hexsha: bytes) -> str:
    """Where git keeps the loose object `hexsha` (`objects/xx/yyyy...`)."""
    name = hexsha.decode()
    return os.path.join(objects_dir, name[:2], name[2:])


def loose_ids(objects_dir: str) -> Iterator[bytes]:
    """The ids (hex) of the loose objects under `objects_dir`, by their file names."""
    try:
        prefixes = os.listdir(objects_dir)
    except FileNotFoundError:
        return
    for prefix in prefixes:
        if len(prefix) != 2 or not _HEX.issuperset(prefix):
            continue
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for rest in os.listdir(os.path.join(objects_dir, prefix)):
                if len(rest) == 38 and _HEX.issuperset(rest):
                    yield (prefix + rest).encode()


class ObjectFiles(NamedTuple):
    """Where the store's objects are: the names of its complete packs (with their `.idx`)
    and the ids of its loose objects (hex)."""

    packs: frozenset[str]
    loose: frozenset[bytes]


def object_files(git_dir: Path) -> ObjectFiles:
    """The packs and loose objects of the repository at `git_dir`, by their file names."""
    try:
        names = set(os.listdir(git_dir / "objects" / "pack"))
    except (FileNotFoundError, NotADirectoryError):
        names = set()
    packs = frozenset(
        name for name in names if name.endswith(".pack") and name[:-5] + ".idx" in names
    )
    return ObjectFiles(packs, frozenset(loose_ids(str(git_dir / "objects"))))


def is_group_store(git_dir: Path) -> bool:
    """Whether the store is shared with its group (`store.shared: group`): its directory,
    the repository's parent, then has the group's rights."""
    try:
        return os.stat(git_dir.parent).st_mode & 0o070 == 0o070
    except OSError:
        return False


def umask_for(git_dir: Path) -> int:
    """The umask a program writing into the repository runs with (`git repack`, the
    background repack): nothing for others, and for the group only in a group store (whose
    members write new objects into the same directories)."""
    return 0o007 if is_group_store(git_dir) else 0o077
