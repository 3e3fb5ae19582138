"""The shell syntax tree read as the shell reads it, for the destructive-op gate's judge
(`gates.shelljudge`) and its rules: a command's words (`Item`), where its standard input
comes from (`Stdin`), and what a node says (a `read` loop's variable, the command an output
redirection takes, a process substitution, a word as script text).
"""

from __future__ import annotations

import os
import re

from gates import shellwords
from gates.shellwords import UNKNOWN, literal, value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Item:
    """One word of a command: its value (with sentinels) and its node (None: made up);
    `text`, for a made-up word, the text a shell reading it as a script gets."""

    __slots__ = ("word", "node", "text")

    def __init__(self, word: str, node: Any = None, text: str | None = None) -> None:
        self.word = word
        self.node = node
        self.text = text

    @property
    def literal(self) -> str | None:
        return literal(self.word)

    def script(self) -> str:
        """The word as the text a shell reading it as a script would get: its value when
        the text fixes it (`"$1"` in a script whose `$1` is known), else the word as
        written (its expansions read again as unknown)."""
        if self.text is not None:
            return self.text
        if self.node is None:
            return self.word
        known = self.literal
        return known if known is not None else script_text(self.node)


UNKNOWN_TARGETS = UNKNOWN + "input"  # the arguments `xargs` and `parallel` add from their input
# Stages that hand on the lines they read (some of them, in another order): what a pipe
# through them gives `xargs` is still what the stage before printed.
PASS_LINES_ON = frozenset({"sort", "uniq", "tee", "head", "tail"})
FINDERS = frozenset({"find", "fd", "fdfind"})  # programs that print the paths they find
# find's actions printing other than each path it finds on a line of its own.
FIND_OTHER_PRINTS = frozenset(("-printf", "-fprintf", "-print0", "-fprint0", "-ls", "-fls"))


GREPS = frozenset({"grep", "egrep", "fgrep", "rg"})  # programs printing the lines that match
# grep's and ripgrep's short options taking a value, and their long options (True: takes
# a value) that make them print other than the lines they read (counts, file names, parts
# of lines, numbered or labelled lines, JSON) or read other than their input (`-r`, rg's
# `--files`).
GREP_VALUES = "efmABCdD"
RG_VALUES = "efmABCgtTrjMEd"
GREP_OTHER_OUTPUT = frozenset("clLqonbHrRp")
GREP_LONGS = {
    "regexp": True, "file": True, "max-count": True, "after-context": True,
    "before-context": True, "context": True, "directories": True, "devices": True,
    "label": True, "include": True, "exclude": True, "exclude-from": True,
    "exclude-dir": True, "binary-files": True, "glob": True, "iglob": True, "type": True,
    "type-not": True, "replace": True, "threads": True, "max-columns": True,
    "encoding": True, "max-depth": True,
    "count": False, "count-matches": False, "files-with-matches": False,
    "files-without-match": False, "files": False, "quiet": False, "silent": False,
    "only-matching": False, "line-number": False, "byte-offset": False,
    "with-filename": False, "recursive": False, "dereference-recursive": False,
    "pretty": False, "json": False, "vimgrep": False, "column": False, "type-list": False,
}  # fmt: skip
GREP_OTHER_LONGS = frozenset(
    name for name, takes in GREP_LONGS.items() if not takes or name == "replace"
)


def passes_lines_on(items: list[Item]) -> bool:
    """Whether a pipeline stage's words are a filter that writes lines it reads (`sort`,
    `head -5`, `tee log`, a `cat` of its input alone, a `grep` of its input: `grep -v x`
    may pass on any of them)."""
    program = (items[0].literal or "").rsplit("/", 1)[-1]
    if program in GREPS:
        return greps_its_input(program, items)
    return program in PASS_LINES_ON or (program == "cat" and len(items) == 1)


def _grep_options(program: str, items: list[Item]) -> Any:
    """grep's (`rg`'s) words read as it reads them (`gates.options.Options`)."""
    from gates import options

    words = [item.literal for item in items[1:]]
    return options.read(words, RG_VALUES if program == "rg" else GREP_VALUES, GREP_LONGS)


