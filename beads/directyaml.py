"""The direct YAML writer and reader: the bytes ruamel's C emitter (libyaml) writes for the
common shape of a bead, written and read without ruamel.

`dump` writes text, multi-line text as `|` blocks, ints, booleans, nulls, nested mappings and
lists of scalars exactly as ruamel would, and gives up (None) on anything else (floats,
control characters, very long lines, trailing spaces); `load` reads back only what `dump`
writes. `beads.codec` tries them first and falls back to ruamel. They exist for speed: each
is more than ten times as fast as ruamel's representer or loader on a bead, and importing
ruamel costs a command about as much as the rest of a mail send (docs/design.md).
"""

from __future__ import annotations

import re
from typing import Any

from beads.record import TIME_RE

MAX_DEPTH = 64  # nested collections; a bead needs 10 (meta nests at most 8 deep)


# -- the direct writer ------------------------------------------------------------------------
#
# It mirrors the choices of libyaml's emitter (ruamel's C emitter) for the values it accepts,
# and gives up (None) on everything else. Block mappings indent by 2, sequences in a mapping
# are not indented (`key:` then `- item` in the key's column), empty containers are `[]` and
# `{}`. A scalar is plain when libyaml's analysis allows it and the resolver would read it
# back as text; otherwise single-quoted. tests/test_codec.py checks it byte for byte against
# ruamel with hypothesis.

# A character libyaml does not print as it is with allow_unicode: tabs and other control
# characters, line breaks (U+0085, U+2028 and U+2029 are breaks to YAML), surrogates, U+FEFF
# and everything past U+FFFD (ruamel escapes it). A line holding one needs a double-quoted
# scalar, left to ruamel. Spelled as what is refused: the class of what is allowed is several
# times slower to compile, on every command that writes.
_UNPRINTED = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe-\U0010ffff]")
# Far below the emitter's width (4096) even nested 8 deep under 64-character keys, so
# libyaml never folds the line.
_MAX_SCALAR = 1000
_MAX_KEY = 100  # UTF-8 bytes; libyaml writes keys past 128 bytes as `? key`
# Indicators that forbid a plain scalar when they come first (libyaml's analyze_scalar).
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")


# The implicit rules of the resolver ruamel's C dumper uses for typ="safe" (YAML 1.2): plain
# text one of them matches would be read back as something else (a number, a bool, null, a
# time...), so it is quoted. Copied here so a dump needs no ruamel import; a test checks the
# copy against `ruamel.yaml.resolver.Resolver` of the installed ruamel.
_FLOAT = r"""^(?:
         [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$"""
_INT = r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0o?[0-7_]+
        |[-+]?[0-9_]+
        |[-+]?0x[0-9a-fA-F_]+)$"""
_TIMESTAMP = r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
        |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
        (?:[Tt]|[ \t]+)[0-9][0-9]?
        :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
        (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"""
_BOOL = r"^(?:true|True|TRUE|false|False|FALSE)$"
_NULL = r"""^(?: ~
        |null|Null|NULL
        | )$"""
_X = re.VERBOSE  # as ruamel compiles the multi-line rules; the one-line rules are plain
IMPLICIT_RULES: dict[str, list[tuple[str, str, int]]] = {
    "": [("null", _NULL, _X)],
    "~": [("null", _NULL, _X)],
    "n": [("null", _NULL, _X)],
    "N": [("null", _NULL, _X)],
    "t": [("bool", _BOOL, _X)],
    "T": [("bool", _BOOL, _X)],
    "f": [("bool", _BOOL, _X)],
    "F": [("bool", _BOOL, _X)],
    "+": [("float", _FLOAT, _X), ("int", _INT, _X)],
    "-": [("float", _FLOAT, _X), ("int", _INT, _X)],
    ".": [("float", _FLOAT, _X)],
    **{d: [("float", _FLOAT, _X), ("int", _INT, _X), ("timestamp", _TIMESTAMP, _X)]
       for d in "0123456789"},
    "<": [("merge", r"^(?:<<)$", 0)],
    "=": [("value", r"^(?:=)$", 0)],
    "!": [("yaml", r"^(?:!|&|\*)$", 0)],
    "&": [("yaml", r"^(?:!|&|\*)$", 0)],
    "*": [("yaml", r"^(?:!|&|\*)$", 0)],
}  # fmt: skip


def _implicit(first: str) -> tuple[re.Pattern[str], ...]:
    """The compiled rules for text starting with `first` (compiled on first need: a command
    writing one bead should not compile the number and time patterns it never meets)."""
    found = _IMPLICIT.get(first)
    if found is None:
        rules = IMPLICIT_RULES.get(first, ())
        found = _IMPLICIT[first] = tuple(re.compile(rx, flags) for _tag, rx, flags in rules)
    return found


_IMPLICIT: dict[str, tuple[re.Pattern[str], ...]] = {}
_SCALARS: dict[str, str | None] = {}  # text -> how it is written (None: ruamel must do it)
_SCALARS_MAX = 8192


