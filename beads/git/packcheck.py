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

import zlib
from collections.abc import Iterator
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


class Malformed(Exception):
    """The bytes do not follow the pack format."""


class Stream:
    """Sequential reads over a file, with the bytes read ahead kept for the next entry."""

    def __init__(self, file: BinaryIO, chunk: int = CHUNK) -> None:
        self.file = file
        self.buffer = b""
        self.chunk = chunk  # bytes read at a time

    def take(self, count: int) -> bytes:
        while len(self.buffer) < count:
            more = self.file.read(self.chunk)
            if not more:
                raise Malformed("the pack ends early")
            self.buffer += more
        out, self.buffer = self.buffer[:count], self.buffer[count:]
        return out

    def inflate_head(
        self, wanted: int, *, step_over: bool = True, most: int | None = None
    ) -> bytes:
        """The first `wanted` inflated bytes of the zlib stream that starts here (fewer when
        it holds fewer); with `step_over`, the rest of the stream is inflated a chunk at a
        time and dropped, leaving the stream after it, else nothing more is read. With
        `most` (the size the entry's header gives), a stream inflating to more, or to fewer
        once stepped over, is damage: found once `most` + 1 bytes came out."""
        head = b""
        inflated = 0
        for out in self.pieces(CHUNK if step_over else wanted, until=None if step_over else wanted):
            inflated += len(out)
            if len(head) < wanted:
                head += out[: wanted - len(head)]
            if most is not None and inflated > most:
                raise Malformed(
                    f"an object inflates to more than the {most} bytes its header gives"
                )
        if step_over and most is not None and inflated != most:
            raise Malformed(
                f"an object inflates to {inflated} bytes, not the {most} its header gives"
            )
        return head

    def inflate(self, size: int) -> bytes:
        """The data of the zlib stream that starts here, which must inflate to exactly `size`
        bytes: one that would inflate to more is damage once `size` + 1 bytes came out."""
        chunks = []
        inflated = 0
        for out in self.pieces(min(CHUNK, size + 1), until=size + 1):
            chunks.append(out)
            inflated += len(out)
        if inflated != size:
            words = "more than the" if inflated > size else f"{inflated} bytes, not the"
            raise Malformed(f"an object inflates to {words} {size} bytes its header gives")
        return b"".join(chunks)

    def pieces(self, step: int, *, until: int | None = None) -> Iterator[bytes]:
        """The inflated data of the zlib stream that starts here, at most `step` bytes a
        piece; with `until`, no more once that many came out (the stream is left there),
        else up to its end, leaving the stream after it."""
        inflater = zlib.decompressobj()
        data = self.buffer
        self.buffer = b""
        done = 0
        try:
            while not inflater.eof and (until is None or done < until):
                if not data:
                    data = self.file.read(self.chunk)
                    if not data:
                        raise Malformed("the pack ends inside an object")
                while data and not inflater.eof and (until is None or done < until):
                    out = inflater.decompress(
                        data, step if until is None else min(step, until - done)
                    )
                    done += len(out)
                    data = inflater.unconsumed_tail
                    if out:
                        yield out
        except zlib.error as exc:
            raise Malformed(f"an object does not inflate: {exc}") from None
        # At the stream's end every input byte past it is in `unused_data`; CPython may
        # leave the same bytes in `unconsumed_tail` too (when the end came inside a call
        # limited by `max_length`), so the tail is never added to it.
        self.buffer = inflater.unused_data if inflater.eof else data


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, least significant first) and where it ends."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise Malformed("a delta header is cut short")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if not byte & 0x80:
            return value, at


def entry_header(stream: Stream, id_length: int) -> tuple[int, int, int | bytes | None]:
    """Read one pack entry's header: its type, the size in it, and for a delta its base (how
    far back in the pack, for an OFS_DELTA; its id, for a REF_DELTA), else None. The stream
    is left at the entry's zlib data."""
    byte = stream.take(1)[0]
    kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
    while byte & 0x80:
        if shift > 63:
            raise Malformed("an entry header never ends")
        byte = stream.take(1)[0]
        size |= (byte & 0x7F) << shift
        shift += 7
    if kind not in TYPE_NAMES:
        raise Malformed(f"an entry of unknown type {kind}")
    if kind == OFS_DELTA:  # git's offset encoding: each further byte adds one more
        byte = stream.take(1)[0]
        back = byte & 0x7F
        while byte & 0x80:
            if back >> 63:
                raise Malformed("a delta's base offset never ends")
            byte = stream.take(1)[0]
            back = ((back + 1) << 7) | (byte & 0x7F)
        return kind, size, back
    if kind == REF_DELTA:
        return kind, size, stream.take(id_length)
    return kind, size, None


def _entry(
    stream: Stream,
    id_length: int,
    limit: int | None = None,
    what: str = "",
    *,
    step_over: bool = True,
) -> tuple[int, int, int | None]:
    """Read one pack entry's header: its type, the size in it and, for a delta, the size of
    the object it makes (its data inflated for that, then, with `step_over`, stepped over:
    the stream is left at the next entry, the data having inflated to the header's size; a
    whole object's data is left unread). With `limit`, the size in the header is refused
    before any of the entry's data is inflated."""
    kind, size, _base = entry_header(stream, id_length)
    if limit is not None and size > limit:
        raise too_large(what, size, limit)
    if kind not in (OFS_DELTA, REF_DELTA):
        return kind, size, None
    head = stream.inflate_head(DELTA_HEADER, step_over=step_over, most=size if step_over else None)
    return kind, size, delta_target(head, limit, what)


def delta_target(head: bytes, limit: int | None, what: str) -> int:
    """The size of the object a delta makes, from the first bytes of its data (refused over
    `limit`)."""
    _base, at = _varint(head, 0)
    target, _at = _varint(head, at)
    if limit is not None and target > limit:
        raise too_large(what, target, limit)
    return target


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
    stream = Stream(file)
    total = 0
    try:
        header = stream.take(12)
        if header[:4] != b"PACK" or int.from_bytes(header[4:8], "big") not in (2, 3):
            raise Malformed("no pack header")
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
                stream.inflate_head(0, most=size)
    except Malformed as exc:
        raise StorageError(f"{what} sent a pack that does not read: {exc}") from None
    finally:
        file.seek(0)
