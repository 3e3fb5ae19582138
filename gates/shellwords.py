"""Shell words as the destructive-op gate sees them: the bash parser, and a word's value.

The parser is tree-sitter with the tree-sitter-bash grammar, loaded on first use (its import
costs more than the rest of a PreToolUse hook, so `gates.prescreen` answers the plainest
commands without it). A parse has a deadline: past it the parser gives up and the command is
"ask".

A word's value is what bash would pass the program, as far as the command's text decides it.
What the text leaves open is marked with sentinel characters (a command cannot hold them:
the gate asks about any command with a control character below a space other than tab and
newline): `UNKNOWN` for an expansion or substitution, `STAR`, `QUESTION` and `BRACKET` for
unquoted glob characters, `TILDE` for an unquoted `~` that starts the word.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

UNKNOWN = "\x00"
STAR = "\x01"
QUESTION = "\x02"
BRACKET = "\x03"
TILDE = "\x04"
SENTINELS = UNKNOWN + STAR + QUESTION + BRACKET + TILDE
GLOBS = {"*": STAR, "?": QUESTION, "[": BRACKET}
BRACES = re.compile(r"\{[^{}/]*(,|\.\.)[^{}/]*\}")
BRACE_LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")  # an innermost `{a,b}`, slashes and all
MAX_BRACE_WORDS = 64  # words one brace expansion gives before it is read as "any of them"
# Parts of one word (expansions, quoted pieces) read before its value is left open: a word
# of a hundred thousand `$x` would cost the gate's whole budget to spell out.
MAX_WORD_PARTS = 4_000
# Variables whose value the gate knows from its own environment.
KNOWN_VARIABLES = ("HOME", "TMPDIR")

_parser: Any = None
# The text of the trees being read, innermost last: nodes give byte offsets into it (a tree
# parsed through a reader callback, as here, would rebuild a node's text at every call).
sources: list[bytes] = []
# The positional parameters of the scripts being read, innermost last: `$0`, `$1`, ... as
# words (`sh -c 'rm "$1"' _ FILE`), or None where they are not known.
positionals: list[list[str] | None] = []


def parser() -> Any:
    """The bash parser (loaded once per process)."""
    global _parser
    if _parser is None:
        import tree_sitter
        import tree_sitter_bash

        _parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    return _parser


def parse(source: bytes, deadline: float) -> Any:
    """The syntax tree of `source`, or None when parsing would run past `deadline`
    (a `time.monotonic()` value)."""
    from time import monotonic

    def past(_offset: int, _has_error: bool) -> bool:
        return monotonic() > deadline

    def read(offset: int, _point: object) -> bytes:
        return source[offset : offset + 65536]

    reader = parser()
    try:
        return reader.parse(read, progress_callback=past)
    except ValueError:  # cancelled by `past`: forget the half-done parse (else the next
        reader.reset()  # call would resume it, whatever its text)
        return None


def raw(node: Any) -> bytes:
    """The node's source bytes (in the tree being read)."""
    return sources[-1][node.start_byte : node.end_byte]


def text(node: Any) -> str:
    """The node's source text."""
    return raw(node).decode("utf-8", "replace")


def value(node: Any) -> str:
    """The word `node` as bash passes it, with sentinels where the text leaves it open."""
    out = _value(node, top=True)
    if BRACES.search(out):  # brace expansion: any of several words
        out = BRACES.sub(STAR, out)
    return out


def values(node: Any) -> list[str]:
    """The words bash makes of the argument `node`: a brace list gives one word per
    alternative (`{build,dist}`, `{~,/tmp/x}`: a `~` that then starts a word is the home
    directory, as bash expands it after the braces); `"$@"`, `$*` and their kin, the
    positional parameters when they are known. Past `MAX_BRACE_WORDS` words, and for a
    sequence (`{1..9}`), a brace is read as `value` reads it: any of several words."""
    every = _all_positionals(node) if positionals and positionals[-1] is not None else None
    if every is not None:
        return every
    out = _value(node, top=True)
    if "{" not in out or "," not in out:
        return [value(node)] if BRACES.search(out) else [out]
    pending, done = [out], []
    while pending:
        word = pending.pop()
        found = BRACE_LIST.search(word)
        if found is None:
            done.append(word)
            continue
        parts = found[1].split(",", MAX_BRACE_WORDS)
        if len(pending) + len(done) + len(parts) > MAX_BRACE_WORDS:  # counted before it is made
            return [BRACE_LIST.sub(STAR, BRACES.sub(STAR, out))]
        pending += [word[: found.start()] + part + word[found.end() :] for part in parts]
    first = out.startswith("{")  # each word then starts with an alternative's text
    done = [TILDE + w[1:] if first and w.startswith("~") else w for w in reversed(done)]
    return [BRACES.sub(STAR, w) for w in done]


def _value(node: Any, top: bool = False) -> str:
    kind = node.type
    if kind == "word":
        return _unquoted(text(node), top)
    if kind == "number":
        return text(node)
    if kind == "raw_string":
        return text(node)[1:-1]
    if kind == "ansi_c_string":
        return ansi_c(text(node)[2:-1])
    if kind in ("string", "translated_string"):
        return _with_gaps(node, quoted=True)
    if kind == "concatenation":
        return _with_gaps(node, quoted=False, top=top)
    if kind in ("simple_expansion", "expansion"):
        return _variable(node)
    if kind == "string_content":
        return _unescape_in_quotes(text(node))
    return UNKNOWN  # substitutions, arithmetic, arrays: a value the text does not fix