def greps_its_input(program: str, items: list[Item]) -> bool:
    """Whether `grep`'s (`egrep`, `fgrep`, `rg`) words print some of the lines it reads
    from its input as they are: no file to search but `-`, no option printing counts, names
    or numbered lines instead (`-c`, `-l`, `-n`, ...). An option whose value is not known
    may be any: counted as printing lines."""
    words = [item.literal for item in items[1:]]
    read = _grep_options(program, items)
    if any(flag in GREP_OTHER_OUTPUT or flag in GREP_OTHER_LONGS for flag in read.flags):
        return False
    colors = [*read.values.get("color", []), *read.values.get("colour", [])]
    if any(value not in ("never", "auto") for value in colors):
        return False  # `--color=always`: the lines come wrapped in escapes
    patterns = 0 if read.has("e", "f", "regexp", "file") else 1
    return all(words[at] == "-" for at in read.positionals[patterns:])


# What a grep pattern may hold to be read as a find path test: letters taken as they are,
# and `.` (any letter), `.*` (any letters), `^` and `$` (the line's ends), a backslash
# before punctuation (that letter).
GREP_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/,:=@%~ -")
GREP_ESCAPED = frozenset("./-_$^*[]")
# grep's options printing lines besides those matching (context), or matching by words.
GREP_WIDER = frozenset(("A", "B", "C", "w", "after-context", "before-context", "context"))


def grep_path_tests(items: list[Item]) -> list[Item] | None:
    """find's tests passing at least the paths (one a line) that a `grep` stage (`egrep`,
    `fgrep`) passing lines on (`passes_lines_on`) passes: `grep HEAD` as `-ipath '*HEAD*'`,
    `grep -v '\\.git/'` as `! -path '*.git/*'` (a `.` may match any letter and the case
    may be ignored: taken as the wider reading when it matches, the narrower when `-v`
    drops). None when no such test says it: a pattern beyond `GREP_LETTERS`, several, one
    not known, context lines, `-w`; `rg`, which may read options from a file the gate
    cannot see."""
    program = (items[0].literal or "").rsplit("/", 1)[-1]
    if program == "rg":
        return None
    read = _grep_options(program, items)
    given = [*read.values.get("e", []), *read.values.get("regexp", [])]
    if read.has("f", "file", "z", "null-data") or any(f in GREP_WIDER for f in read.flags):
        return None
    if not given and read.positionals:
        given = [items[1 + read.positionals[0]].literal]
    if len(given) != 1 or given[0] is None or "\n" in given[0]:
        return None
    drops = read.has("v", "invert-match")
    fixed = program == "fgrep" or read.has("F", "fixed-strings")
    glob = _grep_glob(given[0], fixed, drops, read.has("x", "line-regexp"))
    if glob is None:
        return None
    return [Item("!"), Item("-path"), Item(glob)] if drops else [Item("-ipath"), Item(glob)]


def _grep_glob(pattern: str, fixed: bool, drops: bool, whole: bool) -> str | None:
    """find's glob for the lines holding a match of grep's `pattern` (`fixed`: a string;
    `whole`: matching whole lines): with `drops`, lines that surely do (a `.` as itself),
    else lines that may (a `.` as any letter); unless anchored (`^`, `$`, `whole`), the
    glob starts and ends with `*`. None when the pattern holds more than these."""
    ends = "" if whole else "*"
    if fixed:
        return ends + "".join(c if c.isalnum() else "\\" + c for c in pattern) + ends
    start = pattern.startswith("^")
    end = pattern.endswith("$") and not pattern.endswith("\\$") and len(pattern) > start
    head, tail = "" if start else ends, "" if end else ends
    body = pattern[int(start) : len(pattern) - int(end)]
    out, at = [], 0
    while at < len(body):
        char = body[at]
        if body.startswith(".*", at):
            out.append("*")
            at += 2
            continue
        if char == "\\" and at + 1 < len(body) and body[at + 1] in GREP_ESCAPED:
            char, at = body[at + 1], at + 1
        elif char == ".":
            char = "." if drops else "?"
        elif char not in GREP_LETTERS:
            return None
        out.append(char if char.isalnum() or char == "?" and not drops else "\\" + char)
        at += 1
    return head + "".join(out) + tail


class Stdin:
    """Where a command's standard input comes from: `text` known, else `what` says; for a
    pipe, `source` is the command before it (a syntax node), when there is one, or `words`
    are the words of a command made up to stand for the writer (find printing into a
    process substitution by `-fprint`)."""

    __slots__ = ("text", "what", "source", "words")

    def __init__(
        self, text: str | None, what: str, source: Any = None, words: list[Item] | None = None
    ) -> None:
        self.text = text
        self.what = what  # "heredoc", "herestring", "pipe", "file"
        self.source = source
        self.words = words


