"""The canonical YAML writer: the bytes of every file gc writes (beads and config.yaml).

`dump` writes a mapping of text, ints, floats, booleans, nulls, lists and mappings, nested
to any depth, itself: no emitter, no ruamel. Its bytes are the store's canonical bytes (the
blob ids index proofs, `gc doctor` and the merge tie-break compare). They are the bytes
libyaml's emitter (ruamel's C emitter, which gc used before) writes in block style with
2-space indentation, unicode printed as it is, lines folded past column 4096 and `|` blocks
for multi-line text, so stores written before keep their blobs: tests/test_store_codec.py checks
it against frozen samples of that emitter and, where installed, the emitter itself.

What a reader gets back is the value written (tests/test_store_codec.py loads it with ruamel and
with `beads.records.yamlread`): a plain scalar is written only when a YAML 1.2 reader resolves it
to text (`IMPLICIT_RULES`: numbers, booleans, nulls and times are quoted), everything a
plain scalar cannot hold is single- or double-quoted, and a double-quoted scalar escapes
every character outside YAML's printable set.
"""

from __future__ import annotations

import re

from beads.charclass import CharClass
from beads.records.record import TIME_RE

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

BEST_WIDTH = 4096  # a space past this column becomes a line break (libyaml's best_width)
MAX_SIMPLE_KEY = 128  # UTF-8 bytes; a longer or multi-line key is written `? key` / `: value`
BREAKS = "\n\r\x85\u2028\u2029"  # line breaks to YAML (a reader splits lines on each)


def _outside(*allowed: tuple[str, str]) -> str:
    """A character class of every code point outside the sorted `allowed` ranges (first,
    last): the set `[^...]` of them, written as what it excludes. The re compiler walks each
    BMP range of a class one character at a time: the allowed ranges span tens of thousands
    of characters, the excluded ones a few thousand (each class below is a `CharClass`, its
    full pattern compiled only for text that is not ASCII)."""
    parts, start = [], 0
    for first, last in allowed:
        if ord(first) > start:
            parts.append(f"\\U{start:08x}-\\U{ord(first) - 1:08x}")
        start = ord(last) + 1
    return "[" + "".join(parts) + f"\\U{start:08x}-\\U0010ffff]"


# Characters YAML prints as they are: LF, ASCII's printable range, U+00A0..U+D7FF and
# U+E000..U+FFFD but U+FEFF. Any other (tab, CR, C1 controls, U+FEFF, past U+FFFD) makes
# the scalar double-quoted, where it is escaped.
_PRINTABLE = (("\x20", "\x7e"), ("\xa0", "\ud7ff"), ("\ue000", "\ufefe"), ("\uff00", "\ufffd"))
_SPECIAL = CharClass(_outside(("\n", "\n"), *_PRINTABLE), "[^\n\x20-\x7e]")
# What a plain or single-quoted one-line scalar cannot hold as it is: the above and breaks.
_ONE_LINE_PRINTABLE = (("\x20", "\x7e"), ("\xa0", "\u2027"), ("\u202a", "\ud7ff"), *_PRINTABLE[2:])
_NOT_ONE_LINE = CharClass(_outside(*_ONE_LINE_PRINTABLE), "[^\x20-\x7e]")
# These patterns are texts, compiled by `re` (and kept in its cache) on first use: text
# that is one short line never reaches them.
_SPACE_BREAK = " [\n\u2028\u2029]"  # a space before a break
_BREAK_SPACE = "[\n\u2028\u2029] "  # a break before a space
_LS_PS = "[\u2028\u2029]"
# Indicators that forbid a plain scalar when they come first.
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_DIGITS = frozenset("0123456789")
# Text starting with a digit is read back as a number or a time only if its letters are those
# of 0b/0o/0x prefixes, exponents and times; anything else (a hex token, "3 apples") is text,
# which spares compiling the number and time rules for such text.
_NOT_A_NUMBER = r"[^0-9_.:+\- \teEtTzZbBoOxX]"  # compiled on first use, as above


# The implicit rules of YAML 1.2 (core schema) plus timestamps and the `<<`, `=` and tag-like
# tokens, as ruamel's resolver applies them: plain text one of them matches would be read back
# as something else (a number, a bool, null, a time...), so it is quoted. They define which
# text is written plain; a test checks that ruamel's resolver reads nothing else differently.
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
_X = re.VERBOSE
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


