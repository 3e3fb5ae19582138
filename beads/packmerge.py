"""Packs read and merged as streams: the mechanics under `beads/repack.py`'s policy.

`merge` writes the objects of some packs (and loose objects) as one new pack, copying each
entry as it is (deltas stay deltas: an offset delta whose base moved is re-pointed, one whose
base was dropped names it), so memory holds a few dozen bytes per object, never the objects.
The merged pack is written under a temporary name, flushed to disk as it grows, renamed, and
its `.idx` written last; only then are the packs it replaces removed (their `.idx` first, so
no new reader opens them) and their loose copies deleted. A crash leaves either the old packs
alone or both (duplicates are harmless; the next merge folds them).
"""

from __future__ import annotations

import binascii
import bisect
import contextlib
import hashlib
import heapq
import mmap
import os
import shutil
import struct
import sys
import zlib
from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

from beads.faults import fault
from beads.gitobjects import read_loose
from beads.treedelta import delta_bases, encode_delta

if TYPE_CHECKING:
    from typing import TypeAlias

    from dulwich.object_store import DiskObjectStore
    from dulwich.objects import ShaFile

    from beads.gitobjects import RawObject

    # What a merge reads and writes: dulwich's store, or the background repack's directory.
    Objects: TypeAlias = "DiskObjectStore | ObjectsDir"

# Files that travel with a pack (git writes some of them); removed with it.
PACK_SIDECARS = (".idx", ".rev", ".bitmap", ".mtimes", ".promisor", ".pack")
# A pack being written is flushed to disk every this many bytes (see `_flush_to_disk`).
FLUSH_EVERY = 8 << 20
# Past this many loose objects, they are packed whole, one at a time (bounded memory).
DELTA_LOOSE_AT_MOST = 20_000
PACK_MODE = 0o444  # as dulwich and git make packs
OFS_DELTA = 6
REF_DELTA = 7
_IDX_MAGIC = b"\xfftOc"
_IDX_HEADER = 8 + 256 * 4
_PACK_HEADER = 12


class PackFile:
    """One pack on disk: its index mapped, its data read (never through dulwich's cache)."""

    def __init__(self, base: str) -> None:
        self.base = base
        with open(base + ".idx", "rb") as handle:
            self.idx = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if self.idx[:8] != _IDX_MAGIC + b"\x00\x00\x00\x02":
            self.idx.close()
            raise ValueError(f"{base}.idx is not a version 2 pack index")
        self.count = struct.unpack_from(">I", self.idx, _IDX_HEADER - 4)[0]
        self._fd: int | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.base)

    def read(self, start: int, end: int) -> bytes:
        """Bytes `start..end` of the pack file (read, not mapped: a merge reads every byte of
        its packs once, and mapped pages would count in its memory)."""
        if self._fd is None:
            self._fd = os.open(self.base + ".pack", os.O_RDONLY)
        return os.pread(self._fd, end - start, start)

    def data_end(self) -> int:
        """Where the entries end (the pack's checksum follows)."""
        if self._fd is None:
            self._fd = os.open(self.base + ".pack", os.O_RDONLY)
        return os.fstat(self._fd).st_size - 20

    def close(self) -> None:
        self.idx.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def sha(self, i: int) -> bytes:
        start = _IDX_HEADER + 20 * i
        return self.idx[start : start + 20]

    def offset(self, i: int) -> int:
        value = struct.unpack_from(">I", self.idx, _IDX_HEADER + 24 * self.count + 4 * i)[0]
        if value & 0x80000000:
            large = _IDX_HEADER + 28 * self.count + 8 * (value & 0x7FFFFFFF)
            value = struct.unpack_from(">Q", self.idx, large)[0]
        return value

    def __contains__(self, sha: bytes) -> bool:
        first = sha[0]
        low = struct.unpack_from(">I", self.idx, 8 + 4 * (first - 1))[0] if first else 0
        high = struct.unpack_from(">I", self.idx, 8 + 4 * first)[0]
        while low < high:
            mid = (low + high) // 2
            found = self.sha(mid)
            if found == sha:
                return True
            if found < sha:
                low = mid + 1
            else:
                high = mid
        return False


