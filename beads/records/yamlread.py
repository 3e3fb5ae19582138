"""The canonical YAML reader: reads back what `beads.records.yamlwrite` writes, without ruamel.

`load` parses the writer's layout (block mappings and sequences, `{}` and `[]`, plain,
single- and double-quoted scalars, folded long lines, `|` blocks, `? key` entries) and
accepts the text only when the writer writes the result back as exactly that text: then
the text is canonical, and the writer's round trip (checked with ruamel in
tests/test_store_codec.py) says every YAML reader reads it as this value. Anything else (a file
edited by hand, anchors, flow collections, comments, nesting past MAX_DEPTH) returns None
and goes to ruamel and its checks in `beads.records.codec`. It exists for speed: ruamel's loader is
an order of magnitude slower a bead, and most of an index rebuild (bench/bench_rebuild.py).

Canonical text holding U+2028 or U+2029 (line breaks to YAML, which the writer prints as
they are) is left to ruamel too: the reader splits lines on line feeds only.
"""

from __future__ import annotations

import re

from beads.records.yamlwrite import dump_text, scalar, simple_key

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64  # nested collections; a bead needs 10 (meta nests at most 8 deep)

_INT = re.compile(r"-?[0-9]{1,4000}")  # as str(int) writes them: int() takes 4,300 digits
_FLOAT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+][0-9]+)?|-?\.inf|\.nan")
_UNESCAPE = re.compile(r"\\(x[0-9A-F]{2}|u[0-9A-F]{4}|U[0-9A-F]{8}|.)", re.DOTALL)
_UNESCAPED = {
    "0": "\x00", "a": "\x07", "b": "\x08", "t": "\t", "n": "\n", "v": "\x0b", "f": "\x0c",
    "r": "\r", "e": "\x1b", '"': '"', "\\": "\\", "N": "\x85", "L": "\u2028", "P": "\u2029",
    " ": " ",
}  # fmt: skip
# A top-level entry's text, checked -> (key, value), for entries of a scalar or a list or
# mapping of scalars (`load` returns a copy of those: never a shared container).
_ENTRIES: dict[str, tuple[str, Any]] = {}
_CACHE_MAX = 8192


class _NotOurs(Exception):
    """Text the writer would not write: ruamel reads it."""


def load(text: str) -> dict[str, Any] | None:
    """The mapping `text` holds, when it is exactly what the writer writes; else None.

    The writer writes each top-level entry on lines of its own, the same whatever the other
    entries, so each is read and checked alone, and an entry met before (`status: open`,
    `thread: null`: most of a store's lines repeat) costs a lookup."""
    if not text.endswith("\n") or "\u2028" in text or "\u2029" in text:
        return None
    if text == "{}\n":
        return {}
    lines = text.split("\n")
    lines.pop()  # the text's final line break
    total = len(lines)
    out: dict[str, Any] = {}
    known = _ENTRIES
    at = 0
    while at < total:
        end = at + 1  # the entry's lines: up to the next line with a key in column 0
        while end < total and (
            not lines[end] or lines[end][0] == " " or lines[end][:2] in ("- ", ": ", ":")
        ):
            end += 1  # (`: ` after a `? key`, `- ` items of a list)
        entry = lines[at] if end == at + 1 else "\n".join(lines[at:end])
        found = known.get(entry)
        if found is None:
            found = _one_line(entry) if end == at + 1 else None
            if found is None:
                found = _entry(lines[at:end], entry)
                if found is None:
                    return None
            if _flat(found[1]):
                if len(known) >= _CACHE_MAX:
                    known.clear()
                known[entry] = found
        key, value = found
        if key in out:
            return None  # a duplicate key
        kind = type(value)
        out[key] = value.copy() if kind is list or kind is dict else value  # never shared
        at = end
    return out


def _flat(value: Any) -> bool:
    """Whether `value` is a scalar, or a list or mapping of scalars (a copy is then a new
    value: what the entry cache may hold)."""
    kind = type(value)
    if kind is list:
        return all(type(item) not in (list, dict) for item in value)
    if kind is dict:
        return all(type(item) not in (list, dict) for item in value.values())
    return True