def _text_scalar(text: str) -> str | None:
    """How libyaml writes `text` in block context, or None when it is not a simple case."""
    known = _SCALARS.get(text, "")
    if known != "":
        return known
    if text == "":
        return "''"
    if TIME_RE.fullmatch(text):
        # gc's own times are YAML timestamps, so always quoted; knowing that saves the
        # resolver's number and time patterns on the three or four times of a bead.
        return f"'{text}'"  # not cached: times are rarely written twice
    if len(text) > _MAX_SCALAR or _UNPRINTED.search(text):
        out = None
    elif _plain_allowed(text):
        out = text
    else:
        out = "'" + text.replace("'", "''") + "'"
    if len(_SCALARS) >= _SCALARS_MAX:
        _SCALARS.clear()  # ids and times rarely repeat: keep the cache small, not clever
    _SCALARS[text] = out
    return out


_DIGITS = frozenset("0123456789")
# Text starting with a digit is read back as a number or a time only if its letters are those
# of 0b/0o/0x prefixes, exponents and times; anything else (a hex token, "3 apples") is a
# string, which spares compiling the number and time rules for such text.
_NOT_A_NUMBER = re.compile(r"[^0-9_.:+\- \teEtTzZbBoOxX]")


def _plain_allowed(text: str) -> bool:
    # libyaml: no leading or trailing space, no indicator that means something in block
    # context, no document marker; then the resolver must read the plain text back as a str.
    first = text[0]
    if first == " " or text[-1] == " " or first in _FIRST_INDICATORS:
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    if text.startswith(("---", "...")) or ": " in text or " #" in text or text[-1] == ":":
        return False
    if first in _DIGITS and _NOT_A_NUMBER.search(text) and text[:2] != "0x":
        return True  # a letter no number or time has (a hex token): no rule can match it
    for regexp in _implicit(first):
        if regexp.match(text):
            return False
    return True


