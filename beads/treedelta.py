"""Deltas between versions of a tree, for packing loose objects.

Every write rewrites the trees on its path: the root, its type's tree (256 entries once a
store has a few hundred beads) and a shard tree, each differing from its previous version
by one 20-byte id. Packed whole, those versions are nearly all of a pack's bytes, and every
geometric merge copies them again. Packed as git deltas (a copy of the bytes before the
change, the new bytes, a copy of the bytes after), a version costs a few dozen bytes.

The newest version of a path is kept whole and older ones are deltas against the next newer
one (git's choice: the newest is read most), and a chain is cut every `MAX_DEPTH` versions
so reading an old version applies a few deltas at most.
"""

from __future__ import annotations

from collections.abc import Mapping

COMMIT, TREE = 1, 2
# A version this many deltas away from a whole one is kept whole (git's default is 50).
MAX_DEPTH = 16
_DIR_MODE = b"40000"


def delta_bases(objects: Mapping[bytes, tuple[int, bytes]]) -> dict[bytes, bytes]:
    """For trees among `objects` (hex id -> (type, bytes)), the newer version of the same
    path each is best stored as a delta against, found through the commits among them
    (each commit's tree against its first parent's, path by path)."""
    newer: dict[bytes, bytes] = {}
    for _sha, (type_num, raw) in objects.items():
        if type_num != COMMIT:
            continue
        tree, parent = _tree_and_parent(raw)
        parent_object = objects.get(parent) if parent is not None else None
        if tree is None or parent_object is None or parent_object[0] != COMMIT:
            continue
        old_tree, _ = _tree_and_parent(parent_object[1])
        if old_tree is not None:
            _pair(objects, old_tree, tree, newer)
    bases: dict[bytes, bytes] = {}
    depth: dict[bytes, int] = {}
    for sha in newer:
        _place(sha, newer, bases, depth)
    return bases


def _pair(
    objects: Mapping[bytes, tuple[int, bytes]], old: bytes, new: bytes, newer: dict[bytes, bytes]
) -> None:
    """Record `new` as the newer version of `old`, and so on down the paths they share."""
    while True:
        if old == new or old in newer:
            return
        old_object, new_object = objects.get(old), objects.get(new)
        if old_object is None or new_object is None:
            return  # not both loose: the older one is already packed
        if old_object[0] != TREE or new_object[0] != TREE:
            return
        newer[old] = new
        old_dirs, new_dirs = _subtrees(old_object[1]), _subtrees(new_object[1])
        changed = [(o, new_dirs[n]) for n, o in old_dirs.items() if new_dirs.get(n, o) != o]
        if not changed:
            return
        for old_child, new_child in changed[1:]:
            _pair(objects, old_child, new_child, newer)
        old, new = changed[0]  # a write changes one path: iterate rather than recurse


def _place(
    sha: bytes, newer: dict[bytes, bytes], bases: dict[bytes, bytes], depth: dict[bytes, int]
) -> None:
    """Give `sha` and the newer versions after it a delta depth (0: whole), recording the
    base of each delta in `bases`. A version found again (a tree whose content came back)
    is kept whole: deltas never form a loop."""
    chain: list[bytes] = []
    seen: set[bytes] = set()
    while sha in newer and sha not in depth and sha not in seen:
        seen.add(sha)
        chain.append(sha)
        sha = newer[sha]
    depth.setdefault(sha, 0)
    for older in reversed(chain):
        if older in depth:
            continue
        level = depth[newer[older]] + 1
        depth[older] = 0 if level >= MAX_DEPTH else level
        if depth[older]:
            bases[older] = newer[older]


def _tree_and_parent(commit: bytes) -> tuple[bytes | None, bytes | None]:
    """A commit's tree id and first parent id (hex), from its header lines."""
    tree = parent = None
    for line in commit.split(b"\n", 3)[:3]:
        if line.startswith(b"tree ") and tree is None:
            tree = line[5:]
        elif line.startswith(b"parent ") and parent is None:
            parent = line[7:]
    return tree, parent


def _subtrees(raw: bytes) -> dict[bytes, bytes]:
    """A tree's subdirectories: name -> hex id."""
    found: dict[bytes, bytes] = {}
    pos, end = 0, len(raw)
    while pos < end:
        space, nul = raw.find(b" ", pos), raw.find(b"\0", pos)
        if space < 0 or nul < space or nul + 21 > end:
            return found  # malformed: no deltas below it
        if raw[pos:space] == _DIR_MODE:
            found[raw[space + 1 : nul]] = raw[nul + 1 : nul + 21].hex().encode()
        pos = nul + 21
    return found


def encode_delta(base: bytes, target: bytes) -> bytes:
    """A git delta turning `base` into `target`: the bytes both start with and end with
    copied from `base`, those between inserted."""
    limit = min(len(base), len(target))
    prefix = _common_prefix(base, target, limit)
    suffix = _common_prefix(base[::-1], target[::-1], limit - prefix)
    out = bytearray(_varint(len(base)) + _varint(len(target)))
    _copy(out, 0, prefix)
    middle = target[prefix : len(target) - suffix]
    for start in range(0, len(middle), 127):
        chunk = middle[start : start + 127]
        out.append(len(chunk))
        out += chunk
    _copy(out, len(base) - suffix, suffix)
    return bytes(out)


def _common_prefix(a: bytes, b: bytes, limit: int) -> int:
    """How many leading bytes `a` and `b` share (at most `limit`), by halving: each compare
    runs in C."""
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _copy(out: bytearray, offset: int, size: int) -> None:
    while size > 0:
        step = min(size, 0xFFFF)
        op, args = 0x80, bytearray()
        for i in range(4):
            byte = (offset >> (8 * i)) & 0xFF
            if byte:
                op |= 1 << i
                args.append(byte)
        for i in range(2):
            byte = (step >> (8 * i)) & 0xFF
            if byte:
                op |= 0x10 << i
                args.append(byte)
        out.append(op)
        out += args
        offset += step
        size -= step


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