class ObjectsDir:
    """An object directory as a merge uses it (dulwich's `DiskObjectStore` is one too):
    the background repack's, without dulwich, whose import would be most of a short run."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pack_dir = os.path.join(path, "pack")

    def _iter_loose_objects(self) -> Iterator[bytes]:
        for prefix in os.listdir(self.path):
            if len(prefix) == 2 and _is_hex(prefix):
                with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                    for rest in os.listdir(os.path.join(self.path, prefix)):
                        if len(rest) == 38 and _is_hex(rest):
                            yield (prefix + rest).encode()

    def _update_pack_cache(self) -> None:
        pass  # nothing cached


def _is_hex(name: str) -> bool:
    return all(c in "0123456789abcdef" for c in name)


def packs_of(objects: Objects) -> list[PackFile]:
    """The complete packs of the store (those with an `.idx`), but not those a `.keep` pins
    or whose index we cannot read (left for git), sorted by object count."""
    pack_dir = objects.pack_dir
    try:
        names = set(os.listdir(pack_dir))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        stem = name[: -len(".pack")]
        if name.endswith(".pack") and stem + ".idx" in names and stem + ".keep" not in names:
            try:
                found.append(PackFile(os.path.join(pack_dir, stem)))
            except (OSError, ValueError):
                continue
    found.sort(key=lambda pack: (pack.count, pack.name))
    return found


class Merged(NamedTuple):
    """A pack written by `merge`: its name, objects, size in bytes, and what it replaced."""

    name: str
    objects: int
    size: int
    packs: int
    loose: int


# A folder of recycled loose-object files that earlier builds kept beside `objects/`:
# nothing reads it, so a repack deletes it.
OLD_SPARE_DIR = "spare-objects"


def remove_loose(objects_dir: str, shas: Sequence[bytes]) -> None:
    """Delete the loose copies of `shas` (hex ids, now in a pack); one already gone is
    skipped. Also removes the folder of recycled object files an older version kept."""
    for sha in shas:
        name = sha.decode()
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(objects_dir, name[:2], name[2:]))
    old = os.path.join(os.path.dirname(objects_dir), OLD_SPARE_DIR)
    if os.path.isdir(old) and not os.path.islink(old):
        shutil.rmtree(old, ignore_errors=True)


def merge(objects: Objects, packs: Sequence[PackFile], loose: Sequence[bytes] = ()) -> Merged:
    """Write the objects of `packs` and the loose objects `loose` (hex ids) as one pack,
    then remove what it replaces. Entries of the packs are copied as they are (deltas
    stay deltas); memory holds a few dozen bytes per object, never the objects."""
    with _temp_pack(objects.pack_dir) as (out, temp):
        tables, loose_entries, packed_loose, written = _write_entries(objects, out, packs, loose)
        checksum = _finish_pack(out, written)
        os.fsync(out.fileno())
    shas, crcs, offsets = _sorted_entries(packs, tables, loose_entries)
    base = _install(temp, shas, crcs, offsets, checksum, before_idx="repack-before-idx")
    name = os.path.basename(base)
    fault("repack-written")
    if loose:
        fault("loose-packed")
    size = os.path.getsize(base + ".pack")
    for pack in packs:
        pack.close()
        if pack.base != base:
            remove_pack(pack.base)
            fault("repack-mid-remove")
    # Only those now in a pack (an unreadable one stays loose).
    remove_loose(objects.path, packed_loose)
    with contextlib.suppress(Exception):
        objects._update_pack_cache()
    return Merged(name, len(shas) // 20, size, len(packs), len(loose_entries))


def write_objects(objects: Objects, new: Sequence[RawObject | ShaFile]) -> None:
    """Write `new` (a large commit's objects) as one pack of whole entries, its `.idx`
    last: a crash leaves no half pack. Passes the fault points `mid-pack` and `before-idx`."""
    unique = list({obj.id: obj for obj in new}.values())
    found = []
    with _temp_pack(objects.pack_dir) as (out, temp):
        out.write(b"PACK" + struct.pack(">II", 2, 0))
        position = _PACK_HEADER
        for number, obj in enumerate(unique):
            if number == len(unique) // 2:
                fault("mid-pack")
            entry = _whole_entry(obj.type_num, obj.as_raw_string())
            out.write(entry)
            found.append((binascii.unhexlify(obj.id), position, binascii.crc32(entry)))
            position += len(entry)
        checksum = _finish_pack(out, len(unique))
    found.sort()
    shas = bytearray(b"".join(sha for sha, _, _ in found))
    offsets = array("Q", (offset for _, offset, _ in found))
    crcs = array("I", (crc for _, _, crc in found))
    _install(temp, shas, crcs, offsets, checksum, before_idx="before-idx")
    objects._update_pack_cache()


@contextlib.contextmanager
def _temp_pack(pack_dir: str) -> Iterator[tuple[BinaryIO, str]]:
    """A new pack file under a temporary name, removed if the block fails."""
    import tempfile

    fd, temp = tempfile.mkstemp(dir=pack_dir, prefix="tmp_pack_")
    try:
        with os.fdopen(fd, "w+b") as out:
            yield out, temp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _install(
    temp: str, shas: bytearray, crcs: array, offsets: array, checksum: bytes, *, before_idx: str
) -> str:
    """Rename the pack written at `temp` to git's name for it and write its `.idx` (last:
    a pack counts once its `.idx` exists); returns its path without the suffix."""
    pack_dir = os.path.dirname(temp)
    base = os.path.join(pack_dir, "pack-" + hashlib.sha1(shas).hexdigest())
    try:
        os.chmod(temp, PACK_MODE)  # as dulwich and git make packs
        os.replace(temp, base + ".pack")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    fault(before_idx)
    _write_idx(base + ".idx", shas, crcs, offsets, checksum)
    _fsync_dir(pack_dir)
    return base


def remove_pack(base: str) -> None:
    """Remove a pack: its `.idx` first (no new reader opens it), the data last."""
    for suffix in PACK_SIDECARS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base + suffix)


class _Table(NamedTuple):
    """Where each entry of one source pack went (by its index position): offset 0 = not
    copied (an earlier source holds the object)."""

    offsets: array
    crcs: array


def _write_entries(
    objects: Objects, out: object, packs: Sequence[PackFile], loose: Sequence[bytes]
) -> tuple[list[_Table], list[tuple[bytes, int, int]], list[bytes], int]:
    write = out.write  # type: ignore[attr-defined]
    write(b"PACK" + struct.pack(">II", 2, 0))  # the count is set once known
    position = _PACK_HEADER
    written = 0
    tables: list[_Table] = []
    total = sum(pack.count for pack in packs) + len(loose)
    for number, pack in enumerate(packs):
        earlier = packs[:number]
        n = pack.count
        if n >= 1 << 24 or pack.data_end() >= 1 << 40:
            raise ValueError(f"{pack.name} is too large to merge here; use git repack")
        # The entries in pack order, as offset << 24 | index position, sorted: one array of
        # 8 bytes an entry rather than lists of Python ints.
        keyed = array("Q", sorted((pack.offset(i) << 24) | i for i in range(n)))
        by_offset = array("Q", (key >> 24 for key in keyed))
        order = array("I", (key & 0xFFFFFF for key in keyed))
        del keyed
        new_offsets = array("Q", bytes(8 * n))
        new_crcs = array("I", bytes(4 * n))
        end_of_data = pack.data_end()
        for k, i in enumerate(order):
            if written == total // 2:
                fault("repack-mid")
            sha = pack.sha(i)
            if any(sha in other for other in earlier):
                continue
            start = by_offset[k]
            entry = pack.read(start, by_offset[k + 1] if k + 1 < n else end_of_data)
            type_num, size_end, header_end, base = _entry_header(entry)
            if type_num == OFS_DELTA:
                assert isinstance(base, int)
                base_i = order[bisect.bisect_left(by_offset, start - base)]
                base_at = new_offsets[base_i]
                if base_at and position - base_at != base:  # entries before it were dropped
                    entry = entry[:size_end] + _ofs(position - base_at) + entry[header_end:]
                elif not base_at:  # the base was dropped (an earlier pack holds it): name it
                    first = bytes([(entry[0] & 0x8F) | (REF_DELTA << 4)])
                    entry = first + entry[1:size_end] + pack.sha(base_i) + entry[header_end:]
            write(entry)
            if position // FLUSH_EVERY != (position + len(entry)) // FLUSH_EVERY:
                _flush_to_disk(out)
            new_offsets[i] = position
            new_crcs[i] = binascii.crc32(entry)
            position += len(entry)
            written += 1
        tables.append(_Table(new_offsets, new_crcs))
    loose_entries = []
    packed_loose = [sha_hex for sha_hex in loose if _in_any(sha_hex, packs)]
    for sha_hex, entry in _loose_entries(objects, sorted(set(loose) - set(packed_loose))):
        if written == total // 2:
            fault("repack-mid")
        write(entry)
        loose_entries.append((binascii.unhexlify(sha_hex), position, binascii.crc32(entry)))
        packed_loose.append(sha_hex)
        position += len(entry)
        written += 1
    return tables, loose_entries, packed_loose, written


def _in_any(sha_hex: bytes, packs: Sequence[PackFile]) -> bool:
    sha = binascii.unhexlify(sha_hex)
    return any(sha in pack for pack in packs)


def _loose_entries(objects: Objects, loose: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """The pack entries of these loose objects (hex ids, sorted): versions of a tree as
    deltas against their newer version (`beads/treedelta.py`) when the loose objects are
    few enough to hold, whole otherwise. An unreadable one (cut short by a crash) is left
    out: it stays loose for `gc doctor` to report."""
    if len(loose) > DELTA_LOOSE_AT_MOST:
        for sha_hex in loose:
            found = read_loose(objects.path, sha_hex)
            if found is not None:
                yield sha_hex, _whole_entry(*found)
        return
    read = {}
    for sha_hex in loose:
        found = read_loose(objects.path, sha_hex)
        if found is not None:
            read[sha_hex] = found
    bases = delta_bases(read)
    for sha_hex, (type_num, raw) in read.items():
        base = bases.get(sha_hex)
        if base is not None:
            delta = encode_delta(read[base][1], raw)
            if len(delta) < len(raw) // 2:
                header = _object_header(REF_DELTA, len(delta)) + binascii.unhexlify(base)
                yield sha_hex, header + zlib.compress(delta, 1)
                continue
        yield sha_hex, _whole_entry(type_num, raw)


def _whole_entry(type_num: int, raw: bytes) -> bytes:
    # Level 1, as git's loose objects: ids (most of a tree) do not compress, and a bead's
    # YAML compresses as well at 1 as at 6 (within 1%) for a third of the time on trees.
    return _object_header(type_num, len(raw)) + zlib.compress(raw, 1)


def _flush_to_disk(out: object) -> None:
    """Put what is written so far on disk: a writer's fsync (of the branch ref) waits for
    the file system's dirty data, so a big pack written without pause would stall it."""
    out.flush()  # type: ignore[attr-defined]
    os.fdatasync(out.fileno())  # type: ignore[attr-defined]