def join_continuations(source: str) -> str:
    """`source` with each unescaped backslash-newline removed, as bash joins lines."""
    if "\\\n" not in source:
        return source
    import re

    return re.sub(r"\\(.)", lambda m: "" if m[1] == "\n" else m[0], source, flags=re.DOTALL)


def children(node: Any, parent: Any, grand: Any) -> list[tuple]:
    """Stack entries for the node's children, last first: each with its ancestors and the
    named sibling before it."""
    entries = []
    before = None
    for child in node.children:
        entries.append((child, node, parent, grand, before))
        if child.is_named:
            before = child
    entries.reverse()
    return entries


def read_name(items: list[Item] | None) -> str | None:
    """The variable `read [-r] [-d D] NAME` sets to each line (`REPLY` with none); None
    when the words are not such a `read` (several names, an array, a variable's option)."""
    if not items or items[0].literal != "read":
        return None
    names, at = [], 1
    while at < len(items):
        word = items[at].literal
        if word is None:
            return None
        if word.startswith("-") and len(word) > 1 and not names:
            if "a" in word:
                return None
            # `-d D`, `-p P`, ...: the option's value is the rest of the word or the next one
            taking = next((k for k, c in enumerate(word[1:]) if c in "dpntNui"), None)
            at += 2 if taking is not None and taking == len(word) - 2 else 1
            continue
        names.append(word)
        at += 1
    if len(names) > 1 or names and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", names[0]):
        return None
    return names[0] if names else "REPLY"


def last_command(node: Any) -> Any:
    """The simple command whose output a statement ends with, when it is one (None
    otherwise): the statement itself, its body without its redirections, the one
    statement of a subshell, a `{ ...; }` group or a substitution (`(find ...)`,
    `<(find ...)`), a pipeline's last stage."""
    while node is not None:
        kind = node.type
        if kind == "command":
            return node
        if kind == "redirected_statement":
            node = node.child_by_field_name("body")
        elif kind in (
            "subshell", "compound_statement", "process_substitution", "command_substitution",
            "pipeline",
        ):  # fmt: skip
            inner = [c for c in node.children if c.is_named and c.type != "comment"]
            if not inner or len(inner) > 1 and kind != "pipeline":
                return None
            node = inner[-1]
        else:
            return None
    return None


def pipeline_stages(node: Any) -> list[tuple[Any, list[Any]]]:
    """The stages of a pipeline (of a statement alone: itself), each with the redirections
    bash gives it: tree-sitter hangs `a | b 2>/dev/null`'s redirection on `a | b`, bash on
    `b` alone."""
    if node.type == "pipeline":
        stages = []
        for child in node.children:
            if child.is_named and child.type != "comment":
                stages += pipeline_stages(child)
        return stages
    body = node.child_by_field_name("body") if node.type == "redirected_statement" else None
    if body is None:
        return [(node, [])]
    *before, (last, own) = pipeline_stages(body)
    return [*before, (last, [*own, *statement_redirects(node)])]


def statement_redirects(node: Any) -> list[Any]:
    """A redirected statement's redirections, with those tree-sitter hangs inside a heredoc's
    (`cat <<EOF > f`: the `> f`)."""
    found = []
    for redirect in node.children_by_field_name("redirect"):
        found.append(redirect)
        if redirect.type == "heredoc_redirect":
            found += redirect.children_by_field_name("redirect")
    return found


def first(name: Any) -> Any:
    return name.children[0] if name.children else name


def has_command_substitution(node: Any) -> bool:
    """Whether the word `node` holds a command substitution (`$(...)`, backquotes) anywhere.
    Its text is looked at first: a long word holding neither is not walked node by node."""
    data = shellwords.raw(node)
    if b"$(" not in data and b"`" not in data:
        return False
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "command_substitution":
            return True
        stack.extend(current.children)
    return False


def stdout_substitution(redirect: Any) -> Any:
    """The output process substitution a redirection sends standard output into (`>
    >(...)`, `>> >(...)`, `1> >(...)`, `&> >(...)`; not `2> >(...)`), else None."""
    given = redirect.child_by_field_name("destination")
    if given is None or not output_substitution(given):
        return None
    operator = next((c.type for c in redirect.children if not c.is_named), "")
    number = next((c for c in redirect.children if c.type == "file_descriptor"), None)
    if operator not in (">", ">>", ">|", "&>", "&>>"):
        return None
    return given if number is None or shellwords.text(number) == "1" else None


