"""find's expression read as find reads it, and what evaluating it on a sample path can
give, for `gates.findreach` (which tries it on the files the gate guards under a search
root).

`parse` makes a tree of the tests after find's roots: its operators (`!`, `-a`, `-o`, `,`,
parentheses, with find's precedence) and its primaries by the words each takes
(`NO_VALUE`, `ONE_VALUE`, `-fprintf`'s two, `-exec` to its `;` or `+`); a word it does not
know, or one held in a variable where a primary goes, raises `Unread`. `outcomes` says what
the tree can give on a `Sample`: each value, with whether a given action ran and whether
`-prune` ran. A name or path test is matched as find's glob (`find_glob`); on a branch's
file (a name holding `REF`) with the names a branch may have; a test the sample cannot
decide (`-mtime`, `-size`, `-regex`, ...) goes either way.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A branch's name in a sample path: any name made of `REF_CHARS`.
REF = "\x00"
REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
PROBES = ("\x01", "\x01" * 5)  # names only a wildcard matches
ANY, TRUE, FALSE = frozenset((True, False)), frozenset((True,)), frozenset((False,))

# find's primaries by the words they take after them (-exec's run to `;` or `+`).
NO_VALUE = frozenset(
    (
        "-depth", "-d", "-mount", "-xdev", "-noleaf", "-ignore_readdir_race",
        "-noignore_readdir_race", "-daystart", "-follow", "-warn", "-nowarn", "-print",
        "-print0", "-ls", "-delete", "-prune", "-quit", "-true", "-false", "-empty",
        "-executable", "-readable", "-writable", "-nouser", "-nogroup",
    )
)  # fmt: skip
ONE_VALUE = frozenset(
    (
        "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
        "-lname", "-ilname", "-type", "-xtype", "-mtime", "-mmin", "-atime", "-amin", "-ctime",
        "-cmin", "-size", "-user", "-group", "-uid", "-gid", "-perm", "-links", "-inum",
        "-samefile", "-fstype", "-used", "-context", "-printf", "-fprint", "-fprint0", "-fls",
        "-maxdepth", "-mindepth", "-regextype", "-files0-from",
    )
)  # fmt: skip
RUNS = frozenset(("-exec", "-execdir", "-ok", "-okdir"))
# find's actions writing what they print into a file, and the action printing the same
# on standard output; the files that are its standard output, given as such a file.
PRINTS_INTO = {"-fprint": "-print", "-fprint0": "-print0", "-fprintf": "-printf", "-fls": "-ls"}
STDOUT_FILES = frozenset(("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"))
OPTIONS = frozenset(
    ("-depth", "-d", "-mount", "-xdev", "-noleaf", "-ignore_readdir_race", "-daystart",
     "-noignore_readdir_race", "-follow", "-warn", "-nowarn", "-maxdepth", "-mindepth",
     "-regextype", "-files0-from")
)  # fmt: skip
NAME_TESTS = ("-name", "-iname")
PATH_TESTS = ("-path", "-ipath", "-wholename", "-iwholename")


def options_end(words: list[str | None]) -> int:
    """Where find's own options end among its arguments `words` (its roots come next): `-H`,
    `-L`, `-P`, `-O` with its level (`-O3`) and `-D` with the word after it (`-D tree`), as
    find reads them before the starting points."""
    at = 0
    while at < len(words):
        word = words[at]
        if word in ("-H", "-L", "-P") or (word or "").startswith("-O") and word[2:].isdigit():
            at += 1
        elif word == "-D":
            at += 2
        else:
            break
    return min(at, len(words))


class Unread(Exception):
    """find's expression is not one the reading knows (an unknown word or primary)."""


def parse(tests: list[str | None]) -> tuple:
    """find's expression `tests` (the words after its roots) as a tree (`_Parser`); raises
    `Unread` when it is not one the reading knows."""
    node, end = _Parser(tests).expression(0)
    if end != len(tests):
        raise Unread
    return node