def _finish_pack(out: object, count: int) -> bytes:
    """Set the object count in the header and append the pack's checksum (read back: the
    count is known only at the end, and the checksum covers the header)."""
    out.seek(8)  # type: ignore[attr-defined]
    out.write(struct.pack(">I", count))  # type: ignore[attr-defined]
    out.flush()  # type: ignore[attr-defined]
    out.seek(0)  # type: ignore[attr-defined]
    digest = hashlib.sha1()
    while chunk := out.read(1 << 20):  # type: ignore[attr-defined]
        digest.update(chunk)
    checksum = digest.digest()
    out.write(checksum)  # type: ignore[attr-defined]
    out.flush()  # type: ignore[attr-defined]
    return checksum


def _sorted_entries(
    packs: Sequence[PackFile], tables: list[_Table], loose: list[tuple[bytes, int, int]]
) -> tuple[bytearray, array, array]:
    """The new pack's entries by object id, merged from the sources' indexes (each sorted)."""

    def copied(number: int) -> Iterator[tuple[bytes, int, int]]:
        pack, table = packs[number], tables[number]
        for i in range(pack.count):
            if table.offsets[i]:
                yield pack.sha(i), table.offsets[i], table.crcs[i]

    shas = bytearray()
    crcs = array("I")
    offsets = array("Q")
    for sha, offset, crc in heapq.merge(*(copied(n) for n in range(len(packs))), iter(loose)):
        shas += sha
        crcs.append(crc)
        offsets.append(offset)
    return shas, crcs, offsets