def _with_gaps(node: Any, quoted: bool, top: bool = False) -> str:
    """The children's values in order, with the source between them kept as it is (a value
    left open past `MAX_WORD_PARTS` children)."""
    if node.child_count > MAX_WORD_PARTS:
        return UNKNOWN
    data = raw(node)
    start = node.start_byte
    parts: list[str] = []
    at = start + (1 if quoted and data[:1] == b'"' else 2 if data[:2] == b'$"' else 0)
    end = node.end_byte - (1 if quoted and data.endswith(b'"') and len(data) > 1 else 0)
    first = True
    for child in node.children:
        if child.start_byte < at or child.end_byte > end or child.type == '"':
            continue
        if child.start_byte > at:
            gap = data[at - start : child.start_byte - start].decode("utf-8", "replace")
            parts.append(_unescape_in_quotes(gap) if quoted else _unquoted(gap, top and first))
            first = False
        parts.append(_value(child, top=top and first))
        first = False
        at = child.end_byte
    if at < end:
        gap = data[at - start : end - start].decode("utf-8", "replace")
        parts.append(_unescape_in_quotes(gap) if quoted else _unquoted(gap, top and first))
    return "".join(parts)


def _unquoted(raw: str, first: bool) -> str:
    """An unquoted word: backslashes removed, glob characters and a leading `~` marked."""
    out = []
    escaped = False
    for index, char in enumerate(raw):
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in GLOBS:
            out.append(GLOBS[char])
        elif char == "~" and index == 0 and first:
            out.append(TILDE)
        else:
            out.append(char)
    return "".join(out)


def _unescape_in_quotes(raw: str) -> str:
    return re.sub(r"\\([$`\"\\\n])", lambda m: "" if m[1] == "\n" else m[1], raw)


def _all_positionals(node: Any) -> list[str] | None:
    """The words of an argument that is all of the positional parameters (`"$@"`, `$*`,
    `"${@}"`), when they are known; else None."""
    known = positionals[-1] if positionals else None
    if known is None:
        return None
    every = ("@", "*")  # unquoted, both split into words; quoted, `"$*"` is one word
    if node.type == "string" and text(node).startswith('"'):
        inner = [c for c in node.children if c.type != '"']
        if len(inner) != 1 or inner[0].end_byte - inner[0].start_byte != len(raw(node)) - 2:
            return None
        node, every = inner[0], ("@",)
    if node.type not in ("simple_expansion", "expansion"):
        return None
    names = [c for c in node.children if c.type == "special_variable_name"]
    plain = len(node.children) == 2 if node.type == "simple_expansion" else len(node.children) == 3
    return known[1:] if plain and names and text(names[0]) in every else None


def _positional(name: str) -> str | None:
    """The value of `$N`, `$@` or `$*` inside a word, when the positional parameters are
    known (several of them joined in a word: unknown); else None."""
    known = positionals[-1] if positionals else None
    if known is None:
        return None
    if name.isdigit():  # one not given: unknown, as before (`rm -rf ""` is read as `.`)
        return known[int(name)] if int(name) < len(known) else UNKNOWN
    if name in ("@", "*"):
        return known[1] if len(known) == 2 else UNKNOWN
    return None


def _variable(node: Any) -> str:
    names = [c for c in node.children if c.type in ("variable_name", "special_variable_name")]
    plain = len(node.children) == 2 if node.type == "simple_expansion" else len(node.children) == 3
    if plain and names and positionals and positionals[-1] is not None:
        found = _positional(text(names[0]))
        if found is not None:
            return found
    if plain and names and names[0].type == "variable_name":
        name = text(names[0])
        if name in KNOWN_VARIABLES:
            known = os.environ.get(name) or ("/tmp" if name == "TMPDIR" else "")
            if known:
                return known
    return UNKNOWN


ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


NUMERIC_ESCAPE = re.compile(
    r"x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})"
)


def ansi_c(body: str) -> str:
    """The value of bash's `$'...'` body (escapes decoded; what decodes to a control
    character is left UNKNOWN)."""
    out = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 == len(body):
            out.append(char)
            i += 1
            continue
        code = body[i + 1]
        if code in ESCAPES:
            out.append(ESCAPES[code])
            i += 2
            continue
        match = NUMERIC_ESCAPE.match(body, i + 1)  # in place: a slice per escape is quadratic
        if match:
            number = int(match[1] or match[2] or match[3] or "0", 16) if not match[4] else 0
            number = int(match[4], 8) if match[4] else number
            out.append(chr(number) if 0 < number < 0x110000 else UNKNOWN)
            i += 1 + len(match[0])
        else:
            out.append("\\" + code)
            i += 2
    return "".join(c if c >= " " or c in "\t\n" else UNKNOWN for c in out)


def literal(word: str) -> str | None:
    """The word's value when its text fixes it completely (None otherwise)."""
    return None if any(s in word for s in SENTINELS) else word


def shown(word: str) -> str:
    """The word for a message: sentinels back as `*`, `?`, `[`, `~`, and a part the text
    leaves unknown as `…` (no shell syntax: `$?` would read as the exit status)."""
    return word.translate(
        {ord(UNKNOWN): "…", ord(STAR): "*", ord(QUESTION): "?", ord(BRACKET): "[", ord(TILDE): "~"}
    )


def as_text(word: str) -> str:
    """A word's value as shell text: its wildcards and `~` as written, what is unknown as
    an expansion."""
    return word.translate(
        {ord(STAR): "*", ord(QUESTION): "?", ord(BRACKET): "[", ord(TILDE): "~", ord(UNKNOWN): "$_"}
    )