def _one_line(line: str) -> tuple[str, Any] | None:
    """A `key: scalar` line of a plain key and a plain or single-quoted scalar (an id, a
    title, a time: most entries a store has once), read and checked without the general
    parser; None for any other line."""
    split = line.find(": ")
    if split <= 0 or line[0] in "'\"?":
        return None
    key = line[:split]
    token = line[split + 2 :]
    first = token[:1]
    if first == "'":
        if len(token) < 2 or token[-1] != "'":
            return None
        value: Any = token[1:-1].replace("''", "'")
    elif first in ("", '"', "|", "{", "["):
        return None
    else:
        value = _plain(token)
    if simple_key(key) != key or scalar(value, split + 2, 2) != token:
        return None
    return key, value


def _entry(lines: list[str], text: str) -> tuple[str, Any] | None:
    """The one `key: value` of a top-level entry's `lines`, if the writer writes it so."""
    data: dict[str, Any] = {}
    try:
        end = _mapping(lines, 0, 0, None, data, 0)
        if end != len(lines) or len(data) != 1 or dump_text(data) != text + "\n":
            return None
    except (_NotOurs, IndexError, ValueError, TypeError, OverflowError, RecursionError):
        return None
    ((key, value),) = data.items()
    return key, value


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if len(code) > 1:
        return chr(int(code[1:], 16))
    known = _UNESCAPED.get(code)
    if known is None:
        raise _NotOurs
    return known


def _plain(token: str) -> Any:
    """The value of a plain scalar as the writer writes values."""
    if token == "null":
        return None
    if token == "true":
        return True
    if token == "false":
        return False
    first = token[0]
    if first in "-0123456789.":
        if _INT.fullmatch(token):
            return int(token)
        if _FLOAT.fullmatch(token):
            return float(token)
    return token


def _flow_scalar(token: str, lines: list[str], at: int, indent: int) -> tuple[Any, int]:
    """The scalar starting with `token` (the rest of its line) and continued on the lines
    from `at` that sit deeper than `indent - 1` (a long line folded at a space); returns it
    and the line past it."""
    pad = " " * indent
    total = len(lines)
    if at < total and lines[at].startswith(pad):
        parts = [token]
        while at < total and lines[at].startswith(pad):
            parts.append(lines[at][indent:])
            at += 1
        token = " ".join(parts)
    first = token[0]
    if first == "'":
        if len(token) < 2 or token[-1] != "'":
            raise _NotOurs
        return token[1:-1].replace("''", "'"), at
    if first == '"':
        if len(token) < 2 or token[-1] != '"':
            raise _NotOurs
        return _UNESCAPE.sub(_unescape, token[1:-1]), at
    return _plain(token), at


def _block(header: str, lines: list[str], at: int, indent: int) -> tuple[str, int]:
    """A `|` block scalar whose lines sit at `indent`; returns its text and the next line."""
    pad = " " * indent
    start = at
    total = len(lines)
    while at < total and (lines[at] == "" or lines[at].startswith(pad)):
        at += 1
    if not header.endswith("+"):
        while at > start and lines[at - 1] == "":
            at -= 1  # trailing empty lines are kept only by `|+`
    text = "\n".join([line[indent:] for line in lines[start:at]])
    return (text if header.endswith("-") else text + "\n"), at


def _key(body: str) -> tuple[str, str]:
    """A simple key at the start of `body` and what follows its `:`."""
    first = body[0]
    if first == "'":
        end = 1
        while True:
            end = body.index("'", end)
            if body[end + 1 : end + 2] != "'":
                break
            end += 2
        key = body[1:end].replace("''", "'")
        rest = body[end + 1 :]
    elif first == '"':
        end = 1
        while True:
            end = body.index('"', end)
            slash = end
            while body[slash - 1] == "\\":
                slash -= 1
            if (end - slash) % 2 == 0:  # not an escaped quote
                break
            end += 1
        key = _UNESCAPE.sub(_unescape, body[1:end])
        rest = body[end + 1 :]
    else:
        split = body.find(": ")
        if split < 0:
            if body[-1] != ":":
                raise _NotOurs
            return body[:-1], ":"
        return body[:split], body[split:]
    if rest[:1] != ":":
        raise _NotOurs
    return key, rest


