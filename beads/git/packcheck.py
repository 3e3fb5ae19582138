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

import contextlib
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

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
                raise _Damaged(f"an object inflates to more than the {most} bytes its header gives")
        if step_over and most is not None and inflated != most:
            raise _Damaged(
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
            raise _Damaged(f"an object inflates to {words} {size} bytes its header gives")
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
                        raise _Damaged("the pack ends inside an object")
                while data and not inflater.eof and (until is None or done < until):
                    out = inflater.decompress(
                        data, step if until is None else min(step, until - done)
                    )
                    done += len(out)
                    data = inflater.unconsumed_tail
                    if out:
                        yield out
        except zlib.error as exc:
            raise _Damaged(f"an object does not inflate: {exc}") from None
        # At the stream's end every input byte past it is in `unused_data`; CPython may
        # leave the same bytes in `unconsumed_tail` too (when the end came inside a call
        # limited by `max_length`), so the tail is never added to it.
        self.buffer = inflater.unused_data if inflater.eof else data


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


def _header(stream: _Stream, id_length: int) -> tuple[int, int, int | bytes | None]:
    """Read one pack entry's header: its type, the size in it, and for a delta its base (how
    far back in the pack, for an OFS_DELTA; its id, for a REF_DELTA), else None. The stream
    is left at the entry's zlib data."""
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
    if kind == OFS_DELTA:  # git's offset encoding: each further byte adds one more
        byte = stream.take(1)[0]
        back = byte & 0x7F
        while byte & 0x80:
            if back >> 63:
                raise _Damaged("a delta's base offset never ends")
            byte = stream.take(1)[0]
            back = ((back + 1) << 7) | (byte & 0x7F)
        return kind, size, back
    if kind == REF_DELTA:
        return kind, size, stream.take(id_length)
    return kind, size, None


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
    the stream is left at the next entry, the data having inflated to the header's size; a
    whole object's data is left unread). With `limit`, the size in the header is refused
    before any of the entry's data is inflated."""
    kind, size, _base = _header(stream, id_length)
    if limit is not None and size > limit:
        raise too_large(what, size, limit)
    if kind not in (OFS_DELTA, REF_DELTA):
        return kind, size, None
    head = stream.inflate_head(DELTA_HEADER, step_over=step_over, most=size if step_over else None)
    return kind, size, _delta_target(head, limit, what)


def _delta_target(head: bytes, limit: int | None, what: str) -> int:
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
                stream.inflate_head(0, most=size)
    except _Damaged as exc:
        raise StorageError(f"{what} sent a pack that does not read: {exc}") from None
    finally:
        file.seek(0)


# How deep git follows alternates (an alternate's alternates...), as git's `link_alt_odb`.
MAX_ALTERNATE_DEPTH = 5
# The longest delta chain read: git's `pack.depth` is capped at 4095.
MAX_CHAIN = 4095
# The most of an alternates file read: a line a path.
MAX_ALTERNATES_BYTES = 64 * 1024
# A loose object's header ("blob 123\0"): the bytes inflated past its size at most.
LOOSE_HEADER = 32


class _Pack:
    """One pack of a `StrangerObjects`: its index (dulwich's reader) and, once read, its file."""

    def __init__(self, path: Path, index: Any) -> None:
        self.path = path
        self.index = index
        self.file: BinaryIO | None = None

    def offset(self, binary: bytes) -> int | None:
        try:
            return self.index.object_offset(binary)
        except KeyError:
            return None

    def stream(self, offset: int) -> _Stream:
        if self.file is None:
            self.file = open(self.path, "rb")  # noqa: SIM115 - closed with the reader
        self.file.seek(offset)
        return _Stream(self.file, HEAD_CHUNK)

    def close(self) -> None:
        self.index.close()
        if self.file is not None:
            self.file.close()


# Where an object is: a pack and the offset of its entry, or the path of its loose file.
_Place = tuple[_Pack, int] | str


class StrangerObjects:
    """The objects of a repository on this machine that is not ours (a local-path remote),
    read so that nothing is ever inflated past `limit` bytes at once, whatever its files
    say or become meanwhile.

    Objects are found where git and dulwich find them: in every pack (any `NAME.pack` beside
    a `NAME.idx`), then as loose files, in the objects directory and then in its alternates
    (`info/alternates`, followed `MAX_ALTERNATE_DEPTH` deep); the packs are listed again
    after a miss (a pack that appeared since). Each read takes an entry's size from its
    header and refuses it over `limit` before inflating it, then inflates exactly that much
    (more is damage, found as it comes); a delta's base is read the same way, and so is every
    object of its chain, one at a time, each result refused over `limit` before it is made.
    So a read holds at most a base, a delta and their result, each within `limit`.
    Sizing (`size`) reads headers only."""

    def __init__(self, objects_dir: Path, limit: int, what: str, object_format: Any) -> None:
        self.limit = limit
        self.what = what
        self.object_format = object_format
        self.dirs = _object_dirs(objects_dir)
        self.packs: dict[Path, _Pack] = {}
        self._list_packs()

    def close(self) -> None:
        """Close the packs' indexes and files."""
        for pack in self.packs.values():
            pack.close()
        self.packs = {}

    def _list_packs(self) -> None:
        """Open the packs not yet open; forget those gone."""
        from dulwich.pack import load_pack_index

        found = set()
        for objects in self.dirs:
            try:
                names = set(os.listdir(objects / "pack"))
            except OSError:  # no pack directory, or not one
                continue
            for name in sorted(names):
                if name.endswith(".pack") and f"{name[:-5]}.idx" in names:
                    path = objects / "pack" / name
                    found.add(path)
                    if path not in self.packs:
                        try:
                            index = load_pack_index(str(path)[:-5] + ".idx", self.object_format)
                        except FileNotFoundError:  # removed since the listing
                            continue
                        except Exception as exc:  # dulwich raises several kinds
                            why = f"the pack index of {path} does not read: {exc}"
                            raise self._damaged(why) from None
                        self.packs[path] = _Pack(path, index)
        for path in set(self.packs) - found:
            self.packs.pop(path).close()

    def _find(self, hex_id: bytes, *, again: bool = True) -> _Place | None:
        """Where object `hex_id` is (the packs first, as git and dulwich look), None when
        nowhere; `again`: after a miss, once more with the packs listed anew."""
        binary = bytes.fromhex(hex_id.decode("ascii"))
        for pack in self.packs.values():
            offset = pack.offset(binary)
            if offset is not None:
                return pack, offset
        name = hex_id.decode("ascii")
        for objects in self.dirs:
            loose = os.path.join(objects, name[:2], name[2:])
            if os.path.isfile(loose):
                return loose
        if not again:
            return None
        self._list_packs()
        return self._find(hex_id, again=False)

    def __contains__(self, hex_id: bytes) -> bool:
        return self._find(hex_id) is not None

    def located(self, hex_id: bytes) -> tuple[_Pack, int] | None:
        """The pack and offset of object `hex_id` when one of the packs listed holds it."""
        place = self._find(hex_id, again=False)
        return None if isinstance(place, str) or place is None else place

    def size(self, hex_id: bytes) -> int | None:
        """The most bytes a read of object `hex_id` inflates at once, from headers alone:
        the largest of its chain's entries (a delta's data, a base) and of the objects they
        make. None when it is nowhere."""
        return self._again(self._size, hex_id)

    def get_raw(self, hex_id: bytes) -> tuple[int, bytes]:
        """The type and data of object `hex_id`, each of its reads bounded (see the class);
        KeyError when it is nowhere, InvalidInput for an object over the limit, StorageError
        for one that does not read."""
        return self._again(self._get_raw, hex_id)

    def _again(self, read: Callable[[bytes], Any], hex_id: bytes) -> Any:
        """`read(hex_id)`, and once more with the packs listed anew when a file it was to
        read was gone (the remote's own repack moved the object meanwhile)."""
        try:
            return read(hex_id)
        except FileNotFoundError:
            self._list_packs()
        try:
            return read(hex_id)
        except FileNotFoundError as exc:
            raise self._damaged(f"{exc.filename} cannot be read: {exc.strerror}") from None

    def _size(self, hex_id: bytes) -> int | None:
        place = self._find(hex_id)
        if place is None:
            return None
        largest = 0
        for where, size, stream in self._chain(place):
            largest = max(largest, size)
            if stream is not None:  # a delta: the size of what it makes
                with self._reading(where):
                    head = stream.inflate_head(DELTA_HEADER, step_over=False)
                largest = max(largest, _delta_target(head, None, ""))
        return largest

    def _get_raw(self, hex_id: bytes) -> tuple[int, bytes]:
        from dulwich.pack import apply_delta

        place = self._find(hex_id)
        if place is None:
            raise KeyError(hex_id)
        deltas = []
        for where, size, stream in self._chain(place):
            if size > self.limit:
                raise too_large(self.what, size, self.limit)
            if stream is not None:
                deltas.append(where)
        kind, raw = self._whole(where, size)
        for pack, offset in reversed(deltas):
            data = self.delta_data(pack, offset)[1]
            target = _delta_target(data[:DELTA_HEADER], self.limit, self.what)
            try:
                made = b"".join(apply_delta(raw, data))
            except Exception as exc:  # dulwich raises several kinds for a delta that fails
                raise self._damaged(f"a delta in {pack.path} does not apply: {exc}") from None
            if len(made) != target:
                raise self._damaged(f"a delta in {pack.path} makes {len(made)}, not {target} bytes")
            raw = made
        return kind, raw

    def delta_data(self, pack: _Pack, offset: int) -> tuple[int | bytes | None, bytes]:
        """The base (how far back, or its id; None: not a delta) and the inflated data of the
        entry at `offset` of `pack`, refused over the limit before it is inflated."""
        with self._reading((pack, offset)):
            stream = pack.stream(offset)
            _kind, size, base = _header(stream, 20)
            if size > self.limit:
                raise too_large(self.what, size, self.limit)
            return base, stream.inflate(size)

    def entry(self, pack: _Pack, offset: int) -> tuple[int, int, int | bytes | None]:
        """The type, size and base (see `_header`) of the entry at `offset` of `pack`."""
        with self._reading((pack, offset)):
            return _header(pack.stream(offset), 20)

    def _whole(self, where: _Place, size: int) -> tuple[int, bytes]:
        """The type and data of the whole object (no delta) at `where`, of `size` bytes
        (its header's, within the limit) when packed."""
        if isinstance(where, str):
            return self._read_loose(where)
        pack, offset = where
        with self._reading(where):
            stream = pack.stream(offset)
            kind, _size, _base = _header(stream, 20)
            return kind, stream.inflate(size)

    def _chain(self, place: _Place) -> Iterator[tuple[_Place, int, _Stream | None]]:
        """`place`, then its base while it is a delta, down to a whole object (a loose one,
        or an entry that is no delta): each with the size its header gives and, for a delta,
        the stream at its data (to be read before the next is asked for)."""
        seen: set[tuple[Path, int]] = set()
        while True:
            if isinstance(place, str):
                yield place, self._loose_size(place), None
                return
            pack, offset = place
            with self._reading(place):
                stream = pack.stream(offset)
                _kind, size, base = _header(stream, 20)
            if base is None:
                yield place, size, None
                return
            yield place, size, stream
            if (pack.path, offset) in seen or len(seen) >= MAX_CHAIN:
                raise self._damaged(f"a delta chain in {pack.path} loops or passes {MAX_CHAIN}")
            seen.add((pack.path, offset))
            if isinstance(base, int):
                if not 0 < base <= offset:
                    raise self._damaged(f"a delta in {pack.path} names a base outside the pack")
                place = (pack, offset - base)
                continue
            found = self._find(base.hex().encode("ascii"))
            if found is None:
                raise self._damaged(f"a delta in {pack.path} names {base.hex()}, which is nowhere")
            place = found

    @contextlib.contextmanager
    def _reading(self, where: _Place) -> Iterator[None]:
        """A read at `where`, its damage said as such."""
        name = where if isinstance(where, str) else where[0].path
        try:
            yield
        except _Damaged as exc:
            raise self._damaged(f"{name} does not read: {exc}") from None
        except FileNotFoundError:  # moved meanwhile: looked for again (`_again`)
            raise
        except OSError as exc:
            raise self._damaged(f"{name} cannot be read: {exc.strerror or exc}") from None

    def _loose_size(self, path: str) -> int:
        """The size a loose object's header gives."""
        with self._reading(path), open(path, "rb") as handle:
            head = _Stream(handle, HEAD_CHUNK).inflate_head(LOOSE_HEADER, step_over=False)
            return _loose_header(head)[1]

    def _read_loose(self, path: str) -> tuple[int, bytes]:
        """A loose object's type and data, refused over the limit once its header is read,
        and inflated no further than the size its header gives."""
        with self._reading(path), open(path, "rb") as handle:
            pieces = _Stream(handle).pieces(CHUNK)
            head = b""
            for out in pieces:
                head += out
                if b"\0" in head or len(head) >= LOOSE_HEADER:
                    break
            kind, size, rest = _loose_header(head)
            if size > self.limit:
                raise too_large(self.what, size, self.limit)
            chunks, got = [rest], len(rest)
            for out in pieces:
                if got > size:
                    break
                chunks.append(out)
                got += len(out)
            if got != size:
                words = "more than the" if got > size else f"{got} bytes, not the"
                raise _Damaged(f"it inflates to {words} {size} bytes its header gives")
            return kind, b"".join(chunks)

    def _damaged(self, why: str) -> StorageError:
        return StorageError(f"{self.what} is damaged: {why} (git fsck there); nothing was merged")


_LOOSE_KINDS = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}