class Sample:
    """A path find may meet under the root: the path its tests see, its name and kind;
    `refs`, for a branch's file (a name ending in `REF`), names to try it with."""

    __slots__ = ("path", "name", "kind", "refs", "wide", "focus")

    def __init__(
        self,
        root_text: str,
        relative: str,
        kind: frozenset[str],
        refs: list[str],
        wide: bool = False,
        focus: int | None = None,
    ) -> None:
        top = root_text.rstrip("/") if root_text != "/" else ""
        self.path = f"{top}/{relative}" if relative else root_text
        self.name = relative.rsplit("/", 1)[-1] if relative else os.path.basename(top) or "/"
        self.kind = kind
        self.refs = refs if relative.endswith(REF) else None
        self.wide = wide  # any path of this depth: its path tests go either way
        self.focus = focus  # with `wide`: the name test it passes (-1: none; None: any)


def depth_limit(tests: list[str | None], option: str, pick: Any, default: int) -> int:
    """`-maxdepth` or `-mindepth` (`pick` of several; a value not a number: `default`)."""
    values = [tests[k + 1] for k in range(len(tests) - 1) if tests[k] == option]
    if not values or any(v is None or not v.isdigit() for v in values):
        return default
    return pick(int(v) for v in values if v is not None)


def ref_name(glob: str) -> str | None:
    """A name `glob` matches that is made only of ASCII letters, digits and `-` (None when
    it matches none)."""
    out = []
    at = 0
    while at < len(glob):
        char = glob[at]
        if char in "*?":
            out.append("a")
        elif char == "[" and (end := glob.find("]", at + 2)) > 0:
            choice = next((c for c in sorted(REF_CHARS) if fnmatchcase(c, glob[at : end + 1])), "")
            if not choice:
                return None
            out.append(choice)
            at = end
        else:
            if char == "\\" and at + 1 < len(glob):
                at += 1
                char = glob[at]
            if char not in REF_CHARS:
                return None
            out.append(char)
        at += 1
    return "".join(out) or None


def find_glob(given: str) -> str:
    """find's glob as `fnmatchcase` reads it: a backslash escapes the next character."""
    out = []
    at = 0
    while at < len(given):
        if given[at] == "\\" and at + 1 < len(given):
            at += 1
            out.append(given[at] if given[at].isalnum() else f"[{given[at]}]")
        else:
            out.append(given[at])
        at += 1
    return "".join(out)


class _Parser:
    """find's expression as a tree: ("and"|"or"|",", [node, ...]), ("not", node),
    ("test", word, value, index in the tests, `_Matcher` of a name or path test or None).
    Precedence: `()` > `!` > `-a` (or none) > `-o` > `,`."""

    def __init__(self, tests: list[str | None]) -> None:
        self.tests = tests

    def word(self, at: int) -> str | None:
        if at >= len(self.tests):
            return None
        word = self.tests[at]
        if word is None:
            raise Unread
        return word

    def expression(self, at: int) -> tuple[tuple, int]:
        node, at = self.alternatives(at)
        nodes = [node]
        while self.word(at) == ",":
            node, at = self.alternatives(at + 1)
            nodes.append(node)
        if at < len(self.tests) and self.word(at) != ")":
            raise Unread
        return (",", nodes), at

    def alternatives(self, at: int) -> tuple[tuple, int]:
        node, at = self.conjunction(at)
        nodes = [node]
        while self.word(at) in ("-o", "-or"):
            node, at = self.conjunction(at + 1)
            nodes.append(node)
        return ("or", nodes), at

    def conjunction(self, at: int) -> tuple[tuple, int]:
        node, at = self.unary(at)
        nodes = [node]
        while (word := self.word(at)) is not None and word not in (")", ",", "-o", "-or"):
            if word in ("-a", "-and"):
                at += 1
            node, at = self.unary(at)
            nodes.append(node)
        return ("and", nodes), at

    def unary(self, at: int) -> tuple[tuple, int]:
        word = self.word(at)
        if word in ("!", "-not"):
            inner, at = self.unary(at + 1)
            return ("not", inner), at
        if word == "(":
            inner, at = self.expression(at + 1)
            if self.word(at) != ")":
                raise Unread
            return inner, at + 1
        if word in NO_VALUE:
            return ("test", word, None, at, None), at + 1
        if word in ONE_VALUE or (word or "").startswith("-newer"):
            if at + 1 >= len(self.tests):
                raise Unread
            given = self.tests[at + 1]
            return ("test", word, given, at, _matcher(word, given)), at + 2
        if word == "-fprintf":
            return ("test", word, None, at, None), at + 3
        if word in RUNS:
            end = next(
                (k for k in range(at + 1, len(self.tests)) if self.tests[k] in (";", "+")),
                len(self.tests) - 1,
            )
            return ("test", word, None, at, None), end + 1
        raise Unread