def _mapping(
    lines: list[str], at: int, indent: int, head: str | None, out: dict[str, Any], depth: int
) -> int:
    """Read the block mapping whose keys sit at column `indent` from line `at` into `out`
    (`head`: the rest of the first line, when the mapping starts after `- ` or `: `);
    returns the first line past it."""
    if depth > MAX_DEPTH:
        raise _NotOurs
    pad = " " * indent
    total = len(lines)
    while True:
        if head is not None:
            body = head
            head = None
        else:
            if at >= total:
                return at
            body = lines[at]
            if indent:
                if not body.startswith(pad):
                    return at
                body = body[indent:]
            if body[:1] in (" ", "") or body[:2] == "- ":  # deeper, or an item of a list
                return at
            at += 1
        if body[:2] == "? ":
            key, at = _node_scalar(body[2:], lines, at, indent + 2)
            if at >= total or lines[at][: indent + 1] != pad + ":":
                raise _NotOurs
            rest = lines[at][indent + 1 :]
            at += 1
            if rest == "":
                raise _NotOurs
            value, at = _after_complex_key(rest, lines, at, indent, depth)
        else:
            key, rest = _key(body)
            if rest == ":":
                if (
                    at < total
                    and lines[at][indent : indent + 2] == "- "
                    and lines[at].startswith(pad)
                ):
                    value = []
                    at = _sequence(lines, at, indent, None, value, depth + 1)
                else:
                    value = {}
                    at = _mapping(lines, at, indent + 2, None, value, depth + 1)
                    if not value:
                        raise _NotOurs
            else:
                token = rest[2:]
                if token == "{}":
                    value = {}
                elif token == "[]":
                    value = []
                elif token[:1] == "|":
                    value, at = _block(token, lines, at, indent + 2)
                else:
                    value, at = _flow_scalar(token, lines, at, indent + 2)
        out[key] = value


def _node_scalar(token: str, lines: list[str], at: int, indent: int) -> tuple[Any, int]:
    """A scalar in node position (a value, an item, a `? key`): a block or a flow scalar."""
    if token[:1] == "|":
        return _block(token, lines, at, indent)
    return _flow_scalar(token, lines, at, indent)


def _after_complex_key(
    rest: str, lines: list[str], at: int, indent: int, depth: int
) -> tuple[Any, int]:
    """The value on a `:` line after a `? key` at column `indent` (`rest`: after the `:`)."""
    if rest[:1] != " ":
        raise _NotOurs
    token = rest[1:]
    if token == "{}":
        return {}, at
    if token == "[]":
        return [], at
    return _item_or_node(token, lines, at, indent + 2, depth)


def _item_or_node(
    token: str, lines: list[str], at: int, indent: int, depth: int
) -> tuple[Any, int]:
    """A node starting mid-line at column `indent` (after `- ` or `: `): a sequence, a
    mapping, or a scalar."""
    if token[:2] == "- ":
        items: list[Any] = []
        return items, _sequence(lines, at, indent, token, items, depth + 1)
    if token[:2] == "? " or _is_entry(token):
        mapping: dict[str, Any] = {}
        return mapping, _mapping(lines, at, indent, token, mapping, depth + 1)
    return _node_scalar(token, lines, at, indent)


def _is_entry(token: str) -> bool:
    """Whether `token` starts with `key:` (else it is a scalar)."""
    try:
        _key(token)
    except (_NotOurs, ValueError, IndexError):
        return False
    return True


def _sequence(
    lines: list[str], at: int, indent: int, head: str | None, out: list[Any], depth: int
) -> int:
    """Read the block sequence whose `-` sit at column `indent` (`head`: its first line's
    rest, from the `-`); returns the first line past it."""
    if depth > MAX_DEPTH:
        raise _NotOurs
    pad = " " * indent
    total = len(lines)
    while True:
        if head is not None:
            body = head
            head = None
        elif at < total and lines[at].startswith(pad) and lines[at][indent : indent + 2] == "- ":
            body = lines[at][indent:]
            at += 1
        else:
            return at
        token = body[2:]
        if token == "{}":
            out.append({})
        elif token == "[]":
            out.append([])
        else:
            value, at = _item_or_node(token, lines, at, indent + 2, depth)
            out.append(value)