def implicit(first: str) -> tuple[re.Pattern[str], ...]:
    """The compiled rules for plain text starting with `first` (compiled on first need: a
    command writing one bead should not compile the number and time patterns it never meets)."""
    found = _IMPLICIT.get(first)
    if found is None:
        rules = IMPLICIT_RULES.get(first, ())
        found = _IMPLICIT[first] = tuple(re.compile(rx, flags) for _tag, rx, flags in rules)
    return found


_IMPLICIT: dict[str, tuple[re.Pattern[str], ...]] = {}


def plain_allowed(text: str) -> bool:
    """Whether one-line `text` (no break, nothing outside the printable set) may be written
    plain in block context: no leading or trailing space, no indicator that means something
    there, no document marker, and read back as text."""
    first = text[0]
    if first == " " or text[-1] == " " or first in _FIRST_INDICATORS:
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    if text.startswith(("---", "...")) or ": " in text or " #" in text or text[-1] == ":":
        return False
    if first in _DIGITS and re.search(_NOT_A_NUMBER, text) and text[:2] != "0x":
        return True  # a letter no number or time has (a hex token): no rule can match it
    for regexp in implicit(first):
        if regexp.match(text):
            return False
    return True


# -- scalars ------------------------------------------------------------------------------

# One-line text -> how it is written when it does not reach the folding column (most text
# of a store repeats: statuses, agents, labels, keys).
_ONE_LINE: dict[str, str] = {}
_CACHE_MAX = 8192
_ESCAPES = {
    "\x00": "\\0", "\x07": "\\a", "\x08": "\\b", "\t": "\\t", "\n": "\\n", "\x0b": "\\v",
    "\x0c": "\\f", "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\", "\x85": "\\N",
    "\u2028": "\\L", "\u2029": "\\P",
}  # fmt: skip
# What a double-quoted scalar escapes: the non-printable characters, breaks, `"` and `\`.
_TO_ESCAPE = CharClass(_outside(*_ONE_LINE_PRINTABLE) + '|["\\\\]', '[^\x20-\x7e]|["\\\\]')


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _style(text: str) -> str:
    """How text is written as a value (not a simple key): "plain", "single", "double" or
    "literal" (a `|` block, for text with a line feed)."""
    if "\n" in text:
        if _SPECIAL.search(text) or text[-1] == " " or re.search(_SPACE_BREAK, text):
            return "double"
        # libyaml wrote U+2028 and U+2029 into a `|` block as they are, which ruamel's pure
        # Python reader cannot read back: the one place the bytes differ from libyaml's.
        return "double" if re.search(_LS_PS, text) else "literal"
    if not _NOT_ONE_LINE.search(text):
        return "plain" if plain_allowed(text) else "single"
    if _SPECIAL.search(text) or re.search(_SPACE_BREAK, text) or re.search(_BREAK_SPACE, text):
        return "double"
    return "single"  # printable, with U+2028 or U+2029 (line breaks to YAML)


def text_scalar(text: str, column: int, indent: int) -> str:
    """`text` as a value written from `column`, its continuation lines (a `|` block's, a
    folded line's) at `indent`. May hold line feeds."""
    known = _ONE_LINE.get(text)
    if known is not None and column + len(known) <= BEST_WIDTH:
        return known
    if text == "":
        return "''"
    if TIME_RE.fullmatch(text):
        return f"'{text}'"  # gc's own times are YAML timestamps: always quoted
    style = _style(text)
    if style == "literal":
        return _literal(text, indent)
    if style == "plain":
        out = text
        if column + len(out) > BEST_WIDTH:
            return _fold(out, column, indent, 0, len(out), plain=True)
    elif style == "single":
        out = "'" + text.replace("'", "''") + "'"
        if re.search(_LS_PS, text):
            return _single_with_breaks(text, column, indent)
        if column + len(out) > BEST_WIDTH:
            return _fold(out, column, indent, 1, len(out) - 1, plain=False)
    else:
        out = '"' + _TO_ESCAPE.sub(_escape, text) + '"'
        if column + len(out) > BEST_WIDTH:
            return _fold_double(out, column, indent)
    if len(_ONE_LINE) >= _CACHE_MAX:
        _ONE_LINE.clear()  # ids and times rarely repeat: keep the cache small, not clever
    _ONE_LINE[text] = out
    return out