def stdout_writer(statement: Any) -> Any:
    """The simple command whose output a redirected statement's redirection takes: bash
    redirects the last command of `a | b > f` and `a && b > f` (tree-sitter hangs the
    redirection on the whole). None when it is not one, or is a filter passing on lines
    that do not come from a pipe."""
    node, piped = statement.child_by_field_name("body"), False
    while node is not None and node.type != "command":
        inner = [c for c in node.children if c.is_named and c.type != "comment"]
        if node.type in ("pipeline", "list"):
            piped = node.type == "pipeline" and len(inner) > 1
            node = inner[-1] if inner else None
        elif node.type == "redirected_statement":
            node = node.child_by_field_name("body")
        elif node.type in ("subshell", "compound_statement") and len(inner) == 1:
            node, piped = inner[0], False
        else:
            return None
    if node is None or piped:
        return node
    name = node.child_by_field_name("name")
    program = literal(value(first(name))) if name is not None else None
    return None if (program or "").rsplit("/", 1)[-1] in PASS_LINES_ON | {"cat"} else node


def output_substitution(node: Any) -> bool:
    """Whether a node is an output process substitution, `>(...)`."""
    return node.type == "process_substitution" and node.child(0).type == ">("


def redirect_input(node: Any) -> Stdin | None:
    """The input a redirection gives (None: it is an output redirection)."""
    if node.type == "heredoc_redirect":
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        return Stdin(shellwords.text(body) if body is not None else "", "heredoc")
    if node.type == "herestring_redirect":
        word = next((c for c in node.children if c.is_named), None)
        return Stdin(script_text(word) if word is not None else "", "herestring")
    if node.type == "file_redirect":
        operator = next((c.type for c in node.children if not c.is_named), "")
        if operator in ("<", "<>") and not any(
            c.type == "file_descriptor" and shellwords.text(c) != "0" for c in node.children
        ):
            given = node.child_by_field_name("destination")
            if given is not None and given.type == "process_substitution":
                return Stdin(None, "pipe", given)  # `< <(find ...)`: what it prints
            return Stdin(None, "file")
    return None


def script_text(node: Any) -> str:
    """The text a shell reading this word as a script gets (expansions left as written, so
    the nested reading sees them as unknown)."""
    kind = node.type
    raw = shellwords.text(node)
    if kind == "raw_string":
        return raw[1:-1]
    if kind == "string":
        return shellwords._unescape_in_quotes(raw[1:-1])
    if kind == "ansi_c_string":
        return shellwords.ansi_c(raw[2:-1]).replace(UNKNOWN, "$_")
    if kind == "word":
        out, escaped = [], False
        for char in raw:
            if escaped or char != "\\":
                out.append(char)
                escaped = False
            else:
                escaped = True
        return "".join(out)
    if kind == "concatenation":
        parts, at = [], node.start_byte
        for child in node.children:
            if child.start_byte > at:
                gap = shellwords.raw(node)[
                    at - node.start_byte : child.start_byte - node.start_byte
                ]
                parts.append(gap.decode("utf-8", "replace"))
            parts.append(script_text(child))
            at = child.end_byte
        return "".join(parts)
    return raw


def matches(pattern: str, argv: list[str]) -> bool:
    """Whether `argv` fits a command pattern (first word the program, the others each some
    argument, in any order)."""
    import shlex  # lazy: only configured patterns need these
    from fnmatch import fnmatchcase

    try:
        words = shlex.split(pattern)
    except ValueError:
        words = pattern.split()
    if not words or not argv or not fnmatchcase(os.path.basename(argv[0]), words[0]):
        return False
    return all(any(fnmatchcase(arg, word) for arg in argv[1:]) for word in words[1:])


def filtered_find(items: list[Item], tests: list[list[Item] | None]) -> list[Item]:
    """`find`'s words `items` with the tests `tests` (`grep_path_tests`) put before its
    expression: what its lines become through the greps a pipe takes them through. Its
    words as they are when it is not find, prints other than its paths one a line
    (`-printf`, `-print0`, `-ls`), holds a word not known, or a grep's filter is no test."""
    from gates.findexpr import options_end

    words = [item.literal for item in items]
    if (words[0] or "").rsplit("/", 1)[-1] != "find" or any(t is None for t in tests):
        return items
    if any(w is None or w in FIND_OTHER_PRINTS for w in words[1:]):
        return items
    at = 1 + options_end(words[1:])
    while at < len(words) and not (words[at] or "x").startswith(("-", "(", "!", ")")):
        at += 1  # the roots
    added = [item for test in tests for item in test or ()]
    rest = [Item("("), *items[at:], Item(")")] if at < len(items) else []
    return [*items[:at], *added, *rest]