def _loose_header(head: bytes) -> tuple[int, int, bytes]:
    """The type and size a loose object's first inflated bytes give, and the data after."""
    header, nul, rest = head.partition(b"\0")
    kind_name, _space, digits = header.partition(b" ")
    kind = _LOOSE_KINDS.get(kind_name)
    if not nul or kind is None or not digits.isdigit():
        raise _Damaged("it has no header")
    return kind, int(digits), rest


def _object_dirs(objects_dir: Path) -> list[Path]:
    """`objects_dir`, then its alternates, breadth first, each once, `MAX_ALTERNATE_DEPTH`
    deep (git's `info/alternates`: a path a line, relative to the directory naming it)."""
    dirs = [objects_dir]
    seen = {os.path.realpath(objects_dir)}
    level = [objects_dir]
    for _depth in range(MAX_ALTERNATE_DEPTH):
        named = []
        for objects in level:
            try:
                with open(objects / "info" / "alternates", "rb") as handle:
                    text = handle.read(MAX_ALTERNATES_BYTES)
            except OSError:  # none, or unreadable: git goes on without it too
                continue
            for line in text.splitlines():
                if not line.strip() or line.startswith(b"#"):
                    continue
                other = objects / os.fsdecode(line.strip())
                real = os.path.realpath(other)
                if real not in seen and os.path.isdir(other):
                    seen.add(real)
                    named.append(other)
        dirs += named
        level = named
    return dirs


def stored_size(objects: StrangerObjects, hex_id: bytes) -> int | None:
    """The most bytes a read of object `hex_id` of `objects` inflates at once, from headers
    alone (`StrangerObjects.size`); None when it is nowhere."""
    return objects.size(hex_id)