def _write_idx(path: str, shas: bytearray, crcs: array, offsets: array, checksum: bytes) -> None:
    """Write a version 2 pack index (git's format) through git's lock protocol."""
    from dulwich.file import FileLocked, GitFile

    count = len(offsets)
    fanout = [0] * 256
    for i in range(count):
        fanout[shas[20 * i]] += 1
    running = 0
    for first in range(256):
        running += fanout[first]
        fanout[first] = running
    small = array("I")
    large = array("Q")
    for offset in offsets:
        if offset < 0x80000000:
            small.append(offset)
        else:
            small.append(0x80000000 | len(large))
            large.append(offset)
    if sys.byteorder == "little":
        crcs = array("I", crcs)
        crcs.byteswap()
        small.byteswap()
        large.byteswap()
    try:
        handle = GitFile(path, "wb")
    except FileLocked as exc:  # the same pack, written by a repack killed before its `.idx`
        os.unlink(exc.lockfilename)
        handle = GitFile(path, "wb")
    digest = hashlib.sha1()
    with handle:
        for part in (
            _IDX_MAGIC + struct.pack(">I", 2) + struct.pack(">256I", *fanout),
            shas,
            crcs,
            small,
            large,
            checksum,
        ):
            digest.update(part)
            handle.write(part)
        handle.write(digest.digest())
        handle.flush()
        os.fsync(handle.fileno())


