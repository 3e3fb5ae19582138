"""Which of the paths the gate guards under fd's search root (`gates.findreach`'s samples:
git's files in `.git` and `.beads/.git`, the store's own files, Claude Code's settings) fd's
filters let the command it runs (`-x`, `-X`) reach: `fd -H -e pack -x rm` removes git's
pack files. The filters are read as fd reads them: the pattern and each `--and` (a regular
expression searched in the name, smart case; `-g` a glob, `-F` a plain string, `-p` on the
whole path), `-e`, `-t`, `-E` (a glob on a name on the way), `--max-depth`, `--min-depth`,
`--exact-depth`. fd's own skipping of hidden and ignored files is not counted on (`-H`,
`-u`, `--no-ignore` bring them in, and fd's versions differ on `.git`).
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase, translate

from gates.findexpr import REF, ref_name
from gates.findreach import FILE, FOLDER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from gates.options import Options

# fd's `--type` values: the kinds of the samples (files, folders) each can match.
TYPES = {
    **dict.fromkeys(("f", "file"), FILE),
    **dict.fromkeys(("d", "dir", "directory"), FOLDER),
    **dict.fromkeys(("x", "executable", "e", "empty"), FILE | FOLDER),  # either can be
    **dict.fromkeys(("l", "symlink", "s", "socket", "p", "pipe"), frozenset()),
    **dict.fromkeys(("b", "block-device", "c", "char-device"), frozenset()),
}


def exec_start(word: str) -> tuple[str, str] | None:
    """Whether `word` starts fd's command (`-x`, `--exec`, `-X`, `--exec-batch`, `-Hx`,
    `--exec=rm`): the flags written before it in the same word and the command's first word
    written after it ("" for none); None when it does not."""
    if word in ("--exec", "--exec-batch"):
        return "", ""
    if word.startswith(("--exec=", "--exec-batch=")):
        return "", word.partition("=")[2]
    if not word.startswith("-") or word.startswith("--"):
        return None
    for at, letter in enumerate(word[1:]):
        if letter in "xX":
            return (word[: 1 + at] if at else ""), word[2 + at :]
        if letter in VALUES:
            return None  # the rest of the word is that option's value
    return None


VALUES = "dtEeSocj"  # fd's short options taking a value


def fd_reaches(
    read: Options,
    patterns: list[str | None],
    root: str,
    samples: list[tuple[str, frozenset[str]]],
    unread: bool = False,
    tick: Callable[[], None] = lambda: None,
) -> list[str]:
    """The `samples` (paths relative to the search root `root`, an absolute path, with
    their kind) fd's filters in `read` (its options) and `patterns` (the pattern and each
    `--and`; None: not known) let through, in their order; the first alone when they are
    not all known (`unread`: a word of fd's own held in a variable). `tick` is called once
    a sample (the judge's clock)."""
    if unread or None in patterns:
        return [samples[0][0]] if samples else []
    known = [p for p in patterns if p is not None]
    glob, fixed = read.has("g", "glob"), read.has("F", "fixed-strings")
    full = read.has("p", "full-path")
    extensions = [e.lower().lstrip(".") for e in _values(read, "e", "extension")]
    kinds = [TYPES.get(t) for t in _values(read, "t", "type")]
    kinds = [] if None in kinds else kinds  # one fd does not know: taken as no filter
    excluded = _exclusions(_values(read, "E", "exclude"))
    low, high = _depths(read)
    tests = [_matcher(p, glob, fixed, _folds(read, p)) for p in dict.fromkeys(known)]
    # A branch's name when the refs were not read: `main`, and one each pattern can match.
    refs = ["main", *(n for p in known if (n := ref_name(p) if glob else _letters(p)))]

    def passes(relative: str, kind: frozenset[str]) -> bool:
        parts = relative.split("/")
        if not low <= len(parts) <= high or excluded(parts, kind):
            return False
        name = parts[-1]
        if kinds and not any(kind & k for k in kinds):
            return False
        if extensions and not any(name.lower().endswith(f".{e}") for e in extensions):
            return False
        text = os.path.join(root, relative) if full else name
        return all(test(text) for test in tests)

    found = []
    for relative, kind in samples:
        tick()
        names = [relative.replace(REF, n) for n in refs] if REF in relative else [relative]
        found += [name for name in names if passes(name, kind)][:1]
    return found


def _values(read: Options, short: str, long: str) -> list[str]:
    return read.values.get(short, []) + read.values.get(long, [])


def _depths(read: Options) -> tuple[int, int]:
    """`--min-depth`, `--max-depth` (`-d`), `--exact-depth`: the depths fd reaches (a value
    not a number counts as none)."""
    low, high = 0, 1 << 30
    for name in ("min-depth", "exact-depth"):
        low = max([low, *(int(v) for v in read.values.get(name, []) if v.isdigit())])
    for name in ("d", "max-depth", "exact-depth"):
        high = min([high, *(int(v) for v in read.values.get(name, []) if v.isdigit())])
    return low, high


def _folds(read: Options, given: str) -> bool:
    """Whether the pattern ignores case: `-i`, or smart case (no upper-case letter) without
    `-s` (both given: it may)."""
    forced = read.has("i", "ignore-case")
    return forced or not (read.has("s", "case-sensitive") or any(c.isupper() for c in given))


def _matcher(given: str, glob: bool, fixed: bool, fold: bool) -> Callable[[str], bool]:
    """A test of a name (or a whole path) against one fd pattern."""
    case = str.lower if fold else str
    if fixed:
        return lambda text: case(given) in case(text)
    if glob:
        return lambda text: fnmatchcase(case(text), case(given))
    try:
        search = re.compile(given, re.IGNORECASE if fold else 0).search
    except (re.error, OverflowError, RecursionError):
        return lambda text: True  # a pattern Python cannot read: it may match
    return lambda text: search(text) is not None


def _letters(given: str) -> str:
    """A regular expression's letters, digits and `-`: a name it is likely to match."""
    return re.sub(r"[^A-Za-z0-9-]", "", given)


def _exclusions(excludes: list[str]) -> Callable[[list[str], frozenset[str]], bool]:
    """Whether fd's `--exclude` globs leave a path (its names, and its kind) out: a glob
    without `/` (but a trailing one, for folders alone) matches a name on the way, as in a
    .gitignore file; another is taken to leave nothing out."""
    anywhere, folders = [], []
    for given in dict.fromkeys(excludes):
        glob = given.rstrip("/")
        if glob and "/" not in glob:
            (folders if given.endswith("/") else anywhere).append(translate(glob))
    any_name = re.compile("|".join(anywhere)).match if anywhere else None
    folder_name = re.compile("|".join(folders)).match if folders else None

    def excluded(parts: list[str], kind: frozenset[str]) -> bool:
        if any_name is not None and any(any_name(part) for part in parts):
            return True
        ways = parts if kind == FOLDER else parts[:-1]  # the folders on the way
        return folder_name is not None and any(folder_name(part) for part in ways)

    return excluded
