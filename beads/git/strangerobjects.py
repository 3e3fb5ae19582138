"""The objects of another repository on this machine (a local-path remote), read so that
nothing is ever inflated past a limit, whatever its files say or become meanwhile.

Sizes come from the headers `beads.git.packcheck` reads; a fetch from a local path reads
every object of the other repository through `StrangerObjects` (`beads.git.localfetch`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from beads.errors import StorageError
from beads.git.packcheck import (
    CHUNK,
    DELTA_HEADER,
    HEAD_CHUNK,
    Malformed,
    Stream,
    delta_target,
    entry_header,
    too_large,
)

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

    def stream(self, offset: int) -> Stream:
        if self.file is None:
            self.file = open(self.path, "rb")  # noqa: SIM115 - closed with the reader
        self.file.seek(offset)
        return Stream(self.file, HEAD_CHUNK)

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
                largest = max(largest, delta_target(head, None, ""))
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
            target = delta_target(data[:DELTA_HEADER], self.limit, self.what)
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
            _kind, size, base = entry_header(stream, 20)
            if size > self.limit:
                raise too_large(self.what, size, self.limit)
            return base, stream.inflate(size)

    def entry(self, pack: _Pack, offset: int) -> tuple[int, int, int | bytes | None]:
        """The type, size and base (see `_header`) of the entry at `offset` of `pack`."""
        with self._reading((pack, offset)):
            return entry_header(pack.stream(offset), 20)

    def _whole(self, where: _Place, size: int) -> tuple[int, bytes]:
        """The type and data of the whole object (no delta) at `where`, of `size` bytes
        (its header's, within the limit) when packed."""
        if isinstance(where, str):
            return self._read_loose(where)
        pack, offset = where
        with self._reading(where):
            stream = pack.stream(offset)
            kind, _size, _base = entry_header(stream, 20)
            return kind, stream.inflate(size)

    def _chain(self, place: _Place) -> Iterator[tuple[_Place, int, Stream | None]]:
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
                _kind, size, base = entry_header(stream, 20)
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
        except Malformed as exc:
            raise self._damaged(f"{name} does not read: {exc}") from None
        except FileNotFoundError:  # moved meanwhile: looked for again (`_again`)
            raise
        except OSError as exc:
            raise self._damaged(f"{name} cannot be read: {exc.strerror or exc}") from None

    def _loose_size(self, path: str) -> int:
        """The size a loose object's header gives."""
        with self._reading(path), open(path, "rb") as handle:
            head = Stream(handle, HEAD_CHUNK).inflate_head(LOOSE_HEADER, step_over=False)
            return _loose_header(head)[1]

    def _read_loose(self, path: str) -> tuple[int, bytes]:
        """A loose object's type and data, refused over the limit once its header is read,
        and inflated no further than the size its header gives."""
        with self._reading(path), open(path, "rb") as handle:
            pieces = Stream(handle).pieces(CHUNK)
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
                raise Malformed(f"it inflates to {words} {size} bytes its header gives")
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
        raise Malformed("it has no header")
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