def _entry_header(entry: bytes) -> tuple[int, int, int, int | bytes | None]:
    """An entry's type, where its size ends, where its header ends, and its delta base
    (the distance back for an offset delta, the id for a reference delta)."""
    c = entry[0]
    type_num = (c >> 4) & 7
    i = 1
    while c & 0x80:
        c = entry[i]
        i += 1
    size_end = i
    if type_num == OFS_DELTA:
        c = entry[i]
        i += 1
        distance = c & 0x7F
        while c & 0x80:
            c = entry[i]
            i += 1
            distance = ((distance + 1) << 7) | (c & 0x7F)
        return type_num, size_end, i, distance
    if type_num == REF_DELTA:
        return type_num, size_end, i + 20, entry[i : i + 20]
    return type_num, size_end, i, None


def _ofs(distance: int) -> bytes:
    """The variable-length encoding of an offset delta's distance back to its base."""
    out = [distance & 0x7F]
    distance >>= 7
    while distance:
        distance -= 1
        out.insert(0, 0x80 | (distance & 0x7F))
        distance >>= 7
    return bytes(out)


def _object_header(type_num: int, size: int) -> bytes:
    out = []
    c = (type_num << 4) | (size & 15)
    size >>= 4
    while size:
        out.append(c | 0x80)
        c = size & 0x7F
        size >>= 7
    out.append(c)
    return bytes(out)


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