def _fast_scalar(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return _text_scalar(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    return None  # floats (ruamel's float repr is subtle), subclasses, anything else


def dump(data: dict[str, Any]) -> bytes | None:
    """`data` (a mapping) as ruamel would dump it, or None when it is not a simple case."""
    lines: list[str] = []
    if not _fast_mapping(data, "", lines):
        return None
    lines.append("")
    return "\n".join(lines).encode("utf-8")


def _fast_mapping(data: dict[str, Any], indent: str, lines: list[str]) -> bool:
    for key, value in data.items():
        name = _fast_key(key)
        if name is None:
            return False
        kind = type(value)
        if kind is dict:
            if not value:
                lines.append(f"{indent}{name}: {{}}")
                continue
            lines.append(f"{indent}{name}:")
            if not _fast_mapping(value, indent + "  ", lines):
                return False
        elif kind is list:
            if not value:
                lines.append(f"{indent}{name}: []")
                continue
            lines.append(f"{indent}{name}:")
            for item in value:
                text = _fast_scalar(item)
                if text is None:
                    return False  # nested containers in lists: ruamel
                lines.append(f"{indent}- {text}")
        elif kind is str and "\n" in value:
            block = _literal_block(value, indent + "  ")
            if block is None:
                return False
            lines.append(f"{indent}{name}: {block[0]}")
            lines.extend(block[1:])
        else:
            text = _fast_scalar(value)
            if text is None:
                return False
            lines.append(f"{indent}{name}: {text}")
    return True


def _fast_key(key: Any) -> str | None:
    """How a mapping key is written, or None when it is not a simple case (a key that needs
    quotes, or one libyaml writes as `? key`)."""
    if key in _KEYS:  # the same few dozen keys, in every bead
        return key
    if type(key) is not str or len(key.encode("utf-8")) > _MAX_KEY or _text_scalar(key) != key:
        return None
    if len(_KEYS) >= _SCALARS_MAX:
        _KEYS.clear()
    _KEYS.add(key)
    return key


_KEYS: set[str] = set()  # keys `_fast_key` writes as they are


def _literal_block(text: str, indent: str) -> list[str] | None:
    """Multi-line `text` as libyaml writes a `|` block whose lines sit at `indent`: the
    header, then the lines. None when it is not a simple case: a space before a line break
    or at the end (ruamel then double-quotes), two or more final breaks (`|+`), or a line of
    characters the one-line writer would not take either."""
    if text.endswith((" ", "\n\n")) or text == "\n":
        return None
    lines = text.split("\n")
    for line in lines:
        if line and (line[-1] == " " or _UNPRINTED.search(line)):
            return None
    header = "|"
    if text[0] in " \n":
        header += "2"  # libyaml's indentation indicator (its best indent)
    if text.endswith("\n"):
        lines.pop()  # the final break is what the default (clip) chomping keeps
    else:
        header += "-"
    return [header, *(indent + line if line else "" for line in lines)]


# -- the direct reader -------------------------------------------------------------------------
#
# The writer's twin: it reads the canonical shape `dump` writes (2-space block mappings,
# `key:` then `- item` lists of scalars, `{}` and `[]`, plain and single-quoted scalars, `|`
# blocks) and accepts a text only when the writer would write its result back as exactly that
# text: the layout is the writer's by construction, and each key, scalar and block is checked
# against the writer's own functions (`_fast_key`, `_fast_scalar`, `_literal_block`). Then
# ruamel reads that text as the same data (the writer is checked byte for byte against
# ruamel, and ruamel's load of its own dump against the data), so nothing the reader accepts
# can differ from ruamel's reading; anything else (other layouts, anchors, flow collections,
# floats, comments, deep nesting) returns None and goes to ruamel and its checks. ruamel's
# loader is more than ten times slower a bead, and most of an index rebuild's time.

_INT_TEXT = re.compile(r"-?[0-9]{1,4000}")  # as str(int) writes them: int() takes 4,300 digits
# A `key: scalar` line (its text after the indentation) -> (key, value), once checked: most
# lines of a store repeat (`status: open`, `thread: null`), so most cost a lookup.
_LINES: dict[str, tuple[str, Any]] = {}
_ITEMS: dict[str, Any] = {}  # the same for list items (`- bench`): token -> value


class _NotOurs(Exception):
    """Text the direct writer would not write: ruamel reads it."""


def load(text: str) -> dict[str, Any] | None:
    """The mapping `text` holds, when it is exactly what `dump` writes; else None."""
    if not text.endswith("\n"):
        return None
    lines = text.split("\n")
    lines.pop()  # the text's final line break
    data: dict[str, Any] = {}
    try:
        end = _read_mapping(lines, 0, "", data, 0)
    except _NotOurs:
        return None
    return data if data and end == len(lines) else None


def _read_mapping(lines: list[str], at: int, indent: str, out: dict[str, Any], depth: int) -> int:
    """Read the block mapping whose keys sit at `indent` from line `at` into `out`; returns
    the first line past it."""
    if depth > MAX_DEPTH:
        raise _NotOurs
    width = len(indent)
    total = len(lines)
    known = _LINES
    while at < total:
        line = lines[at]
        if not line.startswith(indent):
            break  # the end of this mapping: a shallower key (or not ours: the caller sees)
        body = line[width:] if width else line
        found = known.get(body)
        at += 1
        if found is not None:
            key, value = found
        else:
            split = body.find(": ")
            if split < 0:  # `key:` then a list or a nested mapping
                key = body[:-1]
                if body[-1:] != ":" or _fast_key(key) != key:
                    raise _NotOurs
                if at < total and lines[at].startswith(indent + "- "):
                    value = []
                    item = indent + "- "
                    while at < total and lines[at].startswith(item):
                        token = lines[at][width + 2 :]
                        known_item = _ITEMS.get(token, _ITEMS)  # (the dict itself: unknown)
                        if known_item is _ITEMS:
                            known_item = _read_scalar(token)
                            if len(_ITEMS) >= _SCALARS_MAX:
                                _ITEMS.clear()
                            _ITEMS[token] = known_item
                        value.append(known_item)
                        at += 1
                else:
                    value = {}
                    at = _read_mapping(lines, at, indent + "  ", value, depth + 1)
                    if not value:
                        raise _NotOurs  # an empty mapping is written `{}`
            else:
                key = body[:split]
                token = body[split + 2 :]
                if _fast_key(key) != key:
                    raise _NotOurs
                if token[:1] == "|":
                    value, at = _read_block(lines, at, indent + "  ", token)
                else:
                    value = {} if token == "{}" else [] if token == "[]" else _read_scalar(token)
                    if type(value) is not dict and type(value) is not list:
                        if len(known) >= _SCALARS_MAX:
                            known.clear()
                        known[body] = (key, value)
        if key in out:
            raise _NotOurs  # a duplicate key
        out[key] = value
    return at


def _read_block(lines: list[str], at: int, indent: str, header: str) -> tuple[str, int]:
    """A `|` block scalar whose lines sit at `indent`; returns its text and the next line."""
    start = at
    total = len(lines)
    while at < total and (lines[at] == "" or lines[at].startswith(indent)):
        at += 1
    while at > start and lines[at - 1] == "":
        at -= 1  # a block never ends with an empty line: those are the next key's business
    width = len(indent)
    text = "\n".join([line[width:] for line in lines[start:at]])
    if header[-1:] != "-":
        text += "\n"
    if "\n" not in text or _literal_block(text, indent) != [header, *lines[start:at]]:
        raise _NotOurs
    return text, at


def _read_scalar(token: str) -> Any:
    """The value of a one-line scalar, if the writer writes that value as `token`."""
    if token[:1] == "'":
        value: Any = token[1:-1].replace("''", "'")
    elif token == "null":
        value = None
    elif token == "true":
        value = True
    elif token == "false":
        value = False
    elif _INT_TEXT.fullmatch(token):
        value = int(token)
    else:
        value = token
    if _fast_scalar(value) != token:
        raise _NotOurs
    return value