def _fold(out: str, column: int, indent: int, start: int, end: int, *, plain: bool) -> str:
    """A plain or single-quoted scalar written from `column` (`out[start:end]` its text, the
    rest quotes): a single space between non-spaces, reached past BEST_WIDTH, becomes a line
    break (a reader folds it back into a space); a quoted scalar's first and last character
    never do."""
    pieces: list[str] = []
    col = column
    at = 0
    pad = "\n" + " " * indent
    space = out.find(" ", start)
    while 0 <= space < end:
        col += space - at
        if (
            col > BEST_WIDTH
            and out[space - 1] != " "
            and out[space + 1] != " "
            and (plain or start < space < end - 1)
        ):
            pieces.append(out[at:space])
            pieces.append(pad)
            col = indent
        else:
            pieces.append(out[at : space + 1])
            col += 1
        at = space + 1
        space = out.find(" ", at)
    pieces.append(out[at:])
    return "".join(pieces)


def _fold_double(out: str, column: int, indent: int) -> str:
    """A double-quoted scalar written from `column`: a space (not the text's first or last
    character, nor one right after a space) reached past BEST_WIDTH becomes a line break; a
    space after it is escaped (`\\ `), as leading spaces of a line are not content."""
    pieces: list[str] = []
    col = column
    at = 0
    end = len(out) - 1  # the closing quote
    space = out.find(" ", 1)
    while 0 <= space < end:
        col += space - at
        if col > BEST_WIDTH and 1 < space < end - 1 and out[space - 1] != " ":
            pieces.append(out[at:space])
            pieces.append("\n" + " " * indent)
            col = indent
            if out[space + 1] == " ":
                pieces.append("\\")
                col += 1
        else:
            pieces.append(out[at : space + 1])
            col += 1
        at = space + 1
        space = out.find(" ", at)
    pieces.append(out[at:])
    return "".join(pieces)


def _single_with_breaks(text: str, column: int, indent: int) -> str:
    """A single-quoted scalar holding U+2028 or U+2029: each is written as it is (a reader
    keeps it), the text after it resumes at `indent`; long lines fold as `_fold` does."""
    pieces = ["'"]
    col = column + 1
    breaks = spaces = False
    last = len(text) - 1
    pad = " " * indent
    for at, char in enumerate(text):
        if char == " ":
            if not spaces and col > BEST_WIDTH and 0 < at < last and text[at + 1] != " ":
                pieces.append("\n" + pad)
                col = indent
            else:
                pieces.append(" ")
                col += 1
            spaces = True
        elif char in "\u2028\u2029":
            pieces.append(char)
            col = 0
            breaks = True
        else:
            if breaks:
                pieces.append(pad)
                col = indent
            pieces.append("''" if char == "'" else char)
            col += 2 if char == "'" else 1
            spaces = breaks = False
    if breaks:
        pieces.append(pad)
    pieces.append("'")
    return "".join(pieces)


def _literal(text: str, indent: int) -> str:
    """Text with a line feed as a `|` block: its header (an indentation indicator when it
    starts with a space or a break; `-` without a final break, `+` with more than one), then
    its lines at `indent` (empty lines stay empty)."""
    header = "|2" if text[0] in " \n" else "|"
    if text[-1] != "\n":
        header += "-"
    elif len(text) == 1 or text[-2] == "\n":
        header += "+"
    pad = " " * indent
    lines = text.split("\n")
    if text[-1] == "\n":
        lines.pop()  # the final break ends the last line
    return header + "\n" + "\n".join([pad + line if line else "" for line in lines])


def _float(value: float) -> str:
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return repr(value).lower()


def scalar(value: Any, column: int, indent: int) -> str:
    """A scalar value as written from `column` (see `text_scalar`)."""
    if isinstance(value, str):
        return text_scalar(value, column, indent)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    raise TypeError(f"canonical YAML has no {type(value).__name__} value")


# -- keys ---------------------------------------------------------------------------------

_KEYS: dict[str, str] = {}  # key -> how it is written before `:`, "" for a `? key` one


