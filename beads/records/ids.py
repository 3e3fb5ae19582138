"""Bead ids: `<prefix>-<random>`, 40 random bits in lowercase base32, and where a bead lives.

Ids are never counters (writers on several machines could not agree on one); collisions are
checked by the store under its write lock.
"""

from __future__ import annotations

import os
import re

from beads.errors import InvalidInput

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,15}")
PREFIX_RULE = "a lowercase letter then up to 15 letters or digits"  # what PREFIX_RE accepts
ID_RE = re.compile(r"[a-z][a-z0-9]{0,15}-[a-z2-7]{8,26}")
# What a user may type for an id: a whole id or a prefix of one. Anything else (a path,
# `../`, spaces) is rejected before it reaches a file name or a query. A pattern's text
# rather than a compiled pattern: compiled by `re` (and kept in its cache) on first use, as
# a command that writes beads never reads an id a user typed.
ID_PREFIX = r"[a-z0-9][a-z0-9-]{0,63}"
RANDOM_CHARS = 8  # 8 base32 characters = 40 bits
BASE32 = "abcdefghijklmnopqrstuvwxyz234567"  # RFC 4648's alphabet, lowercase


def new_id(prefix: str) -> str:
    """A fresh random id with the store's prefix: 40 random bits in base32 (what
    `base64.b32encode` makes of the 5 bytes, lowercase; written out here, as `base64` and
    the `struct` it imports would be paid at every send's start-up)."""
    bits = int.from_bytes(os.urandom(5), "big")
    random = "".join(BASE32[(bits >> shift) & 31] for shift in range(35, -1, -5))
    return f"{prefix}-{random[:RANDOM_CHARS]}"


def check_prefix(prefix: Any) -> str:
    """Return `prefix` if it is a valid id prefix (`[a-z][a-z0-9]{0,15}`), else raise."""
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix):
        raise InvalidInput(f"invalid id prefix {prefix!r}: {PREFIX_RULE}")
    return prefix


def check_id(value: Any, *, what: str = "id") -> str:
    """Return `value` if it is a well-formed full bead id, else raise InvalidInput."""
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise InvalidInput(f"invalid {what} {value!r}: expected an id like gc-7k2qabcd")
    return value


def check_id_prefix(value: str) -> str:
    """Normalise what a user typed for an id (a whole id or a prefix, in either case); raise if
    it cannot be one. Nothing is stripped: a space, a newline or a control character anywhere
    makes it no id (a line read from a file or pasted keeps its newline)."""
    # Only ASCII is folded: `str.lower` makes the Kelvin sign 'K' an ASCII 'k'.
    text = value.lower() if value.isascii() else value
    if not re.fullmatch(ID_PREFIX, text):
        raise InvalidInput(f"invalid id {value!r}: ids are letters, digits and '-'")
    return text


def bead_path(bead_type: str, bead_id: str) -> str:
    """The bead's file inside the store: `<type>s/<aa>/<bb>/<id>.yaml`.

    The two shard levels come from a hash of the id, so a commit rewrites only small trees
    (the type's 256-entry tree, one 256-entry shard tree and one small leaf) at any size.
    """
    import hashlib

    digest = hashlib.sha1(bead_id.encode("ascii")).hexdigest()
    return f"{bead_type}s/{digest[:2]}/{digest[2:4]}/{bead_id}.yaml"


BEAD_PATH_RE = re.compile(r"([a-z][a-z0-9_-]{0,31})s/[0-9a-f]{2}/[0-9a-f]{2}/([a-z0-9-]+)\.yaml")


def parse_bead_path(path: str) -> tuple[str, str] | None:
    """`(type, id)` for a path laid out by `bead_path`, else None (config and other files)."""
    match = BEAD_PATH_RE.fullmatch(path)
    if not match:
        return None
    return match.group(1), match.group(2)
