"""The destructive-op gate's rules for `find` and `fd` (`fdfind`): what they delete
(`find -delete`, `rm` run on each match) and the commands they run on what they find
(`find -exec`, `fd -x`), judged as the gate judges them written out (`gates.rules`).

A deletion is judged as `rm -r` of each place searched, unless a name filter surely leaves
.git, .beads and .claude out (with find's operators, as `gates.findreach` reads them).
Another command is judged with what can match in place of `{}` (put in inside a word too,
as find and fd do): the place searched itself when it can be a match, else the paths under
it whose names match the filters a match can pass (`find . -name '*.txt' -exec mv {}
{}.bak ';'` as `mv ./*.txt ...`). Where find's root holds the work tree's .git, the store
or .claude, what its tests (`gates.findreach`: `-name HEAD`, `-name '*.pack'`, `-name
config.yaml`) or fd's filters (`gates.fdreach`: `-e pack`) let it reach inside them is
judged too, as deleting or writing there.
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase
from functools import partial

from gates import options
from gates.fdreach import VALUES, exec_start, fd_reaches
from gates.findexpr import ONE_VALUE, PRINTS_INTO, PROBES, RUNS, options_end
from gates.findreach import (
    FILE,
    FOLDER,
    guarded_samples,
    matched_names,
    reaches,
    reaches_git,
    ref_files,
)
from gates.rules_wrappers import PARALLEL_EXEC, literal_path
from gates.shelljudge import Judge
from gates.shellnodes import Item, Stdin, output_substitution
from gates.shellpaths import DENY, may_be, pattern, removal, write_target
from gates.shellwords import GLOBS, SENTINELS, STAR, as_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


GLOB_MARKS = str.maketrans(GLOBS)  # a glob's wildcards as a shell word's value marks them


def _words(items: list[Item]) -> list[str | None]:
    return [item.literal for item in items]


def _find(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    words = _words(items[1:])
    roots = []
    at = options_end(words)
    while at < len(words) and not (words[at] or "x").startswith(("-", "(", "!", ")")):
        roots.append(items[1 + at])
        at += 1
    if roots and all(root.word == "" for root in roots):
        return  # find searches no '' ("No such file or directory"), and nothing else
    roots = [root for root in roots if root.word != ""] or [Item(".")]
    tests = words[at:]
    deletes = "-delete" in tests
    deleting = []  # where the actions that delete are among the tests
    for i, word in enumerate(tests):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((k for k in range(i + 1, len(tests)) if tests[k] in (";", "+")), len(tests))
            run = items[1 + at + i + 1 : 1 + at + end]
            # What it runs on: what find's expression lets it run on.
            found = partial(_find_matches, j, tests=tests, action=i)
            inside = partial(_find_inside, j, tests=tests, action=i)
            # `find ... | parallel CMD`: CMD's `{.}`, `{/}`, `{//}`, `{/.}` are what find prints.
            piped = items[1 + at + i] is PARALLEL_EXEC
            marks = FD_PLACEHOLDERS if piped else ("{}",)
            bases = partial(_find_bases, j, roots, tests, i) if piped else None
            if _runs_on_matches(j, run, roots, marks, depth, False, found, inside, bases):
                deletes = True
                deleting.append(i)
        elif word == "-delete":
            deleting.append(i)
            for root in roots:
                for sample in _find_inside(j, root, tests, i):
                    level, reason = write_target(sample.word, j.cwd)
                    j.note(
                        level,
                        reason.replace("writes into", "deletes in").replace("writes", "deletes"),
                    )
    _prints_into_files(j, items, at, tests, depth)
    if not deletes:
        return
    named, guarded, loose = _find_filters(tests)
    # A filter that can match .git, .beads or .claude, an operator or a -prune no longer
    # counts as letting the deletion reach them when find, read as it reads its expression,
    # surely runs no deleting action on them (`-name .git -prune -o -name '*.tmp' -delete`).
    if (guarded or loose) and all(_stays_out(j, root, tests, deleting) for root in roots):
        guarded = loose = False
    _deletes_under(j, program, roots, bool(named), guarded, loose)


# The words each of find's printing actions takes (itself included).
PRINT_WORDS = {"-print": 1, "-print0": 1, "-ls": 1, "-printf": 2, "-fprint": 2, "-fprint0": 2,
               "-fls": 2, "-fprintf": 3}  # fmt: skip


def _test_words(tests: list[str | None], k: int) -> int:
    """How many words find's primary at `tests[k]` takes, itself included (`-exec`'s run to
    its `;` or `+`)."""
    word = tests[k]
    if word in RUNS:
        end = next((e for e in range(k + 1, len(tests)) if tests[e] in (";", "+")), len(tests))
        return end + 1 - k
    if word in PRINT_WORDS:
        return PRINT_WORDS[word]
    return 2 if word in ONE_VALUE or (word or "").startswith("-newer") else 1


def _prints_into_files(
    j: Judge, items: list[Item], at: int, tests: list[str | None], depth: int
) -> None:
    """find's `-fprint FILE` (`-fprint0`, `-fprintf FILE FORMAT`, `-fls`): FILE, which find
    empties and writes whether or not anything matches, is judged as `>` onto it; the
    commands reading an output process substitution there (`-fprint >(xargs rm)`), as
    reading what find prints with `-print` (`-print0`, `-printf FORMAT`, `-ls`) in its
    place, and with no other action printing."""
    k = 0
    while k < len(tests):
        step = _test_words(tests, k)
        if tests[k] in PRINTS_INTO and k + 1 < len(tests):
            given = items[1 + at + k + 1]
            if given.node is not None and output_substitution(given.node):
                made = [*items[: 1 + at]]
                e = 0
                while e < len(tests):
                    size = _test_words(tests, e)
                    word = tests[e]
                    if e == k:
                        made += [
                            Item(PRINTS_INTO[word]),
                            *items[1 + at + e + 2 : 1 + at + e + size],
                        ]
                    elif word in PRINT_WORDS:
                        made += [Item("-true")] * size  # it prints elsewhere, and is true
                    else:
                        made += items[1 + at + e : 1 + at + e + size]
                    e += size
                j.reads_substitution(given.node, Stdin(None, "pipe", words=made), depth)
            else:
                j.note(*write_target(given.word, j.cwd))
        k += step


def _guarded_inside(j: Judge, root: Item) -> tuple[str, list[tuple[str, frozenset[str]]]] | None:
    """The search root's path and the sample paths (relative to it, with their kind) of
    what the gate guards under `root` (`gates.findreach.guarded_samples`): the files inside
    the work tree's .git and the store's .beads/.git, the store's own files, Claude Code's
    settings. None when the root holds none of them, or is not known (as a write to an
    unknown path is judged)."""
    path, _why = pattern(root.word, j.cwd)
    if path is None or any(c in path for c in SENTINELS):
        return None
    store = claude = None
    if path == j.tree or j.tree.startswith(path.rstrip("/") + "/"):
        lead = os.path.relpath(j.tree, path)
        at = "" if lead == "." else f"{lead}/"
        repos, store, claude = [f"{at}.git", f"{at}.beads/.git"], f"{at}.beads", f"{at}.claude"
    elif path == j.tree + "/.beads":
        repos = [".git"]  # the store's own files: as the words under the root are judged
    else:
        return None
    key = ("guarded", path)  # read once a judgement: the same for every find there
    if key not in j.git_cache:
        repos = [top for top in repos if os.path.isdir(os.path.join(path, top))]
        # The refs each repository holds: a name filter reaches a branch's file only when a
        # branch (or tag) has a name it matches.
        refs = {top: known for top in repos if (known := ref_files(os.path.join(path, top)))}
        j.git_cache[key] = guarded_samples(path, repos, refs, store, claude)
    samples = j.git_cache[key]
    return (path, samples) if samples else None


def _inside_words(root: Item, reached: list[str]) -> list[Item]:
    """Words for the sample paths `reached` under `root`."""
    top = root.word.rstrip("/")
    return [Item(f"{top}/{inner}") for inner in reached]


def _find_inside(j: Judge, root: Item, tests: list[str | None], action: int) -> list[Item]:
    """Words for what the gate guards under `root` (`_guarded_inside`) that find's action at
    `tests[action]` can run on (`gates.findreach`), the most telling first."""
    inside = _guarded_inside(j, root)
    if inside is None:
        return []
    path, samples = inside
    text = root.literal if root.literal is not None else path  # `~`: find is given the path
    return _inside_words(root, reaches_git(tests, action, text, samples, j.in_time))


# What a deleting find must leave alone under its root: the root itself, the folders the
# gate guards (as the root's children and deeper) and what is in them (a name no filter of
# the tests matches stands for the rest).
GUARD_SAMPLES = [
    ("", FOLDER),
    *(
        (f"{above}{name}{inner}", kind)
        for name in (".git", ".beads", ".claude")
        for above in ("", f"{PROBES[0]}/")
        for inner in ("", f"/{PROBES[0]}")
        for kind in (FOLDER, FILE)
    ),
]


def _stays_out(j: Judge, root: Item, tests: list[str | None], actions: list[int]) -> bool:
    """Whether find's expression, read as find reads it whatever its operators (`!`, `-o`,
    parentheses, `-prune`), surely runs none of the actions at `actions` on `root` itself,
    on a .git, .beads or .claude under it, nor on a file or folder in one that no filter
    names (`gates.findreach`). False when it cannot tell."""
    text = _root_text(j, root)
    if text is None:
        return False
    return all(reaches(tests, at, text, GUARD_SAMPLES, j.in_time) == [] for at in actions)


def _root_text(j: Judge, root: Item) -> str | None:
    """The search root as find is given it (`~`: the path the shell gives), None when not
    known."""
    if root.literal is not None:
        return root.literal
    text, _why = pattern(root.word, j.cwd)
    return None if text is None or any(c in text for c in SENTINELS) else text


def _find_filters(tests: list[str | None]) -> tuple[list[str | None], bool, bool]:
    """find's name filters among `tests`; whether one can match .git, .beads or .claude as
    a shell glob would (`guarded`); and whether, at the top of the work tree, they may fail to
    leave .git out (`loose`: find's `*` matches a leading dot; an operator can undo them)."""
    named = [
        tests[i + 1]
        for i, w in enumerate(tests[:-1])
        if w in ("-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex")
    ]
    guarded = any(
        n is None or may_be(n, ".git") or may_be(n, ".beads") or may_be(n, ".claude") for n in named
    )
    loose = (
        guarded
        or any(_find_may_match(n) for n in named)
        or any(
            w is None or w in ("-not", "!", "-o", "-or", "-prune", "-regex", "-iregex")
            for w in tests
        )
    )
    return named, guarded, loose


def _find_matches(j: Judge, root: Item, tests: list[str | None], action: int) -> list[Item] | None:
    """Words for what find can run the action at `tests[action]` on under `root`, read as
    find reads its expression (`gates.findreach`), when it leaves `root` itself out (a
    `-name` or `-path` it fails, `-mindepth`): a child or a deeper path named as a `-name`
    says (any name, when one no filter matches can be a match). None when the root itself
    can be a match, the expression is not read, or the root holds the work tree and the
    action may run on .git, .beads or .claude (judged as the root, then)."""
    text = _root_text(j, root)
    if text is None:
        return None
    either = FILE | FOLDER  # a root, or a path met, of either kind
    if reaches(tests, action, text, [("", either)], j.in_time) != []:
        return None
    if _holds_the_tree(j, root) and not _stays_out(j, root, tests, [action]):
        return None
    # The name filters one of which a match passes (any name, when it can pass none).
    names = matched_names(tests, action, text, j.in_time)
    return _under(root, names or ["*"])


def _find_bases(j: Judge, roots: list[Item], tests: list[str | None], action: int) -> list[Item]:
    """The base names of what find's action at `tests[action]` can run on (parallel's `{/}`,
    which the command, run in the current directory, reads as a name there): the names of
    the name filters a match can pass (any name when it can pass none), .git, .beads and
    .claude when one of them can be such a name, a root's own when it can be a match."""
    words: dict[str, Item] = {}
    either = FILE | FOLDER  # the root, of either kind
    for root in roots:
        text = _root_text(j, root)
        if text is None or reaches(tests, action, text, [("", either)], j.in_time) != []:
            base = root.word.rstrip("/").rsplit("/", 1)[-1] or "/"
            words.setdefault(base, Item(base))
        names = matched_names(tests, action, text, j.in_time) if text is not None else None
        for name in names or ["*"]:
            glob = name.replace("\\", "").translate(GLOB_MARKS)
            words.setdefault(glob, Item(glob))
            if _find_may_match(name):
                words.update((g, Item(g)) for g in GUARDED_NAMES)
    return list(words.values())


def _holds_the_tree(j: Judge, root: Item) -> bool:
    """Whether `root` is the top of the work tree or a folder holding it (or is unknown)."""
    path, _why = pattern(root.word, j.cwd)
    return path is None or path == j.tree or j.tree.startswith(path.rstrip("/") + "/")


def _under(root: Item, names: list[str]) -> list[Item]:
    """Words for the paths under `root` (a child or deeper) whose names match one of the
    glob patterns `names` (a backslash's escape is dropped: a wider reading)."""
    top = root.word.rstrip("/")
    words = []
    for name in names:
        glob = name.replace("\\", "").translate(GLOB_MARKS)
        words += [Item(f"{top}/{glob}"), Item(f"{top}/{STAR}/{glob}")]
    return words


def _runs_on_matches(
    j: Judge,
    run: list[Item],
    roots: list[Item],
    placeholders: tuple[str, ...],
    depth: int,
    appended: bool = False,
    found: Callable[[Item], list[Item] | None] | None = None,
    inside: Callable[[Item], list[Item]] | None = None,
    bases: Callable[[], list[Item]] | None = None,
) -> bool:
    """The command `find -exec` or `fd -x` runs on what it finds under `roots`: True when it
    is `rm`, `shred` or `unlink` (its `{}` judged as find's own `-delete`, the rest of it as
    written). Each placeholder is put in wherever it is written, inside a word too (as find
    and fd do; in a script `sh -c` is given, as text): `{}` as each word `found` gives for a
    root (the root itself when it gives None) and each file inside .git that `inside` gives;
    fd's `{//}` (a match's folder) as the root, `{.}` as the match without its extension,
    `{/}` and `{/.}` (its base name, which the command, run in the current directory, reads
    as a path there) as each name `bases` gives (`appended`: `{}` added at the end when no
    placeholder is written, as fd does)."""
    if not run:
        return False
    program = (run[0].literal or "").rsplit("/", 1)[-1]
    deletes = program in ("rm", "shred", "unlink")
    marks = re.compile("|".join(re.escape(p) for p in sorted(placeholders, key=len)[::-1]))
    written = any(marks.search(w.word) for w in run)
    full = [*run, Item("{}")] if appended and not written else run
    # `rm {}` is judged as find's own -delete; `shred` with no file is denied.
    besides = [] if program == "shred" else [w for w in full if not (deletes and w.literal == "{}")]
    named = bases() if bases is not None and any(
        "{/}" in w.word or "{/.}" in w.word for w in besides
    ) else [None]  # fmt: skip
    seen: set[tuple[str, ...]] = set()

    def judged(words: list[Item], values: dict[str, Item]) -> None:
        if j.level >= DENY:  # nothing can raise the verdict: the rest costs time alone
            return
        put = [_put(w, marks, values) for w in words]
        key = tuple(w.word for w in put)
        if key not in seen:
            seen.add(key)
            j.argv(put, None, depth)

    for root in roots:
        for match in (found(root) if found is not None else None) or [root]:
            for base in named:
                base = base or root
                values = {"{}": match, "{//}": root, "{.}": _stem(match), "{/}": base,
                          "{/.}": _stem(base)}  # fmt: skip
                judged(besides, values)
        for sample in inside(root) if inside is not None else ():
            base = Item(sample.word.rsplit("/", 1)[-1])
            parent = Item(sample.word.rsplit("/", 1)[0])
            judged(full, {"{}": sample, "{//}": parent, "{.}": _stem(sample), "{/}": base,
                          "{/.}": _stem(base)})  # fmt: skip
    return deletes


def _put(item: Item, marks: re.Pattern, values: dict[str, Item]) -> Item:
    """`item` with each placeholder `marks` finds in it replaced by its value."""
    if not marks.search(item.word):
        return item
    word = marks.sub(lambda m: values[m[0]].word, item.word)
    text = marks.sub(lambda m: as_text(values[m[0]].word), item.script())
    return Item(word, None, text)


def _stem(item: Item) -> Item:
    """The path without its extension (fd's `{.}`; a name's leading dot is no extension)."""
    base = item.word.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    if dot <= 0 or base == "..":
        return item
    return Item(item.word[: len(item.word) - len(base) + dot])


def _deletes_under(
    j: Judge, program: str, roots: list[Item], filtered: bool, guarded: bool, loose: bool
) -> None:
    """What `find -delete` (or `rm` run by `find -exec`, `fd -x`) removes under each root,
    judged as `rm -r` of the root. At the top of the work tree only a name filter
    (`filtered`) that surely leaves .git out (not `loose`) keeps it undecided; elsewhere a
    name filter that can match .git, .beads or .claude (`guarded`) is denied."""
    whole = (
        "it deletes through the whole work tree, .git included"
        if program == "find"
        else f"{program} deletes what it finds through the whole work tree"
    )
    for root in roots:
        level, reason = removal(root.word, j.cwd, j.tree)
        path, _why = pattern(root.word, j.cwd)
        if path == j.tree:  # the top of the tree: only a name filter keeps .git out
            if filtered and not loose:
                continue
            level, reason = DENY, whole
        elif level == 0 and guarded:
            level, reason = DENY, "its name filter can match .git, .beads or .claude"
        j.note(level, reason.replace("it removes", f"{program} deletes under"))


def _find_may_match(name: str | None) -> bool:
    """Whether a find name filter (`-name`, `-iname`, `-path`) can match .git, .beads or
    .claude (find's `*` matches a leading dot; case is ignored for `-iname`)."""
    if name is None:
        return True
    lowered = name.lower()
    return any(
        fnmatchcase(guarded, lowered) or fnmatchcase("./" + guarded, lowered) or guarded in lowered
        for guarded in (".git", ".beads", ".claude")
    ) or (name.startswith("*") and "/" in name)  # `-path '*/objects/*'`: inside .git too


GUARDED_NAMES = (".git", ".beads", ".claude")  # what a name filter must leave out
FD_PLACEHOLDERS = ("{}", "{/}", "{//}", "{.}", "{/.}")
FD_LONGS = {
    **dict.fromkeys(
        ("max-depth", "min-depth", "exact-depth", "exclude", "type", "extension", "size",
         "changed-within", "changed-before", "newer", "older", "owner", "format", "batch-size",
         "ignore-file", "color", "threads", "max-buffer-time", "max-results", "base-directory",
         "path-separator", "search-path", "and"),
        True,
    ),
    "ignore": False,  # not `--ignore-file`
}  # fmt: skip
# fd patterns that match every name: no filter.
FD_MATCH_ALL = frozenset(("", ".", "^", "$", ".*", ".+", "^.*", ".*$", "^.*$"))


def _fd(j: Judge, program: str, items: list[Item], stdin: Stdin | None, depth: int) -> None:
    """`fd [PATTERN] [PATH...] -x|-X CMD... [;]` (`fdfind` on Debian): CMD runs on what it
    finds, judged as find -exec's command is; fd's own skipping of hidden and ignored files is
    not counted on."""
    own: list[Item] = []
    runs: list[list[Item]] = []
    at = 1
    while at < len(items):
        start = exec_start(items[at].literal or "")
        if start is None:
            own.append(items[at])
            at += 1
            continue
        lead, head = start
        own += [Item(lead)] if lead else []
        end = next((k for k in range(at + 1, len(items)) if items[k].literal == ";"), len(items))
        runs.append([*([Item(head)] if head else []), *items[at + 1 : end]])
        at = end + 1
    if not runs:
        return
    read = options.read(_words(own), VALUES, FD_LONGS)
    positionals = [own[i] for i in read.positionals]
    roots = positionals[1:] + _fd_values(own, "search-path")
    patterns = [p.literal for p in positionals[:1]] + read.values.get("and", [])
    patterns = [p for p in patterns if p not in FD_MATCH_ALL]
    extensions = read.values.get("e", []) + read.values.get("extension", [])
    glob, fixed = read.has("g", "glob"), read.has("F", "fixed-strings")
    guarded = any(_fd_may_match(p, glob, fixed) for p in patterns) or any(
        not e or any(name.endswith("." + e.lower().lstrip(".")) for name in GUARDED_NAMES)
        for e in extensions
    )
    unread = any(i.literal is None for i in own)
    loose = guarded or read.has("p", "full-path") or unread
    names = _fd_names(patterns, extensions, glob, fixed, read.has("p", "full-path"))

    def found(root: Item) -> list[Item] | None:  # fd never runs a command on the root itself
        if _holds_the_tree(j, root) and (loose or not (patterns or extensions)):
            return None
        return _under(root, names)

    def inside(root: Item) -> list[Item]:  # what fd's filters let it reach in .git, ...
        guarded_in = _guarded_inside(j, root)
        if guarded_in is None:
            return []
        path, samples = guarded_in
        reached = fd_reaches(read, patterns, path, samples, unread, j.in_time)
        return _inside_words(root, reached)

    def bases() -> list[Item]:  # `{/}`: names in the current directory (a shell's `*`
        # leaves out the dot names fd can match: those the gate guards are added)
        words = [Item(name.replace("\\", "").translate(GLOB_MARKS)) for name in names]
        dotted = loose or not (patterns or extensions)
        return words + ([Item(name) for name in GUARDED_NAMES] if dotted else [])

    kept = j.cwd
    for given in _fd_values(own, "base-directory"):  # fd searches and runs from there
        path = pattern(given.word, j.cwd)[0]
        j.cwd = path if path is not None and literal_path(path) else None
    try:
        roots = roots or [Item(".")]
        deletes = False
        for run in runs:
            deletes = (
                _runs_on_matches(j, run, roots, FD_PLACEHOLDERS, depth, True, found, inside, bases)
                or deletes
            )
        if deletes:
            _deletes_under(j, program, roots, bool(patterns or extensions), guarded, loose)
    finally:
        j.cwd = kept


def _fd_names(
    patterns: list[str | None], extensions: list[str], glob: bool, fixed: bool, full: bool
) -> list[str]:
    """Glob patterns for the names fd's `patterns` and `extensions` let through, each alone
    (a regular expression, or a pattern on the `full` path: any name)."""
    names = [f"*.{e.lstrip('.')}" if e else "*" for e in extensions]
    for given in patterns:
        if given is None or full or not (glob or fixed):
            names.append("*")
        else:
            names.append(given if glob else f"*{given}*")
    return names or ["*"]


def _fd_values(own: list[Item], name: str) -> list[Item]:
    """The values of fd's long option `--NAME` (`--NAME V`, `--NAME=V`), as words."""
    found = []
    for at, item in enumerate(own):
        if item.literal == "--" + name and at + 1 < len(own):
            found.append(own[at + 1])
        elif item.word.startswith(f"--{name}="):
            found.append(Item(item.word.partition("=")[2]))
    return found


def _fd_may_match(name: str | None, glob: bool, fixed: bool) -> bool:
    """Whether an fd pattern (a regular expression searched in the file name; `glob`: a
    glob; `fixed`: a plain string) can match .git, .beads or .claude, case ignored."""
    if name is None:
        return True
    if glob:
        return _find_may_match(name)
    if fixed:
        return any(name.lower() in protected for protected in GUARDED_NAMES)
    try:
        return any(re.search(name, protected, re.I) for protected in GUARDED_NAMES)
    except (re.error, OverflowError, RecursionError):
        return True  # a pattern Python cannot read: it may


RULES_FIND: dict[str, Callable] = {"find": _find, "fd": _fd, "fdfind": _fd}