def simple_key(key: Any) -> str:
    """How `key` is written before `:`, or "" when it is written `? key` (multi-line, or
    longer than MAX_SIMPLE_KEY bytes)."""
    known = _KEYS.get(key)
    if known is not None:
        return known
    if not isinstance(key, str):
        raise TypeError(f"canonical YAML keys are text, not {type(key).__name__}")
    if any(b in key for b in BREAKS) or len(key.encode("utf-8")) > MAX_SIMPLE_KEY:
        written = ""
    elif key == "":
        written = "''"
    elif not _NOT_ONE_LINE.search(key):
        written = key if plain_allowed(key) else "'" + key.replace("'", "''") + "'"
    else:
        written = '"' + _TO_ESCAPE.sub(_escape, key) + '"'
    if len(_KEYS) >= _CACHE_MAX:
        _KEYS.clear()
    _KEYS[key] = written
    return written


# -- collections --------------------------------------------------------------------------


def dump_text(data: dict[str, Any]) -> str:
    """`data` (a mapping) as canonical YAML text."""
    if not isinstance(data, dict):
        raise TypeError("a canonical YAML document is a mapping")
    if not data:
        return "{}\n"
    lines: list[str] = []
    _mapping(data, 0, None, lines)
    return "\n".join(lines) + "\n"


def dump(data: dict[str, Any]) -> bytes:
    """`data` (a mapping) as canonical YAML: the bytes of a bead's or config.yaml's file."""
    return dump_text(data).encode("utf-8")


def _mapping(data: dict[str, Any], indent: int, head: str | None, lines: list[str]) -> None:
    """A block mapping whose keys sit at column `indent`; `head` is what precedes its first
    key on that key's line (`- `, `: `), None for a line of its own."""
    pad = " " * indent
    keys = _KEYS
    known = _ONE_LINE
    append = lines.append
    for key, value in data.items():
        start = pad if head is None else head
        head = None
        name = keys.get(key) or simple_key(key)
        if not name:
            append(f"{start}? {text_scalar(key, indent + 2, indent + 2)}")
            _value(value, indent, pad + ":", True, lines)
            continue
        # The common values inline (a call per key is a good part of a bead's dump).
        kind = type(value)
        if kind is str:
            text = known.get(value)
            if text is None or indent + len(name) + len(text) + 2 > BEST_WIDTH:
                text = text_scalar(value, len(start) + len(name) + 2, indent + 2)
            append(f"{start}{name}: {text}")
        elif value is None:
            append(f"{start}{name}: null")
        elif kind is bool:
            append(f"{start}{name}: {'true' if value else 'false'}")
        elif kind is int:
            append(f"{start}{name}: {value}")
        else:
            _value(value, indent, f"{start}{name}:", False, lines)


def _value(value: Any, indent: int, line: str, complex_key: bool, lines: list[str]) -> None:
    """The value of a key at column `indent`, `line` the key's line up to its `:`."""
    if isinstance(value, dict):
        if not value:
            lines.append(line + " {}")
        elif complex_key:  # after `? key` the value starts on the `:` line
            _mapping(value, indent + 2, line + " ", lines)
        else:
            lines.append(line)
            _mapping(value, indent + 2, None, lines)
    elif isinstance(value, list):
        if not value:
            lines.append(line + " []")
        elif complex_key:
            _sequence(value, indent + 2, line + " ", lines)
        else:  # a list in a mapping is not indented: its `-` sit in the key's column
            lines.append(line)
            _sequence(value, indent, None, lines)
    else:
        lines.append(line + " " + scalar(value, len(line) + 1, indent + 2))


def _sequence(data: list[Any], indent: int, head: str | None, lines: list[str]) -> None:
    """A block sequence whose `-` sit at column `indent`; `head` as for `_mapping`."""
    pad = " " * indent
    for item in data:
        start = (pad if head is None else head) + "-"
        head = None
        if isinstance(item, dict):
            if item:
                _mapping(item, indent + 2, start + " ", lines)
            else:
                lines.append(start + " {}")
        elif isinstance(item, list):
            if item:
                _sequence(item, indent + 2, start + " ", lines)
            else:
                lines.append(start + " []")
        elif (
            type(item) is str
            and item in _ONE_LINE
            and indent + 2 + len(_ONE_LINE[item]) <= BEST_WIDTH
        ):
            lines.append(f"{start} {_ONE_LINE[item]}")  # a label, an agent: known text
        else:
            lines.append(start + " " + scalar(item, indent + 2, indent + 2))