Outcome = tuple  # (the expression's value, the action ran, -prune ran)


def outcomes(node: tuple, sample: Sample, action: int) -> set[Outcome]:
    """What evaluating `node` on `sample` can give: each possible value, with whether the
    action at index `action` ran and whether `-prune` ran (tests the sample cannot decide,
    `-mtime`, `-size`, ..., can go either way)."""
    if node[0] == "not":
        return {(not v, ran, p) for v, ran, p in outcomes(node[1], sample, action)}
    if node[0] in ("and", "or", ","):
        stops = {"and": False, "or": True}.get(node[0])  # the value that ends the list
        found = outcomes(node[1][0], sample, action)
        for child in node[1][1:]:
            if all(value is stops for value, _r, _p in found):
                break
            after = outcomes(child, sample, action)
            found = {
                outcome
                for value, ran, pruned in found
                for outcome in (
                    [(value, ran, pruned)]
                    if value is stops
                    else [(v, ran or r, pruned or p) for v, r, p in after]
                )
            }
        return found
    _kind, word, given, index, matcher = node
    if index == action:
        return {(True, True, False), (False, True, False)}
    if word == "-prune":
        return {(True, False, True)}
    if matcher is not None:
        return {(value, False, False) for value in matcher.values(sample, index)}
    return {(value, False, False) for value in _test(word, given, sample)}


class _Matcher:
    """A name or path test (`-name`, `-ipath`, ...) made ready to try on samples."""

    __slots__ = ("match", "fold", "on_path", "any_ref")

    def __init__(self, word: str, given: str) -> None:
        self.fold = str.lower if word.startswith("-i") else str
        glob = self.fold(find_glob(given))
        self.match = re.compile(translate(glob)).match
        self.on_path = word in PATH_TESTS
        self.any_ref = ref_name(glob) is not None  # a branch can have a name it matches

    def values(self, sample: Sample, index: int) -> frozenset[bool]:
        """The values the test (at `index` in the tests) can have on `sample` (on a
        branch's file: True when one of the names tried matches, and False too, since a
        branch can be named otherwise)."""
        if sample.wide:
            if self.on_path or sample.focus is None:
                return ANY
            return TRUE if index == sample.focus else FALSE if sample.focus < 0 else ANY
        text = sample.path if self.on_path else sample.name
        if sample.refs is None:
            return TRUE if self.match(self.fold(text)) else FALSE
        # Whether it matches some branch name, and whether it matches every name tried
        # and names only wildcards match (then any name, as `-path '*/.git/*'` does).
        hits = [bool(self.match(self.fold(text.replace(REF, n)))) for n in sample.refs]
        some = self.any_ref if not self.on_path else any(hits)
        if not some:
            return FALSE
        every = all(hits) and all(self.match(self.fold(text.replace(REF, n))) for n in PROBES)
        return TRUE if every else ANY


def _matcher(word: str, given: str | None) -> _Matcher | None:
    return _Matcher(word, given) if given is not None and word in NAME_TESTS + PATH_TESTS else None


def _test(word: str, given: str | None, sample: Sample) -> frozenset:
    """The values a primary other than a name or path test can have on the sample."""
    if word in NAME_TESTS or word in PATH_TESTS:  # its value not known
        return ANY
    if word in ("-type", "-xtype"):
        letters = frozenset((given or "").split(","))
        if not given or not letters <= frozenset("bcdpflsD"):
            return ANY
        if sample.kind <= letters:
            return TRUE
        return FALSE if not sample.kind & letters else ANY
    if word == "-false":
        return FALSE
    if word in OPTIONS or word in ("-true", "-print", "-print0", "-ls", "-quit", "-printf"):
        return TRUE
    if word in ("-fprint", "-fprint0", "-fprintf", "-fls"):
        return TRUE
    return ANY
