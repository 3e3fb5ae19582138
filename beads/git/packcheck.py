"""Object sizes read from pack and loose-object headers, before anything is inflated.

A pack entry starts with its type and the size of its inflated data (git's pack format:
a varint of 4 bits then 7 bits a byte); a delta's data starts with the size of its base and
of the object it makes. A remote can send a blob of 100 MiB of zeros in a pack of a few
hundred bytes: whoever inflates it holds 100 MiB. These readers take the sizes from the
headers alone (a delta's first inflated bytes), so an object too large is refused before
its data is inflated; what is inflated to walk past an entry is read a chunk at a time and
dropped.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import BinaryIO

from beads.errors import InvalidInput, StorageError

CHUNK = 64 * 1024
OFS_DELTA, REF_DELTA = 6, 7
TYPE_NAMES = {1: "commit", 2: "tree", 3: "blob", 4: "tag", OFS_DELTA: "delta", REF_DELTA: "delta"}
# What `stored_size` reads at a time: an object's header and the deflated start of its
# data (a delta's two sizes, a loose object's header) are a few dozen bytes.
HEAD_CHUNK = 512
# The bytes of a delta's data that hold its two sizes (two varints of at most 10 bytes).
DELTA_HEADER = 20


class _Damaged(Exception):
    """The bytes do not follow the pack format."""


class _Stream:
    """Sequential reads over a file, with the bytes read ahead kept for the next entry."""

    def __init__(self, file: BinaryIO, chunk: int = CHUNK) -> None:
        self.file = file
        self.buffer = b""
        self.chunk = chunk  # bytes read at a time

    def take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            more = self.file.read(self.chunk)
            if not more:
                raise _Damaged("the pack ends early")
            self.buffer += more
        out, self.buffer = self.buffer[:count], self.buffer[count:]
        return out

    def inflate_head(self, wanted: int, *, step_over: bool = True) -> bytes:
        """The first `wanted` inflated bytes of the zlib stream that starts here (fewer when
        it holds fewer); with `step_over`, the rest of the stream is inflated a chunk at a
        time and dropped, leaving the stream after it, else nothing more is read."""
        inflater = zlib.decompressobj()
        head = b""
        data = self.buffer
        self.buffer = b""
        try:
            while not inflater.eof and (step_over or len(head) < wanted):
                if not data:
                    data = self.file.read(self.chunk)
                    if not data:
                        raise _Damaged("the pack ends inside an object")
                while data and not inflater.eof and (step_over or len(head) < wanted):
                    out = inflater.decompress(data, CHUNK if step_over else wanted - len(head))
                    if len(head) < wanted:
                        head += out[: wanted - len(head)]
                    data = inflater.unconsumed_tail
        except zlib.error as exc:
            raise _Damaged(f"an object does not inflate: {exc}") from None
        # At the stream's end every input byte past it is in `unused_data`; CPython may
        # leave the same bytes in `unconsumed_tail` too (when the end came inside a call
        # limited by `max_length`), so the tail is never added to it.
        self.buffer = inflater.unused_data
        return head


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, least significant first) and where it ends."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Damaged("a delta header is cut short")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if not byte & 0x80:
            return value, at


def _entry(
    stream: _Stream,
    id_length: int,
    limit: int | None = None,
    what: str = "",
    *,
    step_over: bool = True,
) -> tuple[int, int, int | None]:
    """Read one pack entry's header: its type, the size in it and, for a delta, the size of
    the object it makes (its data inflated for that, then, with `step_over`, stepped over:
    the stream is left at the next entry; a whole object's data is left unread). With
    `limit`, the size in the header is refused before any of the entry's data is
    inflated."""
    byte = stream.take(1)[0]
    kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
    while byte & 0x80:
        if shift > 63:
            raise _Damaged("an entry header never ends")
        byte = stream.take(1)[0]
        size |= (byte & 0x7F) << shift
        shift += 7
    if kind not in TYPE_NAMES:
        raise _Damaged(f"an entry of unknown type {kind}")
    if limit is not None and size > limit:
        raise too_large(what, size, limit)
    if kind == OFS_DELTA:
        while stream.take(1)[0] & 0x80:
            pass
    elif kind == REF_DELTA:
        stream.take(id_length)
    if kind not in (OFS_DELTA, REF_DELTA):
        return kind, size, None
    head = stream.inflate_head(DELTA_HEADER, step_over=step_over)
    _base, at = _varint(head, 0)
    target, _at = _varint(head, at)
    if limit is not None and target > limit:
        raise too_large(what, target, limit)
    return kind, size, target


def too_large(what: str, size: int, limit: int) -> InvalidInput:
    """The refusal of an object of `size` bytes, over `limit`, that `what` holds."""
    return InvalidInput(
        f"{what} holds an object of {size} bytes, over this store's limit of {limit} bytes "
        "(4 x store.max_body_bytes + 64 KiB); nothing was merged"
    )


def check_pack(
    file: BinaryIO,
    limit: int,
    what: str,
    *,
    id_length: int = 20,
    max_total: int | None = None,
    total_name: str = "",
) -> None:
    """Refuse (InvalidInput) a pack holding an object, or a delta making one, larger than
    `limit` bytes, or (with `max_total`) whose objects together inflate to more than
    `max_total` bytes (`total_name` names that limit); StorageError for bytes that are not
    a pack. Reads `file` from its start; an entry's data is only inflated once its header
    passed (a delta's, to read its sizes and to step over it)."""
    file.seek(0)
    stream = _Stream(file)
    total = 0
    try:
        header = stream.take(12)
        if header[:4] != b"PACK" or int.from_bytes(header[4:8], "big") not in (2, 3):
            raise _Damaged("no pack header")
        for _ in range(int.from_bytes(header[8:12], "big")):
            _kind, size, target = _entry(stream, id_length, limit, what)
            # Sizes from headers: dulwich checks each object inflates to its header's size.
            total += size if target is None else target
            if max_total is not None and total > max_total:
                raise InvalidInput(
                    f"{what} sent objects that inflate to more than {max_total} bytes in one "
                    f"fetch ({total_name}); nothing was merged"
                )
            if target is None:  # a whole object within the limit: step over its data
                stream.inflate_head(0)
    except _Damaged as exc:
        raise StorageError(f"{what} sent a pack that does not read: {exc}") from None
    finally:
        file.seek(0)


def stored_size(
    objects_dir: Path, hex_id: bytes, indexes: list, files: dict[Path, BinaryIO]
) -> int | None:
    """The size of object `hex_id` of the object store at `objects_dir` (loose, or in its
    packs, whose loaded `indexes` are (pack path, index) pairs), read from its header: for a
    packed delta, the size of the object it makes. An object held more than once (loose and
    packed, in two packs) has the largest of its copies' sizes: whichever copy a reader takes
    is read whole. None when it is in neither. `files` holds the pack files opened so far, by
    path, kept for the next call (the caller closes them)."""
    name = hex_id.decode("ascii")
    sizes = []
    try:
        with open(os.path.join(objects_dir, name[:2], name[2:]), "rb") as handle:
            head = _Stream(handle, HEAD_CHUNK).inflate_head(64, step_over=False)
    except FileNotFoundError:
        pass
    except _Damaged as exc:
        raise StorageError(f"the loose object {name} does not read: {exc}") from None
    else:
        header = head.split(b"\0", 1)[0].split(b" ")
        if len(header) != 2 or not header[1].isdigit():
            raise StorageError(f"the loose object {name} has no header")
        sizes.append(int(header[1]))
    for pack_path, index in indexes:
        try:
            offset = index.object_offset(hex_id)
        except KeyError:
            continue
        if offset is None:
            continue
        handle = files.get(pack_path)
        if handle is None:
            handle = files[pack_path] = open(pack_path, "rb")  # noqa: SIM115 - the caller closes
        handle.seek(offset)
        try:
            _kind, size, target = _entry(_Stream(handle, HEAD_CHUNK), 20, step_over=False)
        except _Damaged as exc:
            raise StorageError(f"{pack_path} does not read at object {name}: {exc}") from None
        sizes.append(target if target is not None else size)
    return max(sizes, default=None)
